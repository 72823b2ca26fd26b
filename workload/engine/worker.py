"""The bookkeeping of sender and receiver workers (docs/measurement.md §2): what a worker is
given (:class:`WorkerSettings`), and what its loop does between calls of its client — batch
sizes, sequence numbers, stamping, pacing, stop conditions, identity checks, recording and
failure handling — in :class:`SenderLoop` and :class:`ReceiverLoop`. The loops that call the
client, blocking or asyncio, are :mod:`workload.engine.client_loops`.

Durations within a worker — send latency, send delay, open-loop pacing, idle and failure
timeouts, the run's duration — are taken from the monotonic clock, which a step of the wall
clock does not move (a confirmation time an adapter took from the wall clock is checked
against it). Wall-clock time places records in seconds and is what a message carries to its
receiver: processing latency is the one duration measured between two clocks
(``workload.engine.clock``).
"""

from __future__ import annotations

import bisect
import random
import time
from collections.abc import Callable, Sequence, Sized
from dataclasses import dataclass, field
from typing import Generic, TypeVar

import numpy as np

from brokers.batches import KeyedBatch, R, ReceivedBatch
from workload.engine import message
from workload.engine.clock import clock_pair, unstepped
from workload.engine.keys import KeyScheme, OrderTracker
from workload.engine.recording import WorkerRecorder
from workload.engine.start_gate import Once
from workload.model.backlog import DRAIN, HOLD, STEADY, BacklogSection
from workload.model.sections import LoadSection

#: The longest a receiver idles waiting for senders that have not said they finished.
SENDERS_WAIT_LIMIT = 180.0


class WorkerGaveUp(Exception):
    """A worker failed continuously for ``failure_timeout`` seconds."""


@dataclass
class WorkerSettings:
    tag: str  # run tag + point, written into every message
    node: int
    worker: int
    load: LoadSection
    pool: list[bytes]
    stop_requested: Callable[[], bool]
    seed: int = 0
    #: Locally the coordinator says when every sender has finished (and, with a backlog,
    #: its drain has nothing queued); receivers do not idle out before that (a slow start
    #: of the senders is not the end of the run).
    senders_done: Callable[[], bool] = lambda: True
    #: ``max_n`` of each receive call: ``load.receive_batch``, or the system's default.
    receive_batch: int = 10
    #: The point's ``[backlog]``, and the phase the coordinator has it in
    #: (:mod:`workload.engine.backlog`): receivers hold in HOLD; in DRAIN senders stop or change
    #: their rate, as the backlog says.
    backlog: BacklogSection | None = None
    phase: Callable[[], int] = lambda: STEADY
    #: A receiver says once that it has joined (:mod:`workload.engine.start_gate`).
    joined: Once = field(default_factory=Once)


#: How often a worker reads what it shares with other processes (the stop flag, the
#: senders' flag, the backlog phase): reading takes a lock (per batch, a measurable share of
#: a worker's CPU).
STOP_CHECK_INTERVAL = 0.02

T = TypeVar("T")


class _Shared(Generic[T]):
    """A value shared between processes, read at most every :data:`STOP_CHECK_INTERVAL`
    seconds; once it reads ``final`` it is not read again (a flag once set stays set)."""

    __slots__ = ("_final", "_next", "_read", "_value")

    def __init__(self, read: Callable[[], T], value: T, final: object = None) -> None:
        self._read = read
        self._value = value
        self._final = final
        self._next = 0.0

    def __call__(self) -> T:
        value = self._value
        if value is self._final:
            return value
        now = time.monotonic()
        if now >= self._next:
            self._value = value = self._read()
            self._next = now + STOP_CHECK_INTERVAL
        return value


#: How long a holding receiver sleeps between looks at the phase.
HOLD_POLL = 0.05


class _Worker:
    """What both loops keep: their settings and recorder, the stop flag and the backlog phase
    as read, and since when the worker has failed without a success."""

    def __init__(self, settings: WorkerSettings, recorder: WorkerRecorder, role: str) -> None:
        self.settings = settings
        self.recorder = recorder
        self.stop_requested = _Shared(settings.stop_requested, False, True)
        self.phase = _Shared(settings.phase, STEADY)
        self.name = f"{role} {settings.node}/{settings.worker}"
        #: When the worker began failing without a success (monotonic); None: it is not.
        self.failing_since: float | None = None

    def failed(self, error: BaseException) -> float:
        """Record the error; raise when failing for ``failure_timeout``; else the back-off
        to sleep."""
        now = time.monotonic()
        self.recorder.failed(time.time_ns(), error)
        timeout = self.settings.load.failure_timeout
        if self.failing_since is None:
            self.failing_since = now
        elif now - self.failing_since >= timeout:
            raise WorkerGaveUp(
                f"{self.name} failed for {timeout:.0f} s; last error: {self.recorder.last_error}"
            )
        return min(1.0, 0.05 * 2 ** min(5, int(now - self.failing_since)))


