"""Tools for the systems fetched rather than installed: the download cache, Maven Central
(``mvn``) and ``java`` command lines with an explicit heap limit.

Kept apart from :mod:`brokers.local` (process supervision): the analysis fetches its S3
connector jars with the same Maven helper.
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from brokers.errors import BrokerStartError, BrokerUnavailable


def cache_dir(*parts: str) -> Path:
    """Where downloaded artifacts live between runs (``BROKERBENCH_CACHE`` overrides)."""
    base = Path(os.environ.get("BROKERBENCH_CACHE") or Path.home() / ".cache" / "brokerbench")
    path = base.joinpath(*parts)
    path.mkdir(parents=True, exist_ok=True)
    return path


def maven_fetch(
    pom: Path, dest: Path, log: Callable[[str], None], goal_args: Sequence[str] = ()
) -> Path:
    """Copy the dependencies a pom lists into ``dest`` once (later calls reuse them).

    ``goal_args`` replaces the default ``dependency:copy-dependencies`` goal (e.g. to
    unpack a distribution). A partial download never counts as complete.
    """
    marker = dest / ".complete"
    if marker.exists():
        return dest
    mvn = shutil.which("mvn")
    if mvn is None:
        raise BrokerUnavailable(
            "mvn not found: install the Debian package maven (apt-get install maven)"
        )
    tmp = dest.with_name(dest.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    log(f"fetching {pom.parent.name} artifacts from Maven Central into {dest} (once)…")
    goal = list(goal_args) or [
        "dependency:copy-dependencies",
        "-DincludeScope=runtime",
    ]
    _run_maven([mvn, "-B", "-f", str(pom), *goal, f"-DoutputDirectory={tmp}"], pom, log)
    shutil.rmtree(dest, ignore_errors=True)
    tmp.rename(dest)
    marker.touch()
    return dest


_DOWNLOADED = re.compile(r"Downloaded from \S+: \S+ \((\d+(?:\.\d+)?) (B|kB|MB|GB)")
_UNIT = {"B": 1e-6, "kB": 1e-3, "MB": 1.0, "GB": 1e3}


def _run_maven(cmd: list[str], pom: Path, log: Callable[[str], None]) -> None:
    """Run mvn, showing download progress every few seconds; a failure names its last error."""
    try:
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, bufsize=1
        )
    except FileNotFoundError:
        raise BrokerUnavailable("mvn not found: install the Debian package maven") from None
    assert proc.stdout is not None
    files, megabytes, last_report = 0, 0.0, time.monotonic()
    errors: list[str] = []
    for line in proc.stdout:
        match = _DOWNLOADED.search(line)
        if match:
            files += 1
            megabytes += float(match.group(1)) * _UNIT[match.group(2)]
        elif "[ERROR]" in line:
            errors.append(line.strip())
        if time.monotonic() - last_report >= 5 and files:
            log(f"  … {files} files, {megabytes:,.0f} MB downloaded")
            last_report = time.monotonic()
    if proc.wait() != 0:
        raise BrokerStartError(f"mvn for {pom} failed: {errors[0] if errors else proc.returncode}")
    if files:
        log(f"  {files} files, {megabytes:,.0f} MB downloaded")


def jvm_missing(what: str, fetched: bool, client_module: str = "", client: str = "") -> str | None:
    """Why a JVM broker fetched from Maven Central cannot start here (one line), or None.

    ``what`` names the artifacts (e.g. "Kafka 3.9.1 jars"); ``client_module`` is the Python
    module its adapter needs (``client`` its distribution name, for the message).
    """
    if client_module and importlib.util.find_spec(client_module) is None:
        return f"{client or client_module} is not installed: pip install 'brokerbench[brokers]'"
    if shutil.which("java") is None:
        return "java not found: install the Debian package openjdk-17-jre-headless"
    if not fetched:
        if shutil.which("mvn") is None:
            return f"{what} not fetched and mvn not found: install the Debian package maven"
        return f"{what} not fetched yet: run 'brokerbench setup' (downloads from Maven Central)"
    return None


def java_command(
    main: str,
    classpath: Sequence[Path | str],
    xmx: str,
    args: Sequence[str] = (),
    jvm: Sequence[str] = (),
) -> list[str]:
    """A ``java`` command line with an explicit heap limit (every JVM here gets one)."""
    java = shutil.which("java")
    if java is None:
        raise BrokerUnavailable(
            "java not found: install the Debian package openjdk-17-jre-headless"
        )
    return [
        java,
        f"-Xmx{xmx}",
        f"-Xms{xmx}" if xmx.endswith("m") and int(xmx[:-1]) <= 512 else "-Xms64m",
        "-XX:+UseSerialGC" if xmx.endswith("m") and int(xmx[:-1]) <= 256 else "-XX:+UseG1GC",
        *jvm,
        "-cp",
        os.pathsep.join(str(p) for p in classpath),
        main,
        *args,
    ]
