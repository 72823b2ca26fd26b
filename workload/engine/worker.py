"""Sender and receiver loops (docs/measurement.md §2), for blocking clients (threads) and asyncio clients.

The bookkeeping of both loops — batch sizes, sequence numbers, pacing, stop conditions,
failure handling — lives in :class:`SenderLoop` and :class:`ReceiverLoop`; the ``run_*``
functions only call the client's role in between (a :class:`~brokers.base.Sender` or
:class:`~brokers.base.Receiver`, blocking or awaited). With ``max_in_flight`` > 1 a sender
keeps that many batches awaiting confirmation (``Sender.submit`` for blocking clients,
concurrent ``send`` calls for asyncio ones); a batch counts only once confirmed.

Durations within a worker — send latency, send delay, open-loop pacing, idle and failure
timeouts, the run's duration — are taken from the monotonic clock, which a step of the wall
clock does not move (a confirmation time an adapter took from the wall clock is checked
against it). Wall-clock time places records in seconds and is what a message carries to its
receiver: processing latency is the one duration measured between two clocks
(``workload.engine.clock``).
"""

from __future__ import annotations

import asyncio
import bisect
import random
import time
from collections import deque
from collections.abc import Callable, Sequence, Sized
from dataclasses import dataclass, field

import numpy as np

from brokers.base import (
    AsyncReceiver,
    AsyncSender,
    Confirmation,
    KeyedBatch,
    R,
    ReceivedBatch,
    Receiver,
    Sender,
)
from workload.engine import message
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


#: How often a worker asks whether it should stop: the flag is shared between processes,
#: and reading it takes a lock (per batch, a measurable share of a worker's CPU).
STOP_CHECK_INTERVAL = 0.02


class _Every:
    """A flag read at most every ``interval`` seconds; True stays True."""

    __slots__ = ("_flag", "_interval", "_next", "_value")

    def __init__(self, flag: Callable[[], bool], interval: float = STOP_CHECK_INTERVAL) -> None:
        self._flag = flag
        self._interval = interval
        self._next = 0.0
        self._value = False

    def __call__(self) -> bool:
        if self._value:
            return True
        now = time.monotonic()
        if now >= self._next:
            self._value = self._flag()
            self._next = now + self._interval
        return self._value


class _Phase:
    """The backlog phase, read at most every ``interval`` seconds (it is shared between
    processes, like the stop flag)."""

    __slots__ = ("_interval", "_next", "_read", "_value")

    def __init__(self, read: Callable[[], int], interval: float = STOP_CHECK_INTERVAL) -> None:
        self._read = read
        self._interval = interval
        self._next = 0.0
        self._value = STEADY

    def __call__(self) -> int:
        now = time.monotonic()
        if now >= self._next:
            self._value = self._read()
            self._next = now + self._interval
        return self._value


#: How long a holding receiver sleeps between looks at the phase.
HOLD_POLL = 0.05


class _Failures:
    """Tracks how long a worker has been failing without a single success."""

    def __init__(self, timeout: float, what: str) -> None:
        self.timeout = timeout
        self.what = what
        self.since: float | None = None

    def ok(self) -> None:
        self.since = None

    def failed(self, recorder: WorkerRecorder, error: BaseException) -> float:
        """Record the error; raise when failing too long; else the back-off to sleep."""
        now = time.monotonic()
        recorder.failed(time.time_ns(), error)
        if self.since is None:
            self.since = now
        elif now - self.since >= self.timeout:
            raise WorkerGaveUp(
                f"{self.what} failed for {self.timeout:.0f} s; last error: {recorder.last_error}"
            )
        return min(1.0, 0.05 * 2 ** min(5, int(now - self.since)))


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


