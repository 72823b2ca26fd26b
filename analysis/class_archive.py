"""A class-data-sharing archive for the local Spark driver JVM, so that it starts quicker.

A local analysis starts a JVM that loads some 20,000 of Spark's classes before it computes
anything. The first analysis on a machine asks that JVM to write what it loaded into an
archive when it exits (``-XX:ArchiveClassesAtExit``, which adds about 10 s to that one
exit); every later JVM maps the archive instead of reading, parsing and verifying the
classes again (``-XX:SharedArchiveFile``). Measured on the 2-core development machine, a
one-point run's analysis from a cold JVM: 26.8 s without the archive, 19.0 s with it.

The archive lives in the artifact cache (``cache_dir("spark")``, about 150 MB) under a name
that changes with whatever decides which classes a JVM may take from it: the Java runtime
(its path, size and time) and the pyspark installation. A JVM whose settings add to the
class path (S3A's jars) neither writes nor maps one. A JVM that cannot use an archive (another runtime, a damaged file) starts as it
would without one and says nothing. It is written under a temporary name and renamed only
once its JVM has exited normally, so a JVM that is killed while it writes leaves no archive
that looks whole.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from brokers.jvm import cache_dir

#: Settings whose values change the class path of the driver JVM.
_CLASS_PATH_SETTINGS = ("jars", "packages", "classpath", "extraclasspath")
#: JVM logging of class sharing off: an archive that cannot be used is not an error.
_QUIET = "-Xlog:cds=off,cds+dynamic=off"
#: A temporary archive older than this was left by a JVM that was killed while writing.
_STALE_S = 3600.0


@dataclass(frozen=True)
class ClassArchive:
    """The archive for one runtime and class path: mapped if it is there, else written by
    the JVM at exit into ``pending`` and kept by :meth:`keep`."""

    path: Path
    pending: Path | None

    @property
    def writes(self) -> bool:
        """Whether the JVM writes it (there is none yet)."""
        return self.pending is not None

    @property
    def java_options(self) -> str:
        if self.pending is None:
            return f"-XX:SharedArchiveFile={self.path} {_QUIET}"
        return f"-XX:ArchiveClassesAtExit={self.pending} {_QUIET}"

    def keep(self, exited_normally: bool) -> None:
        """After the JVM has exited: keep the archive it wrote (under its final name) if it
        exited normally, else delete what it may have left."""
        if self.pending is None:
            return
        if exited_normally and self.pending.is_file() and self.pending.stat().st_size > 0:
            os.replace(self.pending, self.path)
        else:
            self.pending.unlink(missing_ok=True)


def class_archive(settings: dict[str, str], write: bool = True) -> ClassArchive | None:
    """The archive for a local driver JVM started with ``settings``: the one there, else
    one to write (if ``write``). None: no Java runtime found, or settings that add to the
    class path (the analysis of a run in S3 through S3A, rare on one machine: its archive
    would cost more to write than it saves)."""
    java = _java()
    if java is None or any(k.lower().endswith(_CLASS_PATH_SETTINGS) for k in settings):
        return None
    import pyspark

    stat = java.stat()
    key = {
        "java": [str(java), stat.st_size, stat.st_mtime_ns],
        "pyspark": [pyspark.__version__, str(Path(pyspark.__file__).parent)],
    }
    digest = hashlib.sha256(json.dumps(key).encode()).hexdigest()[:16]
    directory = cache_dir("spark")
    path = directory / f"classes-{digest}.jsa"
    if path.is_file():
        return ClassArchive(path, None)
    if not write:
        return None
    _remove_stale(directory)
    return ClassArchive(path, directory / f"classes-{digest}.{os.getpid()}.tmp")


def _java() -> Path | None:
    """The Java runtime pyspark starts (``JAVA_HOME``'s, else the one on the path)."""
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    if not found or not Path(found).is_file():
        return None
    return Path(found).resolve()


def _remove_stale(directory: Path) -> None:
    now = time.time()
    for left in directory.glob("classes-*.tmp"):
        with contextlib.suppress(OSError):
            if now - left.stat().st_mtime > _STALE_S:
                left.unlink()
