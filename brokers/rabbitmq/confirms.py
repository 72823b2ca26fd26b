"""Publishing to RabbitMQ with several batches awaiting publisher confirms.

:class:`PublishFrames` encodes a whole batch of ``basic.publish`` messages to one queue as
the AMQP frames of one write: the method and content-header frames are marshalled once by
pika and reused, only the body frames are built per message. :class:`ConfirmTracker`
numbers the published messages (a confirm-mode channel's delivery tags count from 1) and
settles each :class:`PublishedBatch` once the broker has confirmed all of its messages.
"""

from __future__ import annotations

import struct
import time
from collections.abc import Callable, Sequence

from brokers.base import Confirmation
from brokers.errors import BrokerError

_BODY_HEADER = struct.Struct(">BHI")  # frame type, channel, payload size


class PublishFrames:
    """The frames of ``basic.publish`` to one queue on one channel, for whole batches."""

    def __init__(
        self, channel_number: int, queue: str, properties: object, body_max_length: int
    ) -> None:
        import pika.frame
        import pika.spec

        self.channel_number = channel_number
        self.properties = properties
        self.body_max_length = body_max_length
        publish = pika.spec.Basic.Publish(exchange="", routing_key=queue, mandatory=True)
        self.method = pika.frame.Method(channel_number, publish).marshal()
        self.frame_end = bytes([pika.spec.FRAME_END])
        self.body_type = pika.spec.FRAME_BODY
        self._headers: dict[int, bytes] = {}

    def header(self, size: int) -> bytes:
        """The content-header frame of a body of ``size`` bytes (cached by size)."""
        frame = self._headers.get(size)
        if frame is None:
            import pika.frame

            frame = pika.frame.Header(self.channel_number, size, self.properties).marshal()
            self._headers[size] = frame
        return frame

    def encode(self, batch: Sequence[bytes]) -> bytes:
        method, end, body_type, number = (
            self.method,
            self.frame_end,
            self.body_type,
            self.channel_number,
        )
        limit = self.body_max_length
        pack = _BODY_HEADER.pack
        parts: list[bytes] = []
        for body in batch:
            size = len(body)
            parts += (method, self.header(size))
            for start in range(0, size, limit):  # empty bodies have no body frame
                chunk = body[start : start + limit] if size > limit else body
                parts += (pack(body_type, number, len(chunk)), chunk, end)
        return b"".join(parts)


class PublishedBatch(Confirmation):
    """Messages published together, confirmed once the broker confirmed each of them."""

    __slots__ = ("bodies", "deadline", "done_ns", "error", "left", "nacked", "returned", "settle")

    def __init__(
        self,
        bodies: Sequence[bytes],
        deadline: float,
        settle: Callable[[PublishedBatch, float], int | None],
    ) -> None:
        self.bodies = bodies  # to find the batch of a returned message
        self.left = len(bodies)
        self.nacked = 0
        self.returned = 0
        #: ``time.monotonic()`` by which every confirm must have arrived.
        self.deadline = deadline
        self.done_ns: int | None = None
        self.error: BaseException | None = None
        self.settle = settle

    @property
    def size(self) -> int:
        return len(self.bodies)

    @property
    def finished(self) -> bool:
        return self.done_ns is not None or self.error is not None

    def wait(self, timeout: float) -> int | None:
        return self.settle(self, timeout)


class ConfirmTracker:
    """Delivery tags of one confirm-mode channel, and the batches still awaiting confirms.

    A ``basic.return`` (unroutable) comes before the confirm of its message and carries its
    body, which names the batch it fails (should no waiting batch hold that body, the
    return is charged to the batch of the next confirm's delivery tag).
    """

    def __init__(self, where: str, queue: str) -> None:
        self.where = where
        self.queue = queue
        self.next_tag = 1
        self.lowest = 1  # no message below this tag awaits a confirm
        self.returned = 0  # returns not yet charged to a batch
        self.by_tag: dict[int, PublishedBatch] = {}

    def add(self, batch: PublishedBatch) -> None:
        first = self.next_tag
        self.next_tag = first + batch.size
        by_tag = self.by_tag
        for tag in range(first, self.next_tag):
            by_tag[tag] = batch

    def on_return(self, body: bytes) -> None:
        seen = None
        for batch in self.by_tag.values():  # in tag order; rare, so a scan will do
            if batch is not seen and body in batch.bodies:
                batch.returned += 1
                return
            seen = batch
        self.returned += 1

    def on_confirm(self, tag: int, multiple: bool, nack: bool) -> bool:
        """Settle the confirmed messages; True when a batch finished."""
        by_tag = self.by_tag
        owner = by_tag.get(tag)
        if self.returned and owner is not None:
            owner.returned += self.returned
            self.returned = 0
        if multiple:
            tags: range = range(self.lowest, tag + 1)
            self.lowest = max(self.lowest, tag + 1)
        else:
            tags = range(tag, tag + 1)
        finished = False
        for confirmed in tags:
            batch = by_tag.pop(confirmed, None)
            if batch is None:
                continue
            batch.left -= 1
            if nack:
                batch.nacked += 1
            if batch.left == 0:
                self._finish(batch)
                finished = True
        return finished

    def _finish(self, batch: PublishedBatch) -> None:
        if batch.nacked or batch.returned:
            batch.error = BrokerError(
                f"RabbitMQ {self.where}: {batch.nacked} of {batch.size} messages nacked, "
                f"{batch.returned} returned as unroutable (does queue {self.queue} exist?)"
            )
        else:
            batch.done_ns = time.time_ns()

    def fail_all(self, reason: str) -> None:
        """Every batch still awaiting confirms fails (its channel or connection is gone)."""
        for batch in set(self.by_tag.values()):
            batch.error = BrokerError(f"RabbitMQ {self.where}: {reason}")
        self.by_tag.clear()