class SenderLoop:
    """Batch choice, stamping, pacing and accounting of one sender worker.

    In open loop every message has its own slot on the schedule — message ``n`` is due
    ``n / rate`` seconds after the start — so arrivals follow the rate whatever the batch
    sizes: a batch is due when its last message is, and each message carries its own slot
    as its intended send time (processing latency counts the time it waited for its batch).
    """

    def __init__(self, settings: WorkerSettings, recorder: WorkerRecorder) -> None:
        self.s = settings
        self.recorder = recorder
        self.rng = random.Random(settings.seed)
        self.stamper = message.Stamper(
            settings.tag, settings.node, settings.worker, settings.load.message_size.fixed
        )
        #: The pool as rows of an array, where large batches are stamped as one.
        self.pool_rows = message.pool_rows(settings.pool, self.stamper.size)
        self.keys = KeyScheme.of(settings.load)
        self.stop_requested = _Every(settings.stop_requested)
        self.phase = _Phase(settings.phase)
        self.draining = False
        self.seq = 0
        #: The open-loop schedule's origin (monotonic), the sequence number it starts
        #: from, and one slot's length (a backlog's drain_rate starts a new schedule).
        self.start_ns = time.monotonic_ns()
        self.origin_seq = 0
        self.slot_ns = 1e9 / settings.load.rate if settings.load.rate else 0.0
        self.deadline = self.start_ns / 1e9 + settings.load.duration
        self.failures = _Failures(
            settings.load.failure_timeout, f"sender {settings.node}/{settings.worker}"
        )
        self.size = self._batch_size()

    def _batch_size(self) -> int:
        """The size of the next batch: uniform in [min_send_batch, max_send_batch], within
        the limit."""
        load = self.s.load
        size = self.rng.randint(load.min_send_batch, load.max_send_batch)
        if load.messages is not None:
            size = max(1, min(size, load.messages - self.seq))
        return size

    def finished(self) -> bool:
        limit = self.s.load.messages
        return (
            time.monotonic() >= self.deadline
            or (limit is not None and self.seq >= limit)
            or self.stop_requested()
            or self._drain_stops()
        )

    def _drain_stops(self) -> bool:
        """Whether a backlog's drain stops the senders; when the drain begins with a
        drain_rate, the open-loop schedule starts again at that rate, from now."""
        backlog = self.s.backlog
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
        retried, and the next batch goes on from the following sequence numbers."""
        size = self.size
        wall, now = clock_pair()
        lo = self.seq
        pool = self.s.pool
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
        keys = scheme.keys(self.s.node, self.s.worker, lo, len(messages))
        return KeyedBatch(messages, [name(k) for k in keys])

    def sent(self, batch: Batch, confirmed_ns: int | None = None) -> None:
        """The broker confirmed ``batch``: just now, or at wall-clock time ``confirmed_ns``
        (a confirmation the adapter timed, ``Confirmation.wait``)."""
        now = time.monotonic_ns()
        latency = now - batch.started_mono_ns
        if confirmed_ns is not None:
            # Exact, and within the monotonic time since the start, unless the wall clock
            # was stepped meanwhile (:func:`_stepped`).
            timed = confirmed_ns - batch.started_ns
            latency = timed if 0 <= timed <= latency else _stepped(batch, timed, now)
        self.recorder.batch_sent(
            batch.started_ns + latency, latency, batch.delay_ns, batch.lo, batch.hi, batch.size
        )
        self.failures.ok()

    def failed(self, batch: Batch, error: BaseException) -> float:
        """``batch`` failed: it is abandoned (its sequence numbers are never confirmed, so
        they count neither as sent nor as lost should they arrive anyway). Returns the
        back-off to sleep."""
        return self.failures.failed(self.recorder, error)


#: Two wall-clock reads around a monotonic one this close together: read together.
PAIR_NS = 5_000
#: Tries at most before the closest pair is taken.
PAIR_TRIES = 3


def clock_pair() -> tuple[int, int]:
    """The wall clock and the monotonic clock read at one moment: ``(wall ns, monotonic ns)``.

    A thread preempted between two reads (a busy machine) would tie them tens of µs apart,
    and shift every time derived from the pair — an open-loop batch's intended send times —
    by that much. So the wall clock is read on both sides of the monotonic one, again while
    the two wall reads lie more than :data:`PAIR_NS` apart (at most :data:`PAIR_TRIES` times),
    and the closest pair is taken, its wall time the middle of the two reads."""
    best_gap, best = -1, (0, 0)
    for _ in range(PAIR_TRIES):
        before = time.time_ns()
        mono = time.monotonic_ns()
        after = time.time_ns()
        gap = after - before
        if best_gap < 0 or gap < best_gap:
            best_gap, best = gap, ((before + after) // 2, mono)
        if gap <= PAIR_NS:
            break
    return best


def _stepped(batch: Batch, timed_ns: int, now_mono_ns: int) -> int:
    """The latency of a batch whose confirmation the adapter timed on the wall clock
    ``timed_ns`` after the batch's start by that clock, when that does not fit the
    monotonic time since the start: the wall clock was stepped between the start and the
    confirmation, and the step is taken off. Never more than the monotonic time."""
    step = (time.time_ns() - now_mono_ns) - (batch.started_ns - batch.started_mono_ns)
    return min(max(timed_ns - step, 0), now_mono_ns - batch.started_mono_ns)


class ReceiverLoop:
    """Identity checks, latency recording and the idle timeout of one receiver worker."""

    def __init__(self, settings: WorkerSettings, recorder: WorkerRecorder) -> None:
        self.s = settings
        self.recorder = recorder
        self.reader = message.Reader(settings.tag)
        scheme = KeyScheme.of(settings.load)
        self.order = None if scheme is None else OrderTracker(scheme)
        self.stop_requested = _Every(settings.stop_requested)
        self.phase = _Phase(settings.phase)
        self.senders_done = _Every(settings.senders_done)
        #: When this receiver first saw the senders done (monotonic; None: not yet).
        self.senders_done_at: float | None = None
        self.last_message = time.monotonic()
        self.failures = _Failures(
            settings.load.failure_timeout, f"receiver {settings.node}/{settings.worker}"
        )
        #: Bytes of the batch handed out last, counted as acknowledged with it.
        self.handed_bytes = 0

    def holding(self) -> bool:
        """A backlog builds: the receiver does not receive (and a hold is not idleness;
        a holding receiver counts as joined)."""
        if self.phase() != HOLD:
            return False
        self.last_message = time.monotonic()
        self.s.joined()
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
        if idle < self.s.load.idle_timeout:
            return False
        return done_at is not None or idle >= max(SENDERS_WAIT_LIMIT, 4 * self.s.load.idle_timeout)

    def handle(self, batch: ReceivedBatch[R]) -> Sequence[R]:
        """Record what arrived; return the receipts to acknowledge."""
        self.failures.ok()
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
        return self.failures.failed(self.recorder, error)


def _positions(bodies: Sequence[int], foreign: list[int]) -> Sequence[int]:
    """Positions among a batch's bodies as positions among its identities (the bodies
    without the ``foreign`` ones, both ascending)."""
    if not foreign or not bodies:
        return bodies
    return [i - bisect.bisect_left(foreign, i) for i in bodies]


class CannotPipeline(Exception):
    """``max_in_flight`` > 1 with a client that confirms each batch before the next."""


def run_sender(sender: Sender, loop: SenderLoop) -> None:
    if loop.s.load.max_in_flight > 1:
        if not sender.pipelined:
            # The system can keep batches in flight, but not with this topology's client:
            # running one batch at a time would report a different load than asked for.
            raise CannotPipeline(
                f"max_in_flight = {loop.s.load.max_in_flight}: the {type(sender).__name__} "
                "client confirms each batch before the next; use max_in_flight = 1"
            )
        _run_sender_pipelined(sender, loop)
        return
    while not loop.finished():
        wait = loop.pause()
        if wait:
            time.sleep(min(wait, 0.5))
            continue
        batch = loop.next_batch()
        try:
            sender.send(batch.messages)
        except Exception as exc:
            time.sleep(loop.failed(batch, exc))
        else:
            loop.sent(batch)


def _run_sender_pipelined(sender: Sender, loop: SenderLoop) -> None:
    """Keep up to ``max_in_flight`` batches submitted; account each once it is confirmed."""
    limit = loop.s.load.max_in_flight
    in_flight: deque[tuple[Batch, Confirmation]] = deque()
    while True:
        wait = 0.0
        if len(in_flight) < limit and not loop.finished():
            wait = loop.pause()
            if not wait:
                batch = loop.next_batch()
                try:
                    in_flight.append((batch, sender.submit(batch.messages)))
                except Exception as exc:
                    time.sleep(loop.failed(batch, exc))
                continue
        if not in_flight:
            if loop.finished():
                return
            time.sleep(min(wait, 0.5))
            continue
        batch, confirmation = in_flight[0]
        try:
            done = confirmation.wait(min(wait, 0.5) if wait else 0.5)
        except Exception as exc:
            in_flight.popleft()
            time.sleep(loop.failed(batch, exc))
            continue
        if done is not None:
            in_flight.popleft()
            loop.sent(batch, done)


def run_receiver(receiver: Receiver[R], loop: ReceiverLoop) -> None:
    while not loop.finished():
        if not loop.s.joined.called and receiver.joined():
            loop.s.joined()
        if loop.holding():
            time.sleep(HOLD_POLL)
            continue
        try:
            receipts = loop.handle(receiver.receive_batch(loop.s.receive_batch))
            if receipts:
                receiver.ack(receipts)
                loop.acked(receipts)
        except Exception as exc:
            time.sleep(loop.failed(exc))


async def run_sender_async(sender: AsyncSender, loop: SenderLoop) -> None:
    if loop.s.load.max_in_flight > 1:
        await _run_sender_async_pipelined(sender, loop)
        return
    while not loop.finished():
        wait = loop.pause()
        if wait:
            await asyncio.sleep(min(wait, 0.5))
            continue
        batch = loop.next_batch()
        try:
            await sender.send(batch.messages)
        except Exception as exc:
            await asyncio.sleep(loop.failed(batch, exc))
        else:
            loop.sent(batch)


async def _run_sender_async_pipelined(sender: AsyncSender, loop: SenderLoop) -> None:
    """Up to ``max_in_flight`` concurrent ``send`` calls on the worker's client."""
    limit = loop.s.load.max_in_flight
    in_flight: set[asyncio.Task[None]] = set()
    finished: list[asyncio.Task[None]] = []

    async def one(batch: Batch) -> None:
        try:
            await sender.send(batch.messages)
        except Exception as exc:
            await asyncio.sleep(loop.failed(batch, exc))  # the slot stays taken meanwhile
        else:
            loop.sent(batch)

    def harvest() -> None:
        while finished:
            task = finished.pop()
            in_flight.discard(task)
            task.result()  # a worker that gave up raises here

    try:
        while not loop.finished():
            harvest()
            wait = loop.pause()
            if wait:
                await asyncio.sleep(min(wait, 0.5))
                continue
            if len(in_flight) >= limit:
                await asyncio.wait(in_flight, return_when=asyncio.FIRST_COMPLETED)
                continue
            task = asyncio.create_task(one(loop.next_batch()))
            task.add_done_callback(finished.append)
            in_flight.add(task)
            await asyncio.sleep(0)  # let the send start before the next batch is stamped
        if in_flight:
            await asyncio.wait(in_flight)
        harvest()
    finally:
        for task in in_flight:
            task.cancel()


async def run_receiver_async(receiver: AsyncReceiver[R], loop: ReceiverLoop) -> None:
    while not loop.finished():
        if not loop.s.joined.called and receiver.joined():
            loop.s.joined()
        if loop.holding():
            await asyncio.sleep(HOLD_POLL)
            continue
        try:
            receipts = loop.handle(await receiver.receive_batch(loop.s.receive_batch))
            if receipts:
                await receiver.ack(receipts)
                loop.acked(receipts)
        except Exception as exc:
            await asyncio.sleep(loop.failed(exc))