@dataclass(slots=True)
class Batch:
    """One send call's messages, their sequence numbers ``lo..hi``, their bytes and its
    times: the start on the wall clock and on the monotonic clock, and (open loop) how long
    after it was due it started — None in closed loop, where nothing is due (monotonic)."""

    messages: Sequence[bytes]  # a KeyedBatch where the load has keys, a RowsBatch (large, one size)
    lo: int
    hi: int
    started_ns: int
    started_mono_ns: int
    delay_ns: int | None
    size: int


class SenderLoop(_Worker):
    """Batch choice, stamping, pacing and accounting of one sender worker.

    In open loop every message has its own slot on the schedule — message ``n`` is due
    ``n / rate`` seconds after the start — so arrivals follow the rate whatever the batch
    sizes: a batch is due when its last message is, and each message carries its own slot
    as its intended send time (processing latency counts the time it waited for its batch).
    """

    def __init__(self, settings: WorkerSettings, recorder: WorkerRecorder) -> None:
        super().__init__(settings, recorder, "sender")
        self.rng = random.Random(settings.seed)
        self.stamper = message.Stamper(
            settings.tag, settings.node, settings.worker, settings.load.message_size.fixed
        )
        #: The pool as rows of an array, where large batches are stamped as one.
        self.pool_rows = message.pool_rows(settings.pool, self.stamper.size)
        self.keys = KeyScheme.of(settings.load)
        self.draining = False
        self.seq = 0
        #: The open-loop schedule's origin (monotonic), the sequence number it starts
        #: from, and one slot's length (a backlog's drain_rate starts a new schedule).
        self.start_ns = time.monotonic_ns()
        self.origin_seq = 0
        self.slot_ns = 1e9 / settings.load.rate if settings.load.rate else 0.0
        self.deadline = self.start_ns / 1e9 + settings.load.duration
        self.size = self._batch_size()

    def _batch_size(self) -> int:
        """The size of the next batch: uniform in [min_send_batch, max_send_batch], within
        the limit."""
        load = self.settings.load
        size = self.rng.randint(load.min_send_batch, load.max_send_batch)
        if load.messages is not None:
            size = max(1, min(size, load.messages - self.seq))
        return size

    def finished(self) -> bool:
        limit = self.settings.load.messages
        return (
            time.monotonic() >= self.deadline
            or (limit is not None and self.seq >= limit)
            or self.stop_requested()
            or self._drain_stops()
        )

    def _drain_stops(self) -> bool:
        """Whether a backlog's drain stops the senders; when the drain begins with a
        drain_rate, the open-loop schedule starts again at that rate, from now."""
        backlog = self.settings.backlog
        if backlog is None:
            return False
        if not self.draining and self.phase() == DRAIN:
            self.draining = True
            if backlog.drain_rate is not None:
                self.start_ns = time.monotonic_ns()
                self.origin_seq = self.seq
                self.slot_ns = 1e9 / backlog.drain_rate
        return self.draining and backlog.senders == "stop"

    def slot(self, seq: int) -> int:
        """When message ``seq`` is due on the open-loop schedule (monotonic ns)."""
        return self.start_ns + int((seq - self.origin_seq) * self.slot_ns)

    def pause(self) -> float:
        """Seconds to wait before the next batch: until its last message is due (open loop
        only)."""
        if not self.slot_ns:
            return 0.0
        return max(0.0, (self.slot(self.seq + self.size - 1) - time.monotonic_ns()) / 1e9)

    def next_batch(self) -> Batch:
        """The next batch to send, stamped; its sequence numbers are taken for good.

        A batch is sent once: should its send fail (:meth:`failed`) it is abandoned, not
        retried, and the next batch goes on from the following sequence numbers (the
        abandoned ones are never confirmed, so they count neither as sent nor as lost
        should they arrive anyway)."""
        size = self.size
        wall, now = clock_pair()
        lo = self.seq
        pool = self.settings.pool
        start = self.rng.randrange(len(pool))
        payloads: list[bytes] | np.ndarray
        if self.pool_rows is not None and self.stamper.stamps_rows(size, lo):
            payloads = message.take_rows(self.pool_rows, start, size)
            nbytes = payloads.size
        else:
            payloads = message.take(pool, start, size)
            nbytes = sum(map(len, payloads))  # stamping keeps every size
        self.seq = lo + size
        self.size = self._batch_size()
        if not self.slot_ns:
            messages = self._keyed(self.stamper.stamp_batch(payloads, lo, wall, wall), lo)
            return Batch(messages, lo, lo + size - 1, wall, now, None, nbytes)
        # Each message carries its own slot on the wall clock, for the receiver; the batch
        # is late by how long after its last message's slot it starts.
        first = self.slot(lo)
        delay = max(0, now - self.slot(lo + size - 1))
        messages = self.stamper.stamp_batch(payloads, lo, wall, wall - (now - first), self.slot_ns)
        return Batch(self._keyed(messages, lo), lo, lo + size - 1, wall, now, delay, nbytes)

    def _keyed(self, messages: Sequence[bytes], lo: int) -> Sequence[bytes]:
        """The stamped messages with their keys (:mod:`workload.engine.keys`), where the load has
        keys."""
        scheme = self.keys
        if scheme is None:
            return messages
        name = scheme.name
        keys = scheme.keys(self.settings.node, self.settings.worker, lo, len(messages))
        return KeyedBatch(messages, [name(k) for k in keys])

    def sent(self, batch: Batch, confirmed_ns: int | None = None) -> None:
        """The broker confirmed ``batch``: just now, or at wall-clock time ``confirmed_ns``
        (a confirmation the adapter timed, ``Confirmation.wait``)."""
        now = time.monotonic_ns()
        latency = now - batch.started_mono_ns
        if confirmed_ns is not None:
            # Exact, and within the monotonic time since the start, unless the wall clock
            # was stepped meanwhile (:func:`~workload.engine.clock.unstepped`).
            timed = confirmed_ns - batch.started_ns
            latency = (
                timed
                if 0 <= timed <= latency
                else unstepped(timed, batch.started_ns, batch.started_mono_ns, now)
            )
        self.recorder.batch_sent(
            batch.started_ns + latency, latency, batch.delay_ns, batch.lo, batch.hi, batch.size
        )
        self.failing_since = None


