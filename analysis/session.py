"""Building the Spark session: ``local[*]`` here, the cluster's own settings on EMR.

Only entry points call this; transforms take and return DataFrames.

In local mode the Spark driver is a JVM this process starts, and it is owned like a broker
(:mod:`brokers.watchdog`): it runs in a session of its own (a Ctrl-C in the terminal, or
a signal to the coordinator's process group, does not reach it — the coordinator decides
what stops it), its process group and its scratch directory (``spark.local.dir`` and the
JVM's ``java.io.tmpdir``) are registered with the watchdog, so a coordinator killed by
any signal leaves neither behind. A stopping signal that arrives while the JVM starts is
held until its process is known (an interrupt there used to leave a JVM whose start-up
failed running for good). :func:`owned_session` ends the JVM when its block ends: stopped
in order after the analysis, killed at once — no Java stack trace, nothing left — when
the block is interrupted.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import signal
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from importlib.resources import as_file, files
from pathlib import Path
from typing import Any

import py4j
from pyspark import SparkConf, SparkContext
from pyspark.sql import SparkSession

from analysis.class_archive import ClassArchive, class_archive
from analysis.storage import cluster_mode
from brokers.watchdog import WATCHDOG, processes_of
from workload.model.held_signals import held

#: A Spark session, for the callers that hold one but import no Spark.
Session = SparkSession
#: Logging of the local JVM (package data: a file, or a member of a zip on sys.path).
LOG_CONFIG = files("analysis") / "log4j2.properties"
#: Driver heap for local mode (every JVM gets an explicit -Xmx).
DEFAULT_DRIVER_MEMORY = os.environ.get("BROKERBENCH_SPARK_MEMORY", "2g")
#: How long a JVM told to exit (its stdin closed) may take before it is killed.
_EXIT_WAIT_S = 15.0
#: ... and one that writes the class archive as it exits (:mod:`analysis.class_archive`).
_ARCHIVE_EXIT_WAIT_S = 120.0


@dataclass
class _LocalJvm:
    """The local Spark driver JVM this process started: its process (a group leader) and
    its scratch directory."""

    process: subprocess.Popen[bytes]
    scratch: Path
    archive: ClassArchive | None = None

    def end(self, orderly: bool) -> None:
        """Make the JVM exit (orderly: by closing its stdin, which it watches; else, or if
        it does not exit in time, SIGKILL to its group), keep the class archive it wrote as
        it exited (if it did), then delete its scratch directory and release both from
        the watchdog."""
        group = self.process.pid
        exited = False
        try:  # (an interrupt while it exits still kills it and removes what it leaves)
            if orderly:
                with contextlib.suppress(OSError):
                    if self.process.stdin is not None:
                        self.process.stdin.close()
                wait = _ARCHIVE_EXIT_WAIT_S if self.writes_archive else _EXIT_WAIT_S
                with contextlib.suppress(subprocess.TimeoutExpired):
                    exited = self.process.wait(timeout=wait) == 0
        finally:
            _kill_group(group)
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.process.wait(timeout=_EXIT_WAIT_S)
            if self.archive is not None:
                with contextlib.suppress(OSError):
                    self.archive.keep(exited)
            shutil.rmtree(self.scratch, ignore_errors=True)
            WATCHDOG.release_group(group)
            WATCHDOG.release_dir(self.scratch)

    @property
    def writes_archive(self) -> bool:
        """Whether the JVM writes the class archive as it exits."""
        return self.archive is not None and self.archive.writes


#: The JVM this process runs the local analysis in (None: none started, or ended).
_jvm: _LocalJvm | None = None


#: Raw records up to this size are analysed in a JVM that compiles with C1 only
#: (``-XX:TieredStopAtLevel=1``): it lives seconds, and C2's compilations would not pay
#: back in that time. Measured on the 2-core development machine: a one-point run's
#: analysis 18.8 → 14.7 s from a cold JVM, 10,000,000 messages (16 MB of raw records)
#: 25.1 → 21.2 s. Above it the JVM keeps both compilers.
QUICK_JIT_BYTES = 64 * 1024 * 1024
#: Raw records up to this size are analysed with Spark's plans interpreted rather than
#: compiled to Java (``spark.sql.codegen.wholeStage`` off, expressions ``NO_CODEGEN``): a
#: small analysis runs some sixty short jobs, and compiling each one's code costs more than
#: it saves. Measured on the 2-core development machine, from a cold JVM: 215,000 messages
#: (850 KB of raw records) 23.3 → 19.6 s; 10,000,000 messages (15 MB) 36 → 66 s, hence the
#: low bound.
INTERPRETED_BYTES = 1024 * 1024
#: The Spark settings of an analysis whose plans are interpreted.
INTERPRETED = {
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
}
#: ... and of one whose plans are compiled (Spark's defaults).
COMPILED = {"spark.sql.codegen.wholeStage": "true", "spark.sql.codegen.factoryMode": "FALLBACK"}


def raw_bytes(run_dirs: list[Path]) -> int:
    """The size of the raw records of local run directories."""
    return sum(
        path.stat().st_size
        for run_dir in run_dirs
        for path in (run_dir / "raw").rglob("*")
        if path.is_file()
    )


def spark_session(
    app: str = "brokerbench-analysis",
    cores: int | None = None,
    settings: dict[str, str] | None = None,
    raw: int | None = None,
    write_archive: bool = True,
) -> SparkSession:
    """A session; ``settings`` adds Spark settings (e.g. ``analysis.storage.s3a_settings``);
    ``raw``, the bytes of raw records it will read, chooses the local JVM's compilers
    (:data:`QUICK_JIT_BYTES`) and whether Spark compiles its plans (:data:`INTERPRETED_BYTES`;
    None: both compilers, compiled plans); ``write_archive``: whether a new local JVM writes
    the class archive if there is none (:mod:`analysis.class_archive`; a JVM that does not
    end through :func:`end_local_jvm` should not)."""
    _quiet_py4j()
    with _own_sigint():
        if cluster_mode():
            builder = SparkSession.builder.appName(app)
            for key, value in (settings or {}).items():
                builder = builder.config(key, value)
            session = builder.getOrCreate()
        else:
            quick = raw is not None and raw <= QUICK_JIT_BYTES
            interpreted = raw is not None and raw <= INTERPRETED_BYTES
            session = _local_session(app, cores, settings or {}, quick, interpreted, write_archive)
    session.sparkContext.setLogLevel("ERROR")
    _quiet_accumulators(session.sparkContext)
    return session


def _quiet_accumulators(context: SparkContext) -> None:
    """The driver's accumulator server reads updates from the JVM on a socket; when the JVM
    is stopped (a failed analysis, an interrupt) its connection ends mid-read and the
    server would print the ``EOFError``'s stack trace. That end is expected: say nothing."""
    server = getattr(context, "_accumulatorServer", None)
    if server is not None:
        server.handle_error = lambda request, address: None


