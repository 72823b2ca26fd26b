"""Checks before a local run starts anything (no broker, no node process).

The results directory must be creatable and writable (a test file is written and
removed), its file system must have room for the raw records the run may write, and the
payload pools of the run's client processes must fit in the memory available. A failing
check raises :class:`~workload.model.errors.UserError`: one line naming the directory or the
figure, the estimate it was held against, and what to do (exit code 2).

The disk estimate is deliberately generous (it should fail only where a run would really
fill the disk): a closed-loop run is assumed to reach :data:`CLOSED_LOOP_MSGS_PER_S` per
sender worker, at most :data:`MAX_MSGS_PER_S_PER_CPU` per CPU core of this machine, and
every message costs :data:`RECEIVED_ROW_BYTES` (its received-identity row, uncompressed).
"""

from __future__ import annotations

import math
import os
import shutil
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from workload.engine.node import processes_for
from workload.model.errors import UserError, write_problem
from workload.model.sweep import SweepPoint

#: Messages per second a closed-loop sender worker is assumed to reach, at most …
CLOSED_LOOP_MSGS_PER_S = 20_000
#: … and all of them together, per CPU core of this machine.
MAX_MSGS_PER_S_PER_CPU = 50_000
#: Bytes per received message in ``raw/received`` (uncompressed row; files are zstd).
RECEIVED_ROW_BYTES = 30
#: Bytes per worker per second in ``raw/seconds`` (counters and three histograms).
SECOND_ROW_BYTES = 2_048
#: Bytes a payload costs in a pool beyond its size (the Python object around it).
PAYLOAD_OVERHEAD = 64
MIB = 1 << 20


@dataclass(frozen=True)
class DiskEstimate:
    """What a run may write under its run directory, and how that was worked out."""

    messages: int
    worker_seconds: int

    @property
    def bytes(self) -> int:
        return self.messages * RECEIVED_ROW_BYTES + self.worker_seconds * SECOND_ROW_BYTES

    def __str__(self) -> str:
        return (
            f"{_size(self.bytes)} (up to {self.messages:,} messages × {RECEIVED_ROW_BYTES} B + "
            f"{self.worker_seconds:,} worker-seconds × {SECOND_ROW_BYTES // 1024} KB)"
        )


def disk_estimate(points: Sequence[SweepPoint], cpus: int | None = None) -> DiskEstimate:
    """The raw records every sweep point may write, added up (the points run one by one)."""
    cpus = cpus or os.cpu_count() or 1
    messages = worker_seconds = 0
    for point in points:
        load = point.load
        senders = load.sender_workers
        per_worker = load.rate or CLOSED_LOOP_MSGS_PER_S
        rate = min(senders * per_worker, cpus * MAX_MSGS_PER_S_PER_CPU)
        sent = rate * load.duration
        if load.messages is not None:
            sent = min(sent, load.messages * senders)
        messages += int(sent)
        workers = senders + load.threads_of("receiver") * point.receiver_nodes
        worker_seconds += int(workers * (load.duration + load.idle_timeout))
    return DiskEstimate(messages, worker_seconds)


def pool_bytes(point: SweepPoint, cpus: int | None = None) -> int:
    """Memory of the payload pools of one sweep point: one pool in every sender process
    (receivers keep none), of payloads the distribution's average size."""
    load = point.load
    processes = load.sender_nodes * processes_for(load, "sender", cpus)
    return processes * load.pool_size * (math.ceil(load.message_size.average) + PAYLOAD_OVERHEAD)


def available_memory() -> int | None:
    """MemAvailable of /proc/meminfo in bytes; None where there is none (not Linux)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def check_results_dir(results: Path, estimate: DiskEstimate) -> None:
    """The results directory exists (created here if need be), takes a file, and has room."""
    try:
        if not results.is_dir():
            results.mkdir(parents=True)
    except OSError as exc:
        raise UserError(
            f"{results}: cannot create the results directory ({write_problem(exc)}); "
            "choose another with --results"
        ) from None
    try:
        with tempfile.NamedTemporaryFile(dir=results, prefix=".brokerbench-preflight-") as probe:
            probe.write(b"\0" * 4096)
            probe.flush()
            os.fsync(probe.fileno())
    except OSError as exc:
        raise UserError(
            f"{results}: cannot write results there ({write_problem(exc)}); "
            "make it writable or choose another with --results"
        ) from None
    free = shutil.disk_usage(results).free
    if free < estimate.bytes:
        raise UserError(
            f"{results}: {_size(free)} free, but this run may write {estimate}; "
            "free some space, shorten the run, or choose another --results directory"
        )


def check_memory(points: Sequence[SweepPoint], available: int | None) -> None:
    """The largest sweep point's payload pools fit in the memory available."""
    if available is None or not points:
        return
    point = max(points, key=pool_bytes)
    needed = pool_bytes(point)
    if needed > available:
        load = point.load
        raise UserError(
            f"sweep point {point.index} ({point.label}): its client processes' payload "
            f"pools need {_size(needed)} (pool_size {load.pool_size:,} × (message_size "
            f"{math.ceil(load.message_size.average):,} + {PAYLOAD_OVERHEAD}) B × "
            f"{load.sender_nodes * processes_for(load, 'sender')} sender processes) "
            f"but {_size(available)} of memory is available; lower pool_size or processes"
        )


def preflight(results: Path, points: Sequence[SweepPoint]) -> None:
    """Every check, before anything starts; raises :class:`UserError` on the first failure."""
    check_memory(points, available_memory())
    check_results_dir(results, disk_estimate(points))


def _size(n: float) -> str:
    units = ("B", "KB", "MB", "GB", "TB")
    i = 0
    while n >= 1024 and i < len(units) - 1:
        n /= 1024
        i += 1
    return f"{n:,.0f} B" if i == 0 else f"{n:,.1f} {units[i]}"
