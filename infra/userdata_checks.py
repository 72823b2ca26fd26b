"""Checks of the user-data a machine boots with, as plain functions over its text: its
cloud-config shape (:func:`cloud_config_problems`), cloud-init's own schema
(:func:`cloud_init_schema`), and no literal credential in it
(:func:`user_data_credential_problems`: user-data is readable through the instance
metadata service), and its size within EC2's limit with room to spare
(:func:`size_problems`). :func:`written_files` gives the files it writes, gzipped ones
(``encoding: gz+b64``) unpacked.
"""

from __future__ import annotations

import base64
import gzip
import json
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import yaml

#: EC2 takes at most 16 KiB of user-data (before its base64 encoding) …
USER_DATA_LIMIT = 16 * 1024
#: … and a node's must leave this much of it free, for a recipe or a template that grows.
USER_DATA_MARGIN = 4 * 1024
#: Top-level cloud-config keys the templates use (others are suspicious typos).
CLOUD_CONFIG_KEYS = {"package_update", "packages", "ntp", "write_files", "runcmd", "bootcmd"}


#: A credential written in a file or command: ``password = x``, ``--password x``, ``requirepass x``.
_CREDENTIAL = re.compile(
    r"(?i)\b(?:pass(?:word)?|requirepass|masterauth|default_pass|cluster-password)"
    r"[\"']?[ \t]*(?:[=:>]|[ \t])[ \t]*[\"']?([^\s\"'<>,;]+)"
)


#: What a credential may be in user-data: a placeholder filled in at boot, a shell variable
#: (or a secret read into one), a ``printf`` format fed from one.
_DEFERRED = re.compile(r"^(?:@@[A-Z_]+@@|\$\{?[A-Z_]+\}?|\$\(read_secret|%s)$")


def user_data_credential_problems(text: str) -> list[str]:
    """Credentials in user-data (readable through the instance metadata service and
    ``DescribeInstanceAttribute``): every one must be a placeholder or a shell variable."""
    document = yaml.safe_load(text) or {}
    files = document.pop("write_files", None) or []
    places = [(f["path"], _content(f)) for f in files]
    places.append(("user-data", yaml.safe_dump(document)))  # runcmd and the rest
    return [
        f"{path}: a literal credential: {match.group(0)[:60]!r}"
        for path, content in places
        for line in content.splitlines()
        if not line.lstrip().startswith("#")  # comments
        for match in _CREDENTIAL.finditer(line)
        if not _DEFERRED.match(match.group(1))
    ]


def cloud_config_problems(text: str) -> list[str]:
    """Structural checks of one user-data document (beyond ``cloud-init schema``)."""
    if not text.startswith("#cloud-config\n"):
        return ["user-data does not start with '#cloud-config'"]
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        return [f"user-data is not YAML: {exc}"]
    if not isinstance(document, dict):
        return ["user-data is not a mapping"]
    problems = [
        f"unexpected top-level key {k!r}" for k in sorted(set(document) - CLOUD_CONFIG_KEYS)
    ]
    paths = [f.get("path") for f in document.get("write_files") or []]
    if len(paths) != len(set(paths)):
        problems.append("write_files names a path twice")
    if not document.get("runcmd"):
        problems.append("no runcmd: the node would do nothing")
    ntp = document.get("ntp") or {}
    if not ntp.get("enabled"):
        problems.append("time sync (ntp) not enabled")
    return problems


def written_files(text: str) -> dict[str, str]:
    """``write_files`` of a user-data document: path → content (unpacked)."""
    document = yaml.safe_load(text)
    return {f["path"]: _content(f) for f in document.get("write_files") or []}


def readable(text: str) -> str:
    """A user-data document with every packed file's content after it, as text: what a
    search for a value in it must read."""
    if "encoding: gz+b64" not in text:
        return text
    return "\n".join([text, *written_files(text).values()])


def _content(entry: dict[str, object]) -> str:
    content = entry.get("content", "")
    if entry.get("encoding") in ("gz+b64", "gzip+base64", "gz+base64"):
        return gzip.decompress(base64.b64decode(str(content))).decode()
    return str(content)


def size_problems(machines: dict[str, str]) -> list[str]:
    """Each machine's user-data (name → text) within EC2's 16 KiB, with
    :data:`USER_DATA_MARGIN` to spare."""
    most = USER_DATA_LIMIT - USER_DATA_MARGIN
    return [
        f"{name}: user-data of {size:,} bytes, more than {most:,} ({USER_DATA_LIMIT:,}, EC2's "
        f"limit, less {USER_DATA_MARGIN:,} to spare): pack or shorten what it writes"
        for name, text in sorted(machines.items())
        if (size := len(text.encode())) > most
    ]


#: Runs ``cloud-init schema --config-file``'s own handler once per file, in one process.
_SCHEMA_BATCH = """
import argparse, contextlib, io, json, sys
from cloudinit.config.schema import handle_schema_args
found = {}
for path in sys.argv[1:]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            handle_schema_args("schema", argparse.Namespace(
                config_file=path, docs=None, system=None, annotate=False))
        except SystemExit:
            pass
    found[path] = out.getvalue()
print(json.dumps(found))
"""


def cloud_init_schema_batch(texts: list[str]) -> list[list[str]] | None:
    """:func:`cloud_init_schema` for many documents at once: the handler of ``cloud-init
    schema --config-file`` run in one interpreter (that of the installed ``cloud-init``)."""
    binary = shutil.which("cloud-init")
    if binary is None:
        return None
    first = Path(binary).read_text(errors="replace").split("\n", 1)[0]
    interpreter = first[2:].strip() if first.startswith("#!") else "python3"
    with tempfile.TemporaryDirectory() as tmp:
        paths = []
        for i, text in enumerate(texts):
            path = Path(tmp) / f"user-data-{i}"
            path.write_text(text)
            paths.append(str(path))
        done = subprocess.run(
            [*interpreter.split(), "-c", _SCHEMA_BATCH, *paths],
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )
    if done.returncode != 0:
        raise RuntimeError(f"cloud-init schema batch failed: {done.stderr.strip()[-500:]}")
    found = json.loads(done.stdout)
    results = []
    for name in paths:
        output = found[name]
        valid = "Valid cloud-config:" in output and "Error" not in output
        results.append([] if valid else [line for line in output.splitlines() if line.strip()])
    return results


def cloud_init_schema(text: str) -> list[str] | None:
    """Errors reported by ``cloud-init schema --config-file`` ([] = valid); None if not installed."""
    binary = shutil.which("cloud-init")
    if binary is None:
        return None
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "user-data"
        path.write_text(text)
        done = subprocess.run(
            [binary, "schema", "--config-file", str(path)],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
    if done.returncode == 0:
        return []
    output = (done.stderr + done.stdout).strip()
    return [line for line in output.splitlines() if line.strip()] or [f"exit {done.returncode}"]
