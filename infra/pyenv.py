"""The analysis job's Python on EMR Serverless: a packed environment the stack builds.

EMR's own images run PySpark on Python 3.9 without the libraries the job imports, so the
stack ships an interpreter of its own: a tar.gz Spark unpacks next to the driver and every
executor (``spark.archives=s3://…/pyenv.tar.gz#environment``), whose ``bin/python`` runs
the job. It holds

* a relocatable CPython ≥ 3.11 for x86_64 Linux (a python-build-standalone ``install_only``
  build, as ``uv python install 3.11`` keeps it: the stack's ``emrPythonHome``, or found in
  uv's folder), copied as it is;
* in its ``site-packages``, brokerbench's wheel and every distribution the analysis needs
  but PySpark (which EMR's Spark brings), at the versions installed here
  (:func:`analysis_constraints`), as binary wheels for manylinux x86_64 and that Python.

The archive is made the same way every time — entries sorted, owned by root, dated at the
commit's time, gzip without a name or date — and cached under ``.cache/pyenv/`` by what
goes into it, so a second ``pulumi up`` (or ``preview``) of the same commit builds nothing.
"""

from __future__ import annotations

import gzip
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from infra.constraints import CLIENT_ENVIRONMENT, Constraints, client_constraints
from infra.settings import ROOT

#: What the analysis installs beyond the base dependencies; PySpark comes with EMR's Spark.
ANALYSIS_EXTRAS = ("analysis",)
EXTRA_REQUIREMENTS = ("boto3",)
PROVIDED_BY_SPARK = frozenset({"pyspark", "py4j"})
#: The wheels pip may take for the archive: EMR Serverless runs x86_64 Amazon Linux 2023.
PLATFORMS = ("manylinux2014_x86_64", "manylinux_2_17_x86_64", "manylinux_2_28_x86_64")
#: Where uv keeps the interpreters ``uv python install`` fetches.
UV_PYTHONS = Path(os.environ.get("UV_PYTHON_INSTALL_DIR") or Path.home() / ".local/share/uv/python")
_HOME = re.compile(r"^cpython-3\.(1[1-9])\.\d+-linux-x86_64-gnu$")


class PackError(ValueError):
    """The environment cannot be built (one line)."""


@dataclass(frozen=True)
class PythonHome:
    """A relocatable CPython: its folder and its ``major.minor``."""

    path: Path
    version: str

    @property
    def executable(self) -> Path:
        return self.path / "bin" / f"python{self.version}"


def python_home(path: Path) -> PythonHome:
    """``path`` as a relocatable CPython ≥ 3.11 (``bin/python3.X`` and ``lib/python3.X``)."""
    for minor in range(30, 10, -1):
        version = f"3.{minor}"
        if (path / "bin" / f"python{version}").exists() and (
            path / "lib" / f"python{version}"
        ).is_dir():
            return PythonHome(path, version)
    raise PackError(
        f"{path}: no relocatable CPython >= 3.11 there (bin/python3.X and lib/python3.X)"
    )


def find_python_home(configured: Path | None, search: Path | None = None) -> PythonHome | None:
    """The configured interpreter, else the newest CPython ≥ 3.11 for x86_64 Linux uv keeps."""
    if configured is not None:
        return python_home(configured)
    found = sorted(
        (
            p
            for p in (search or UV_PYTHONS).glob("cpython-3.*-linux-x86_64-gnu")
            if _HOME.match(p.name)
        ),
        key=lambda p: [int(x) for x in p.name.split("-")[1].split(".")],
    )
    return python_home(found[-1]) if found else None


