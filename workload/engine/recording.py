"""What one worker records: per-second counters and latency histograms, plus the message
identities that loss and duplicate accounting needs (docs/measurement.md §3, §5).

A recorder belongs to one worker (one thread or task); the node reads its running totals
for progress and writes it out (``workload.engine.node_records``): in chunks while the worker runs
(:meth:`WorkerRecorder.take`, every ``[measurement] flush_interval``, so that a long run
killed midway keeps what it recorded and a worker's memory does not grow with the run's
length) and whatever is left at the end. Recording and taking hold the recorder's lock —
once per batch, uncontended but for the moment a chunk is taken.
"""

from __future__ import annotations

import threading
from array import array
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TypeAlias

import numpy as np

from workload.engine.histogram import Histogram
from workload.engine.message import Column
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


#: Where a recorder keeps identities: received sender nodes, workers and sequence numbers,
#: and confirmed ranges.
IdentityContainers: TypeAlias = "tuple[array[int], array[int], array[int], list[list[int]]]"


@dataclass
class Records:
    """What a worker recorded over a stretch of time, taken out of its recorder: its
    per-second statistics, confirmed sequence ranges and received identities."""

    worker: int
    seconds: dict[int, SecondStats]
    sent_ranges: list[list[int]]
    #: The second each range was confirmed in.
    range_seconds: list[int]
    rx_node: array[int]
    rx_worker: array[int]
    rx_seq: array[int]
    rx_second: array[int]
    #: Positions (in the rx arrays) of messages that arrived late for their key.
    rx_late: array[int]
    #: Each received message's size in bytes.
    rx_size: array[int]


class WorkerRecorder:
    """Counters and histograms keyed by wall-clock second, for one worker."""

    def __init__(self, role: str, node: int, worker: int) -> None:
        self.role = role
        self.node = node
        self.worker = worker
        self.seconds: dict[int, SecondStats] = {}
        #: Confirmed sequence ranges [lo, hi] (inclusive), contiguous runs within a
        #: second merged, and the second each was confirmed in.
        self.sent_ranges: list[list[int]] = []
        self.range_seconds: list[int] = []
        self.rx_node = array("i")
        self.rx_worker = array("i")
        self.rx_seq = array("q")
        self.rx_second = array("q")
        #: Positions (in the rx arrays) of messages that arrived late for their key
        #: (:class:`workload.engine.keys.OrderTracker`); empty for a keyless load.
        self.rx_late = array("q")
        self.rx_size = array("i")
        self.total_sent = 0
        self.total_received = 0
        self.total_errors = 0
        self.last_error = ""
        #: The tenth of a second last marked active: [start, end) in wall-clock ns.
        self._tenth = (0, 0)
        self._lock = threading.Lock()
        #: While an identity reporter follows this recorder (:meth:`identity_view`): the
        #: containers of identities that :meth:`take` replaced since it last looked.
        self._replaced: list[IdentityContainers] | None = None

    def take(self, before_second: int | None = None) -> Records:
        """Take what was recorded out of the recorder: the statistics of the seconds before
        ``before_second`` (all of them when None), the sequence ranges confirmed in them,
        and every received identity so far. A second taken and then recorded into again (a worker's time
        stamp a flush interval old) comes out again in a later take: the analysis adds the
        rows of a second."""
        with self._lock:
            if self._replaced is not None:  # left as they are, for the identity reporter
                self._replaced.append((self.rx_node, self.rx_worker, self.rx_seq, self.sent_ranges))
            if before_second is None:
                seconds, self.seconds = self.seconds, {}
                ranges, self.sent_ranges = self.sent_ranges, []
                range_seconds, self.range_seconds = self.range_seconds, []
            else:
                seconds = {s: v for s, v in self.seconds.items() if s < before_second}
                for second in seconds:
                    del self.seconds[second]
                ranges, range_seconds, kept, kept_seconds = [], [], [], []
                for span, second in zip(self.sent_ranges, self.range_seconds, strict=True):
                    if second < before_second:
                        ranges.append(span)
                        range_seconds.append(second)
                    else:
                        kept.append(span)
                        kept_seconds.append(second)
                self.sent_ranges, self.range_seconds = kept, kept_seconds
            taken = Records(
                self.worker,
                seconds,
                ranges,
                range_seconds,
                self.rx_node,
                self.rx_worker,
                self.rx_seq,
                self.rx_second,
                self.rx_late,
                self.rx_size,
            )
            self.rx_node, self.rx_worker = array("i"), array("i")
            self.rx_seq, self.rx_second, self.rx_late = array("q"), array("q"), array("q")
            self.rx_size = array("i")
            self._tenth = (0, 0)
            return taken

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
        with self._lock:
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
            ranges, second = self.sent_ranges, done_ns // 1_000_000_000
            if ranges and ranges[-1][1] + 1 == seq_lo and self.range_seconds[-1] == second:
                ranges[-1][1] = seq_hi
            else:
                ranges.append([seq_lo, seq_hi])
                self.range_seconds.append(second)

    def failed(self, now_ns: int, error: BaseException) -> None:
        with self._lock:
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
        late: Sequence[int] = (),
    ) -> None:
        """Messages received together at wall-clock time ``now_ns`` (identities as
        :class:`message.Reader` reads them — lists, or numpy arrays for a large batch —
        ``intended`` the sender's wall-clock times, ``sizes`` their bytes); ``late``: the
        positions among them of those that arrived late for their key."""
        if not len(seqs):
            return
        with self._lock:
            n = len(seqs)
            if late:
                first = len(self.rx_seq)
                self.rx_late.extend(first + i for i in late)
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

    def identity_view(self) -> tuple[IdentityContainers, list[IdentityContainers]]:
        """The containers the worker keeps its received identities (sender nodes, workers,
        sequence numbers) and its confirmed ranges in right now, and those :meth:`take` put
        new ones in place of since the previous call, oldest first, left as they were: for
        the coordinator's early end (:class:`workload.engine.caught_up.IdentityReporter`).
        The first call starts keeping them (call it once a second or so from then on)."""
        with self._lock:
            replaced, self._replaced = self._replaced or [], []
            return (self.rx_node, self.rx_worker, self.rx_seq, self.sent_ranges), replaced

    def foreign(self, now_ns: int, count: int = 1) -> None:
        """Messages that are not from this run and sweep point (left over in the broker)."""
        with self._lock:
            self._at(now_ns).foreign += count

    def acked(self, now_ns: int, count: int, nbytes: int) -> None:
        """``count`` messages of ``nbytes`` bytes in all were acknowledged."""
        with self._lock:
            stats = self._at(now_ns)
            stats.acked += count
            stats.acked_bytes += nbytes
