"""The worker loops that call the client (docs/measurement.md §2): a sender's or a receiver's
role (a :class:`~brokers.base.Sender` or :class:`~brokers.base.Receiver`), blocking in a
thread or awaited in an asyncio task, called between the bookkeeping of its
:class:`~workload.engine.worker.SenderLoop` or :class:`~workload.engine.worker.ReceiverLoop`.

With ``max_in_flight`` > 1 a sender keeps that many batches awaiting confirmation
(``Sender.submit`` for blocking clients, concurrent ``send`` calls for asyncio ones); a
batch counts only once confirmed.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any

from brokers.base import AsyncReceiver, AsyncSender, Confirmation, R, Receiver, Sender
from workload.engine.worker import Batch, ReceiverLoop, SenderLoop


class CannotPipeline(Exception):
    """``max_in_flight`` > 1 with a client that confirms each batch before the next."""


async def _work(
    loop: SenderLoop | ReceiverLoop,
    turn: Callable[[], Awaitable[None]],
    sleep: Callable[[float], Awaitable[None]],
) -> None:
    """The loop of every worker but a pipelined sender, blocking or asyncio: until the loop
    is finished, sit out its pause (half a second at most at a time), else take a turn — send
    a batch, or receive one and acknowledge it — and after a failed turn sleep its back-off."""
    while not loop.finished():
        wait = loop.pause()
        if wait:
            await sleep(min(wait, 0.5))
            continue
        try:
            await turn()
        except Exception as exc:
            await sleep(loop.failed(exc))


async def _sleep(seconds: float) -> None:
    time.sleep(seconds)


def _blocking(work: Coroutine[Any, Any, None]) -> None:
    """Run ``work`` — :func:`_work` with a blocking client's calls and :func:`_sleep`, which
    never suspend — to its end in one step."""
    try:
        work.send(None)
    except StopIteration:
        return
    work.close()
    raise RuntimeError("a blocking worker's loop suspended")


def run_sender(sender: Sender, loop: SenderLoop) -> None:
    if (limit := loop.settings.load.max_in_flight) > 1:
        if not sender.pipelined:
            # The system can keep batches in flight, but not with this topology's client:
            # running one batch at a time would report a different load than asked for.
            raise CannotPipeline(
                f"max_in_flight = {limit}: the {type(sender).__name__} client confirms each "
                "batch before the next; use max_in_flight = 1"
            )
        _run_sender_pipelined(sender, loop)
        return

    async def turn() -> None:
        batch = loop.next_batch()
        sender.send(batch.messages)
        loop.sent(batch)

    _blocking(_work(loop, turn, _sleep))


def _run_sender_pipelined(sender: Sender, loop: SenderLoop) -> None:
    """Keep up to ``max_in_flight`` batches submitted; account each once it is confirmed."""
    limit = loop.settings.load.max_in_flight
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
                    time.sleep(loop.failed(exc))
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
            time.sleep(loop.failed(exc))
            continue
        if done is not None:
            in_flight.popleft()
            loop.sent(batch, done)


def run_receiver(receiver: Receiver[R], loop: ReceiverLoop) -> None:
    async def turn() -> None:
        loop.join(receiver.joined)
        receipts = loop.handle(receiver.receive_batch(loop.settings.receive_batch))
        if receipts:
            receiver.ack(receipts)
            loop.acked(receipts)

    _blocking(_work(loop, turn, _sleep))


async def run_sender_async(sender: AsyncSender, loop: SenderLoop) -> None:
    if loop.settings.load.max_in_flight > 1:
        await _run_sender_async_pipelined(sender, loop)
        return

    async def turn() -> None:
        batch = loop.next_batch()
        await sender.send(batch.messages)
        loop.sent(batch)

    await _work(loop, turn, asyncio.sleep)


async def _run_sender_async_pipelined(sender: AsyncSender, loop: SenderLoop) -> None:
    """Up to ``max_in_flight`` concurrent ``send`` calls on the worker's client."""
    limit = loop.settings.load.max_in_flight
    in_flight: set[asyncio.Task[None]] = set()
    finished: list[asyncio.Task[None]] = []

    async def one(batch: Batch) -> None:
        try:
            await sender.send(batch.messages)
        except Exception as exc:
            await asyncio.sleep(loop.failed(exc))  # the slot stays taken meanwhile
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
    async def turn() -> None:
        loop.join(receiver.joined)
        receipts = loop.handle(await receiver.receive_batch(loop.settings.receive_batch))
        if receipts:
            await receiver.ack(receipts)
            loop.acked(receipts)

    await _work(loop, turn, asyncio.sleep)
