"""What one worker records: per-second counters and latency histograms, plus the message
identities that loss and duplicate accounting needs (docs/measurement.md §3, §5).

A recorder belongs to one worker (one thread or task), so it needs no locks; the node
reads its running totals for progress and writes it out at the end (``workload.node_records``).
"""

from __future__ import annotations

from array import array
from dataclasses import dataclass, field

import numpy as np

from workload.histogram import Histogram
from workload.message import Column
from workload.model.results import SLOT_NS, SLOTS


@dataclass(slots=True)
class SecondStats:
    #: Bit ``i`` set: a send was confirmed (sender) or a message received (receiver) in the
    #: ``i``-th tenth of the second — what measures a stall (a failover gap) to 0.1 s.
    active: int = 0
    sent: int = 0
    received: int = 0
    acked: int = 0
    errors: int = 0
    redelivered: int = 0
    foreign: int = 0
    #: Bytes of the messages confirmed, received (this run's) and acknowledged.
    sent_bytes: int = 0
    received_bytes: int = 0
    acked_bytes: int = 0
    send_latency: Histogram = field(default_factory=Histogram)
    processing_latency: Histogram = field(default_factory=Histogram)
    send_delay: Histogram = field(default_factory=Histogram)


class WorkerRecorder:
    """Counters and histograms keyed by wall-clock second, for one worker."""

    def __init__(self, role: str, node: int, worker: int) -> None:
        self.role = role
        self.node = node
        self.worker = worker
        self.seconds: dict[int, SecondStats] = {}
        #: Confirmed sequence ranges [lo, hi] (inclusive), contiguous runs merged.
        self.sent_ranges: list[list[int]] = []
        self.rx_node = array("i")
        self.rx_worker = array("i")
        self.rx_seq = array("q")
        self.rx_second = array("q")
        self.rx_size = array("i")
        self.total_sent = 0
        self.total_received = 0
        self.total_errors = 0
        self.last_error = ""
        #: The tenth of a second last marked active: [start, end) in wall-clock ns.
        self._tenth = (0, 0)

    def _mark(self, stats: SecondStats, now_ns: int) -> None:
        """Mark the tenth of the second ``now_ns`` falls in as active (callers skip the call
        while ``now_ns`` stays in the tenth marked last)."""
        slot = now_ns // SLOT_NS
        self._tenth = (slot * SLOT_NS, (slot + 1) * SLOT_NS)
        stats.active |= 1 << (slot % SLOTS)

    def _at(self, now_ns: int) -> SecondStats:
        second = now_ns // 1_000_000_000
        stats = self.seconds.get(second)
        if stats is None:
            stats = self.seconds[second] = SecondStats()
        return stats

    # sender side
    def batch_sent(
        self,
        done_ns: int,
        latency_ns: int,
        delay_ns: int | None,
        seq_lo: int,
        seq_hi: int,
        nbytes: int,
    ) -> None:
        """A send call for sequence numbers ``seq_lo..seq_hi`` (``nbytes`` bytes in all) was
        confirmed at wall-clock time ``done_ns``, ``latency_ns`` after it started and (open
        loop) ``delay_ns`` after it was due; a closed-loop batch (``delay_ns`` None) has no
        send delay to record. Both durations are on the monotonic clock."""
        stats = self._at(done_ns)
        if not self._tenth[0] <= done_ns < self._tenth[1]:  # a new tenth: mark it active
            self._mark(stats, done_ns)
        count = seq_hi - seq_lo + 1
        stats.sent += count
        stats.sent_bytes += nbytes
        stats.send_latency.record(latency_ns / 1000.0)
        if delay_ns is not None:
            stats.send_delay.record(delay_ns / 1000.0)
        self.total_sent += count
        ranges = self.sent_ranges
        if ranges and ranges[-1][1] + 1 == seq_lo:
            ranges[-1][1] = seq_hi
        else:
            ranges.append([seq_lo, seq_hi])

    def failed(self, now_ns: int, error: BaseException) -> None:
        self._at(now_ns).errors += 1
        self.total_errors += 1
        self.last_error = f"{type(error).__name__}: {error}".splitlines()[0][:300]

    # receiver side
    def received_batch(
        self,
        now_ns: int,
        nodes: Column,
        workers: Column,
        seqs: Column,
        intended: Column,
        redelivered: int,
        sizes: Column,
    ) -> None:
        """Messages received together at wall-clock time ``now_ns`` (identities as
        :class:`message.Reader` reads them — lists, or numpy arrays for a large batch —
        ``intended`` the sender's wall-clock times, ``sizes`` their bytes)."""
        n = len(seqs)
        if not n:
            return
        stats = self._at(now_ns)
        if not self._tenth[0] <= now_ns < self._tenth[1]:  # a new tenth: mark it active
            self._mark(stats, now_ns)
        stats.received += n
        stats.redelivered += redelivered
        if isinstance(seqs, np.ndarray):
            stats.processing_latency.record_array((now_ns - intended) / 1000.0)
            self.rx_node.frombytes(np.asarray(nodes, dtype=np.int32).tobytes())
            self.rx_worker.frombytes(np.asarray(workers, dtype=np.int32).tobytes())
            self.rx_seq.frombytes(np.asarray(seqs, dtype=np.int64).tobytes())
            self.rx_size.frombytes(np.asarray(sizes, dtype=np.int32).tobytes())
            stats.received_bytes += int(sizes.sum())
        else:
            stats.processing_latency.record_many([(now_ns - t) / 1000.0 for t in intended])
            self.rx_node.extend(nodes)
            self.rx_worker.extend(workers)
            self.rx_seq.extend(seqs)
            self.rx_size.extend(sizes)
            stats.received_bytes += sum(sizes)
        self.rx_second.extend(array("q", (now_ns // 1_000_000_000,)) * n)
        self.total_received += n

    def foreign(self, now_ns: int, count: int = 1) -> None:
        """Messages that are not from this run and sweep point (left over in the broker)."""
        self._at(now_ns).foreign += count

    def acked(self, now_ns: int, count: int, nbytes: int) -> None:
        """``count`` messages of ``nbytes`` bytes in all were acknowledged."""
        stats = self._at(now_ns)
        stats.acked += count
        stats.acked_bytes += nbytes
