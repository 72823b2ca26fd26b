"""Sender and receiver loops (SPEC §2), for blocking adapters (threads) and asyncio adapters.

The bookkeeping of both loops — batch sizes, sequence numbers, pacing, stop conditions,
failure handling — lives in :class:`SenderLoop` and :class:`ReceiverLoop`; the four
``run_*`` functions only call the adapter in between, blocking or awaited.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass

from brokers.base import Adapter, AsyncAdapter, Received
from workload import message
from workload.recording import WorkerRecorder
from workload.scenario import LoadSection

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
    pool: Sequence[bytes]
    stop_requested: Callable[[], bool]
    seed: int = 0
    #: Locally the coordinator says when every sender has finished; receivers do not idle
    #: out before that (a slow start of the senders is not the end of the run).
    senders_done: Callable[[], bool] = lambda: True


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


class SenderLoop:
    """Batch choice, stamping, pacing and accounting of one sender worker."""

    def __init__(self, settings: WorkerSettings, recorder: WorkerRecorder) -> None:
        self.s = settings
        self.recorder = recorder
        self.rng = random.Random(settings.seed)
        self.seq = 0
        self.start = time.monotonic()
        self.start_ns = time.time_ns()
        self.deadline = self.start + settings.load.duration
        self.failures = _Failures(
            settings.load.failure_timeout, f"sender {settings.node}/{settings.worker}"
        )
        self.pending: tuple[list[bytes], int, int, int] | None = None

    def finished(self) -> bool:
        limit = self.s.load.messages
        return (
            time.monotonic() >= self.deadline
            or (limit is not None and self.seq >= limit)
            or self.s.stop_requested()
        )

    def pause(self) -> float:
        """Seconds to wait before the next batch (open loop only)."""
        if self.s.load.rate is None:
            return 0.0
        intended = self.start_ns + int(self.seq / self.s.load.rate * 1e9)
        return max(0.0, (intended - time.time_ns()) / 1e9)

    def next_batch(self) -> tuple[list[bytes], int]:
        """The batch to send and its start time (the same batch again after a failure)."""
        if self.pending is None:
            load = self.s.load
            size = self.rng.randint(1, load.max_send_batch)
            if load.messages is not None:
                size = min(size, load.messages - self.seq)
            intended = (
                self.start_ns + int(self.seq / load.rate * 1e9) if load.rate else time.time_ns()
            )
            now = time.time_ns()
            pool = self.s.pool
            batch = [
                message.stamp(
                    pool[self.rng.randrange(len(pool))],
                    message.header(
                        self.s.tag, self.s.node, self.s.worker, self.seq + i, now, intended
                    ),
                )
                for i in range(size)
            ]
            self.pending = (batch, self.seq, self.seq + size - 1, intended)
        return self.pending[0], time.time_ns()

    def sent(self, started_ns: int) -> None:
        assert self.pending is not None
        _, lo, hi, intended = self.pending
        self.recorder.batch_sent(time.time_ns(), started_ns, min(intended, started_ns), lo, hi)
        self.seq = hi + 1
        self.pending = None
        self.failures.ok()

    def failed(self, error: BaseException) -> float:
        # The batch is abandoned: its sequence numbers are never confirmed, so they are
        # neither counted as sent nor as lost if they arrive anyway.
        assert self.pending is not None
        self.seq = self.pending[2] + 1
        self.pending = None
        return self.failures.failed(self.recorder, error)


class ReceiverLoop:
    """Identity checks, latency recording and the idle timeout of one receiver worker."""

    def __init__(self, settings: WorkerSettings, recorder: WorkerRecorder) -> None:
        self.s = settings
        self.recorder = recorder
        self.last_message = time.monotonic()
        self.failures = _Failures(
            settings.load.failure_timeout, f"receiver {settings.node}/{settings.worker}"
        )

    def finished(self) -> bool:
        if self.s.stop_requested():
            return True
        idle = time.monotonic() - self.last_message
        if idle < self.s.load.idle_timeout:
            return False
        # Idle long enough: done once the senders are, or (should word of them never
        # come) after waiting a generous while longer.
        return self.s.senders_done() or idle >= max(
            SENDERS_WAIT_LIMIT, 4 * self.s.load.idle_timeout
        )

    def handle(self, messages: list[Received]) -> list[Hashable]:
        """Record what arrived; return the receipts to acknowledge."""
        self.failures.ok()
        if not messages:
            return []
        now = time.time_ns()
        self.last_message = time.monotonic()
        tag = self.s.tag
        for m in messages:
            identity = message.parse(m.body)
            if identity is None or identity.tag != tag:
                self.recorder.foreign(now)
            else:
                self.recorder.received(now, identity, m.redelivered)
        return [m.receipt for m in messages]

    def acked(self, receipts: list[Hashable]) -> None:
        self.recorder.acked(time.time_ns(), len(receipts))

    def failed(self, error: BaseException) -> float:
        self.last_message = time.monotonic()  # a failing broker is not an idle one
        return self.failures.failed(self.recorder, error)


def run_sender(adapter: Adapter, loop: SenderLoop) -> None:
    while not loop.finished():
        wait = loop.pause()
        if wait:
            time.sleep(min(wait, 0.5))
            continue
        batch, started = loop.next_batch()
        try:
            adapter.send(batch)
        except Exception as exc:
            time.sleep(loop.failed(exc))
        else:
            loop.sent(started)


def run_receiver(adapter: Adapter, loop: ReceiverLoop) -> None:
    while not loop.finished():
        try:
            receipts = loop.handle(adapter.receive(loop.s.load.receive_batch))
            if receipts:
                adapter.ack(receipts)
                loop.acked(receipts)
        except Exception as exc:
            time.sleep(loop.failed(exc))


async def run_sender_async(adapter: AsyncAdapter, loop: SenderLoop) -> None:
    while not loop.finished():
        wait = loop.pause()
        if wait:
            await asyncio.sleep(min(wait, 0.5))
            continue
        batch, started = loop.next_batch()
        try:
            await adapter.send(batch)
        except Exception as exc:
            await asyncio.sleep(loop.failed(exc))
        else:
            loop.sent(started)


async def run_receiver_async(adapter: AsyncAdapter, loop: ReceiverLoop) -> None:
    while not loop.finished():
        try:
            receipts = loop.handle(await adapter.receive(loop.s.load.receive_batch))
            if receipts:
                await adapter.ack(receipts)
                loop.acked(receipts)
        except Exception as exc:
            await asyncio.sleep(loop.failed(exc))
