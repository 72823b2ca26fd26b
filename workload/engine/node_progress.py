"""What a node part reports to the coordinator about once a second (:class:`Progress`): its
totals, the processing latencies its receivers recorded since its previous report
(:class:`Interval`) and the identities its workers confirmed or received since then
(:class:`workload.engine.caught_up.IdentityReporter`), every node at about the same moment
(:func:`until_next_report`).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import numpy as np

from workload.engine.recording import WorkerRecorder


@dataclass(frozen=True)
class Progress:
    """What a node's process reports to the coordinator about once a second.

    The counters are totals since the point started; ``processing_latency`` holds only the
    processing-latency histogram counts (``{bucket: count}``, buckets of
    :mod:`workload.engine.histogram`) recorded since the process's previous report, so that the
    coordinator can merge the reports of every process into percentiles of the interval.
    """

    point: int
    role: str
    node: int
    part: int
    sent: int
    received: int
    errors: int
    done: bool = False
    #: Of ``received``: messages the broker delivered again (flagged as redeliveries).
    redelivered: int = 0
    processing_latency: dict[int, int] = field(default_factory=dict)
    #: The identities confirmed (a sender part) or received (a receiver part) since the
    #: previous report, as ranges ``[lo, hi]`` of :func:`workload.engine.caught_up.keys`;
    #: None once they cannot be followed (the coordinator then does not end the point early).
    identities: np.ndarray | None = None


class Interval:
    """What a process's receivers recorded since its previous progress report.

    Read from the per-second statistics the workers keep anyway — nothing is added to the
    per-message path: each report compares the processing-latency counts and redeliveries
    of the seconds that may have changed since the previous report with what that report
    saw. A second keeps changing for a moment after it ends (a worker that took its time
    stamp just before), so the last :data:`SETTLE` seconds before the previous report are
    read again. Workers write while this reads: the reads are single dictionary operations
    (a ``get``, a ``copy``), which are atomic in CPython.
    """

    #: Seconds before the previous report's that are read again.
    SETTLE = 2
    #: The most seconds one report reads (a wall clock stepped far ahead).
    SPAN = 60

    def __init__(self, recorders: list[WorkerRecorder], now_s: int) -> None:
        self.recorders = recorders
        self.last = now_s
        #: Redeliveries counted so far (a total, like the other counters).
        self.redelivered = 0
        #: (recorder, second) → the counts and redeliveries the previous report saw.
        self.seen: dict[tuple[int, int], tuple[dict[int, int], int]] = {}

    def take(self, now_s: int) -> dict[int, int]:
        """The processing-latency counts recorded since the previous call; updates
        :attr:`redelivered`."""
        first = max(min(self.last, now_s) - self.SETTLE, now_s - self.SPAN)
        delta: dict[int, int] = {}
        seen: dict[tuple[int, int], tuple[dict[int, int], int]] = {}
        for r, recorder in enumerate(self.recorders):
            seconds = recorder.seconds
            for second in range(first, now_s + 1):
                stats = seconds.get(second)
                if stats is None:
                    continue
                counts = stats.processing_latency.counts.copy()
                redelivered = stats.redelivered
                before, before_redelivered = self.seen.get((r, second), ({}, 0))
                for bucket, n in counts.items():
                    added = n - before.get(bucket, 0)
                    if added:
                        delta[bucket] = delta.get(bucket, 0) + added
                self.redelivered += redelivered - before_redelivered
                seen[r, second] = (counts, redelivered)
        self.seen = seen
        self.last = now_s
        return delta


#: Where in each wall-clock second nodes report (just after the second turns).
REPORT_AT = 0.05


def until_next_report() -> float:
    """Seconds until the next report, at :data:`REPORT_AT` into a wall-clock second (at
    least half a second away): every node reports at about the same moment, so that the
    coordinator adds up counts taken together."""
    wait = (REPORT_AT - time.time()) % 1.0
    return wait if wait >= 0.5 else wait + 1.0


def current_second() -> int:
    """The current wall-clock second, the one the recorders file records under."""
    return time.time_ns() // 1_000_000_000