def analysis_constraints(version: str) -> Constraints:
    """The analysis job's distributions at the versions installed here, for EMR's platform
    and ``version`` of Python; PySpark and Py4J left out (EMR's Spark brings them)."""
    environment = {**CLIENT_ENVIRONMENT, "python_version": version,
                   "python_full_version": f"{version}.0"}  # fmt: skip
    pinned = client_constraints(
        extras=ANALYSIS_EXTRAS, environment=environment, more=EXTRA_REQUIREMENTS
    )
    return Constraints(
        pins={n: v for n, v in pinned.pins.items() if n not in PROVIDED_BY_SPARK},
        unpinned={n: w for n, w in pinned.unpinned.items() if n not in PROVIDED_BY_SPARK},
    )


def environment_digest(home: PythonHome, wheel: Path, pins: dict[str, str]) -> str:
    """What the archive is made of, as a digest: the interpreter, the wheel, the pins."""
    digest = hashlib.sha256()
    digest.update(f"{home.path.name}\n{home.version}\n".encode())
    digest.update(hashlib.sha256(wheel.read_bytes()).digest())
    digest.update("".join(f"{n}=={v}\n" for n, v in sorted(pins.items())).encode())
    return digest.hexdigest()[:16]


def build_environment(
    home: PythonHome,
    wheel: Path,
    pins: dict[str, str],
    out_dir: Path,
    epoch: int,
    find_links: Iterable[Path] = (),
) -> Path:
    """The packed environment (cached in ``out_dir`` by :func:`environment_digest`)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    archive = out_dir / f"pyenv-{environment_digest(home, wheel, pins)}.tar.gz"
    if archive.exists():
        return archive
    with tempfile.TemporaryDirectory(prefix="brokerbench-pyenv-") as scratch:
        tree = Path(scratch) / "environment"
        shutil.copytree(home.path, tree, symlinks=True)
        site = tree / "lib" / f"python{home.version}" / "site-packages"
        site.mkdir(parents=True, exist_ok=True)
        requirements = [str(wheel), *(f"{n}=={v}" for n, v in sorted(pins.items()))]
        _pip_install(site, home.version, requirements, find_links)
        python = tree / "bin" / "python"
        if not python.exists():
            python.symlink_to(f"python{home.version}")
        scratch_archive = archive.with_suffix(".tmp")
        write_archive(tree, scratch_archive, epoch)
        scratch_archive.replace(archive)
    return archive


def _pip_install(
    site: Path, version: str, requirements: list[str], find_links: Iterable[Path]
) -> None:
    """Binary wheels for EMR's platform and ``version`` of Python into ``site``."""
    command = [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
               "--only-binary=:all:", "--implementation", "cp", "--python-version", version,
               "--target", str(site), "--no-compile", "--disable-pip-version-check"]  # fmt: skip
    for platform in PLATFORMS:
        command += ["--platform", platform]
    for folder in find_links:
        command += ["--no-index", "--find-links", str(folder)]
    done = subprocess.run([*command, *requirements], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise PackError(f"packing the analysis environment failed: {done.stderr.strip()[-500:]}")


def write_archive(tree: Path, archive: Path, epoch: int) -> None:
    """``tree``'s contents as a tar.gz: sorted entries, root-owned, dated ``epoch``,
    executables 0755 and the rest 0644, symlinks kept; gzip without a name or a date."""
    with (
        archive.open("wb") as raw,
        gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0, compresslevel=6) as packed,
        tarfile.open(fileobj=packed, mode="w", format=tarfile.PAX_FORMAT) as tar,
    ):
        for path in sorted(tree.rglob("*"), key=lambda p: p.relative_to(tree).as_posix()):
            if "__pycache__" in path.parts:
                continue
            info = tar.gettarinfo(str(path), arcname=path.relative_to(tree).as_posix())
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            info.mtime = epoch
            if info.isreg():
                info.mode = 0o755 if os.access(path, os.X_OK) else 0o644
                with path.open("rb") as handle:
                    tar.addfile(info, handle)
            else:
                if info.isdir():
                    info.mode = 0o755
                tar.addfile(info)


def default_out_dir() -> Path:
    return ROOT / ".cache" / "pyenv"
