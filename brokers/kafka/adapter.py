"""The Kafka adapter (kafka-python, blocking), also serving Redpanda.

``send`` produces the batch with ``acks=all`` (idempotent) and waits for every record's
confirmation. Receivers share one consumer group per topic; ``receive`` polls and
``ack`` marks offsets as processed. Every ``commit_interval`` seconds — and when
partitions are taken away or the worker stops — the adapter commits, synchronously and
between two polls, the offset below which every handed-out message was acknowledged.
Delivery is therefore at-least-once: whatever was received but not acknowledged comes
back when its partition moves to another receiver.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Hashable, Iterable, Sequence
from typing import Any, cast

from brokers.base import Adapter, Destination, Endpoints, Received
from brokers.kafka import client
from brokers.kafka.params import KafkaClientParams

#: Longest a ``receive`` call waits for messages.
POLL_TIMEOUT_MS = 1000


def group_moved_on() -> tuple[type[Exception], ...]:
    """Commit errors that mean the partitions moved on: redeliveries follow, no loss."""
    from kafka import errors

    return (
        errors.CommitFailedError,
        errors.RebalanceInProgressError,
        errors.IllegalGenerationError,
        errors.UnknownMemberIdError,
    )


def group_of(destination: Destination) -> str:
    """The consumer group every receiver of one sweep point joins."""
    return f"{destination.name}.receivers"


class AckTracker:
    """Per partition: offsets handed out but not acknowledged, and what may be committed.

    The committable offset of a partition is its lowest unacknowledged offset, or one
    past the highest offset handed out when everything was acknowledged.
    """

    def __init__(self) -> None:
        self._open: dict[int, set[int]] = defaultdict(set)
        self._next: dict[int, int] = {}
        self._committed: dict[int, int] = {}

    def handed_out(self, partition: int, offset: int) -> None:
        self._open[partition].add(offset)
        self._next[partition] = max(self._next.get(partition, 0), offset + 1)

    def acked(self, partition: int, offset: int) -> None:
        pending = self._open.get(partition)
        if pending is not None:
            pending.discard(offset)

    def rewind(self, partition: int, offset: int) -> None:
        """Messages from ``offset`` on will be received again: stop counting them."""
        pending = self._open.get(partition)
        if pending is not None:
            pending.difference_update([o for o in pending if o >= offset])
        if partition in self._next:
            self._next[partition] = min(self._next[partition], offset)

    def unacked(self) -> int:
        return sum(len(v) for v in self._open.values())

    def commit_points(self, partitions: Iterable[int] | None = None) -> dict[int, int]:
        """Offsets to commit now (only those that moved since the last commit)."""
        chosen = self._next if partitions is None else set(partitions) & set(self._next)
        points: dict[int, int] = {}
        for partition in chosen:
            pending = self._open.get(partition)
            point = min(pending) if pending else self._next[partition]
            if point > self._committed.get(partition, -1):
                points[partition] = point
        return points

    def committed(self, points: dict[int, int]) -> None:
        self._committed.update(points)

    def forget(self, partitions: Iterable[int]) -> None:
        for partition in partitions:
            self._open.pop(partition, None)
            self._next.pop(partition, None)
            self._committed.pop(partition, None)


def _rebalance_listener(adapter: KafkaAdapter) -> Any:
    from kafka import AsyncConsumerRebalanceListener

    class CommitOnRevoke(AsyncConsumerRebalanceListener):
        """Commit what was acknowledged before a partition moves; forget the rest.

        The consumer awaits this before it rejoins the group, so the commit still
        carries the generation that owns the partitions.
        """

        async def on_partitions_revoked(self, revoked: Any) -> None:
            await adapter.commit_revoked([tp.partition for tp in revoked])

        async def on_partitions_assigned(self, assigned: Any) -> None:
            pass

        async def on_partitions_lost(self, lost: Any) -> None:
            adapter.acks.forget(tp.partition for tp in lost)

    return CommitOnRevoke()


class KafkaAdapter(Adapter[Any]):
    """One worker's producer (built on the first send) or consumer (first receive)."""

    def __init__(
        self,
        endpoints: Endpoints,
        params: KafkaClientParams,
        topic: str,
        group: str,
    ) -> None:
        self.endpoints = endpoints
        self.params = params
        self.topic = topic
        self.group = group
        self.acks = AckTracker()
        self._producer: Any = None
        self._consumer: Any = None
        self._last_commit = time.monotonic()

    # -- clients ---------------------------------------------------------------------

    def producer(self) -> Any:
        if self._producer is None:
            self._producer = client.producer(self.endpoints, self.params)
        return self._producer

    def consumer(self) -> Any:
        if self._consumer is None:
            consumer = client.consumer(self.endpoints, self.params, self.group)
            try:
                client.subscribe(
                    consumer,
                    self.endpoints,
                    [self.topic],
                    _rebalance_listener(self),
                    self.params.request_timeout,
                )
            except BaseException:
                consumer.close(autocommit=False)
                raise
            self._consumer = consumer
            self._last_commit = time.monotonic()
        return self._consumer

    # -- the three operations --------------------------------------------------------

    def send(self, batch: Sequence[bytes]) -> None:
        from kafka.errors import KafkaConnectionError, KafkaTimeoutError

        producer = self.producer()
        try:
            futures = [producer.send(self.topic, value=body) for body in batch]
            for future in futures:
                future.get(timeout=self.params.request_timeout + 5)
        except (KafkaTimeoutError, KafkaConnectionError) as exc:
            raise client.connection_error(self.endpoints, exc) from None

    def poll(self, max_n: int) -> list[Any]:
        """Records of one poll (each handed out, so counted until acknowledged)."""
        from kafka.errors import KafkaConnectionError, KafkaTimeoutError

        try:
            polled = self.consumer().poll(timeout_ms=POLL_TIMEOUT_MS, max_records=max_n)
        except (KafkaTimeoutError, KafkaConnectionError) as exc:
            raise client.connection_error(self.endpoints, exc) from None
        records = [record for batch in polled.values() for record in batch]
        for record in records:
            self.acks.handed_out(record.partition, record.offset)
        return records

    def receive(self, max_n: int) -> list[Received]:
        return [Received(r.value, (r.partition, r.offset)) for r in self.poll(max_n)]

    def ack(self, receipts: Sequence[Hashable]) -> None:
        for receipt in receipts:
            partition, offset = cast(tuple[int, int], receipt)
            self.acks.acked(partition, offset)
        if time.monotonic() - self._last_commit >= self.params.commit_interval:
            self.commit()

    def offsets(self, points: dict[int, int]) -> dict[Any, Any]:
        from kafka.structs import OffsetAndMetadata, TopicPartition

        return {
            TopicPartition(self.topic, p): OffsetAndMetadata(o, "", -1) for p, o in points.items()
        }

    def commit(self, quiet: bool = False) -> None:
        """Commit acknowledged offsets synchronously (nothing is received meanwhile).

        A commit the group refuses because partitions are moving is skipped (its
        messages are delivered again, never lost); other failures raise unless ``quiet``.
        """
        from kafka.errors import KafkaError

        self._last_commit = time.monotonic()
        if self._consumer is None:
            return
        points = self.acks.commit_points()
        if not points:
            return
        try:
            self._consumer.commit(self.offsets(points))
        except group_moved_on():
            return
        except KafkaError:
            if quiet:
                return
            raise
        self.acks.committed(points)

    async def commit_revoked(self, partitions: list[int]) -> None:
        """Commit (awaited on the consumer's event loop) before ``partitions`` move."""
        points = self.acks.commit_points(partitions)
        self.acks.forget(partitions)
        if not points or self._consumer is None:
            return
        try:
            await self._consumer.commit_async(self.offsets(points))
        except Exception:
            pass  # a refused commit means redeliveries, never loss

    def close(self) -> None:
        try:
            if self._consumer is not None:
                try:
                    self.commit(quiet=True)
                finally:
                    self._consumer.close(autocommit=False)
        finally:
            self._consumer = None
            if self._producer is not None:
                self._producer.close(timeout=10)
                self._producer = None


def connect(
    endpoints: Endpoints, params: KafkaClientParams, destination: Destination
) -> KafkaAdapter:
    client.probe(endpoints)
    return KafkaAdapter(endpoints, params, destination.name, group_of(destination))