class ReceiverLoop(_Worker):
    """Identity checks, latency recording and the idle timeout of one receiver worker."""

    def __init__(self, settings: WorkerSettings, recorder: WorkerRecorder) -> None:
        super().__init__(settings, recorder, "receiver")
        self.reader = message.Reader(settings.tag)
        scheme = KeyScheme.of(settings.load)
        self.order = None if scheme is None else OrderTracker(scheme)
        self.senders_done = _Shared(settings.senders_done, False, True)
        #: When this receiver first saw the senders done (monotonic; None: not yet).
        self.senders_done_at: float | None = None
        self.last_message = time.monotonic()
        #: Bytes of the batch handed out last, counted as acknowledged with it.
        self.handed_bytes = 0

    def pause(self) -> float:
        """Seconds to wait before the next receive call: :data:`HOLD_POLL` while holding."""
        return HOLD_POLL if self.holding() else 0.0

    def join(self, joined: Callable[[], bool]) -> None:
        """Say once that this receiver has joined, once its client says so."""
        if not self.settings.joined.called and joined():
            self.settings.joined()

    def holding(self) -> bool:
        """A backlog builds: the receiver does not receive (and a hold is not idleness;
        a holding receiver counts as joined)."""
        if self.phase() != HOLD:
            return False
        self.last_message = time.monotonic()
        self.settings.joined()
        return True

    def finished(self) -> bool:
        """Stopped, or idle for ``idle_timeout`` since the later of the last message and
        the moment the senders were seen done: a message confirmed just before the senders
        finished gets the whole timeout to arrive, however long delivery had stalled
        before (a failover). Should word of the senders never come: after waiting a
        generous while longer."""
        if self.stop_requested():
            return True
        now = time.monotonic()
        if self.senders_done_at is None and self.senders_done():
            self.senders_done_at = now
        done_at = self.senders_done_at
        idle = now - (self.last_message if done_at is None else max(self.last_message, done_at))
        if idle < self.settings.load.idle_timeout:
            return False
        return done_at is not None or idle >= max(
            SENDERS_WAIT_LIMIT, 4 * self.settings.load.idle_timeout
        )

    def handle(self, batch: ReceivedBatch[R]) -> Sequence[R]:
        """Record what arrived; return the receipts to acknowledge."""
        self.failing_since = None
        if not batch.bodies:
            return ()
        now = time.time_ns()
        self.last_message = time.monotonic()
        ids = self.reader.read(batch.bodies)
        self.handed_bytes = sum(map(len, batch.bodies))
        again = batch.redelivered
        if ids.foreign:
            self.recorder.foreign(now, len(ids.foreign))
            # Redeliveries are counted for this run's messages only.
            theirs = set(ids.foreign)
            again = [i for i in again if i not in theirs]
        late: Sequence[int] = ()
        if self.order is not None:
            late = self.order.late(ids.nodes, ids.workers, ids.seqs, _positions(again, ids.foreign))
        self.recorder.received_batch(
            now, ids.nodes, ids.workers, ids.seqs, ids.intended, len(again), ids.sizes, late
        )
        return batch.receipts

    def acked(self, receipts: Sized) -> None:
        self.recorder.acked(time.time_ns(), len(receipts), self.handed_bytes)

    def failed(self, error: BaseException) -> float:
        self.last_message = time.monotonic()  # a failing broker is not an idle one
        return super().failed(error)


def _positions(bodies: Sequence[int], foreign: list[int]) -> Sequence[int]:
    """Positions among a batch's bodies as positions among its identities (the bodies
    without the ``foreign`` ones, both ascending)."""
    if not foreign or not bodies:
        return bodies
    return [i - bisect.bisect_left(foreign, i) for i in bodies]