@contextlib.contextmanager
def _own_sigint() -> Iterator[None]:
    """Keep this process's Ctrl-C handler: a SparkContext installs its own, which calls
    into the JVM from inside the signal handler — in the middle of another call, with a
    stack trace — before it raises KeyboardInterrupt."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    handler = signal.getsignal(signal.SIGINT)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, handler)


@contextlib.contextmanager
def owned_session(
    app: str = "brokerbench-analysis",
    cores: int | None = None,
    settings: dict[str, str] | None = None,
    raw: int | None = None,
) -> Iterator[SparkSession]:
    """A session (:func:`spark_session`) whose local JVM ends with the block: stopped in
    order when the block ends, killed at once when it is left by an exception (a Ctrl-C:
    no Java stack trace, no JVM or scratch directory left)."""
    try:
        session = spark_session(app, cores, settings, raw)
        yield session
        session.stop()
        end_local_jvm(orderly=True)
    except BaseException:
        end_local_jvm(orderly=False)
        raise


def writes_class_archive() -> bool:
    """Whether the local JVM will write the class archive when it ends (the first analysis
    on a machine: :mod:`analysis.class_archive`)."""
    return _jvm is not None and _jvm.writes_archive


def end_local_jvm(orderly: bool) -> None:
    """End the local JVM this process started, if any (the next session starts another)."""
    global _jvm
    jvm, _jvm = _jvm, None
    if jvm is None:
        return
    if not orderly:  # what Python still holds of the session is dead with its JVM
        SparkSession._instantiatedSession = None
        SparkSession._activeSession = None
        SparkContext._active_spark_context = None
    gateway = SparkContext._gateway
    SparkContext._gateway = None
    SparkContext._jvm = None
    jvm.end(orderly)
    if gateway is not None:
        with contextlib.suppress(Exception):
            gateway.close()


def _local_session(
    app: str,
    cores: int | None,
    settings: dict[str, str],
    quick: bool = False,
    interpreted: bool = False,
    write_archive: bool = True,
) -> SparkSession:
    """A ``local[cores]`` session in a JVM this process owns (started unless running)."""
    global _jvm
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    conf = (
        SparkConf(loadDefaults=False)
        .setAppName(app)
        .setMaster(f"local[{cores or '*'}]")
        .set("spark.driver.memory", DEFAULT_DRIVER_MEMORY)
        .set("spark.driver.host", "127.0.0.1")
        .set("spark.driver.bindAddress", "127.0.0.1")
        .set("spark.ui.enabled", "false")
        .set("spark.sql.shuffle.partitions", str(max(2, (os.cpu_count() or 2))))
        .set("spark.sql.session.timeZone", "UTC")
        .set("spark.ui.showConsoleProgress", "false")
    )
    for key, value in {**(INTERPRETED if interpreted else COMPILED), **settings}.items():
        conf.set(key, value)
    if SparkContext._gateway is not None:  # the JVM of a session before is still running
        if _jvm is not None:
            conf.set("spark.local.dir", str(_jvm.scratch))
        return SparkSession.builder.config(conf=conf).getOrCreate()
    scratch = Path(tempfile.mkdtemp(prefix="brokerbench-spark-"))
    conf.set("spark.local.dir", str(scratch))
    archive = class_archive(settings, write_archive)
    # The JVM reads its logging configuration from a file while it starts (a zip member is
    # copied out for that long).
    with as_file(LOG_CONFIG) as log_config:
        conf.set(
            "spark.driver.extraJavaOptions",
            f"-Dlog4j2.configurationFile=file:{log_config} -Djava.io.tmpdir={scratch}"
            + (" -XX:TieredStopAtLevel=1" if quick else "")
            + (f" {archive.java_options}" if archive is not None else ""),
        )
        with held():  # the stopping signals wait until the JVM is up and watched
            WATCHDOG.watch_dir(scratch)
            try:
                gateway = _launch_gateway(conf)
            except BaseException:
                shutil.rmtree(scratch, ignore_errors=True)
                WATCHDOG.release_dir(scratch)
                raise
            process: subprocess.Popen[bytes] = gateway.proc
            WATCHDOG.watch_group(process.pid)
            _jvm = _LocalJvm(process, scratch, archive)
        context = SparkContext(conf=conf, gateway=gateway)
    return SparkSession(context)


def _launch_gateway(conf: SparkConf) -> Any:
    """Start the driver JVM (pyspark's launcher) as the leader of a session of its own."""
    from pyspark.java_gateway import launch_gateway

    return launch_gateway(conf, popen_kwargs={"start_new_session": True})


class _NotFromPy4j(logging.Filter):
    """Drops what py4j logs on the root logger: a Ctrl-C during a call to the JVM, with a
    stack trace. The interrupt itself is handled (the caller ends the JVM)."""

    def __init__(self) -> None:
        super().__init__()
        self.folder = str(Path(py4j.__file__).parent)

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.pathname.startswith(self.folder)


def _quiet_py4j() -> None:
    """Keep py4j's log records (a call to the JVM interrupted, its connection reset, each
    with a stack trace) off the terminal: its own loggers keep them to themselves, and
    those it logs on the root logger are dropped."""
    logging.getLogger("py4j").propagate = False
    root = logging.getLogger()
    if not any(isinstance(f, _NotFromPy4j) for f in root.filters):
        root.addFilter(_NotFromPy4j())


def _kill_group(group: int) -> None:
    """SIGKILL every process of the group and every descendant of one."""
    for pid in processes_of({group}):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
