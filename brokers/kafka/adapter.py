"""The Kafka adapter on kafka-python (``client = "kafka-python"``), blocking.

``submit`` sends the batch to one partition (:mod:`~brokers.kafka.partitioner`) with
``acks=all`` (idempotent) and returns a confirmation over the records' futures, which
the producer's I/O thread settles. The consumer commits before its partitions move
through a rebalance listener that the consumer awaits before it rejoins the group.
What the operations do is :class:`~brokers.kafka.base.KafkaAdapterBase`'s.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Sequence
from typing import Any

from brokers.base import Confirmation, Endpoints
from brokers.batches import keys_of
from brokers.kafka import client
from brokers.kafka.base import POLL_TIMEOUT, KafkaAdapterBase, Record
from brokers.kafka.params import KafkaClientParams


def group_moved_on() -> tuple[type[Exception], ...]:
    """Commit errors that mean the partitions moved on: redeliveries follow, no loss."""
    from kafka import errors

    return (
        errors.CommitFailedError,
        errors.RebalanceInProgressError,
        errors.IllegalGenerationError,
        errors.UnknownMemberIdError,
    )


def unreachable() -> tuple[type[Exception], ...]:
    """kafka-python errors that mean the cluster did not answer in time."""
    from kafka.errors import KafkaConnectionError, KafkaTimeoutError

    return (KafkaTimeoutError, KafkaConnectionError)


class FuturesConfirmation(Confirmation):
    """A batch's record futures; done (and time-stamped) when the last one settles."""

    def __init__(self, futures: Sequence[Any], endpoints: Endpoints) -> None:
        self._endpoints = endpoints
        self._pending = len(futures)
        self._lock = threading.Lock()
        self._settled = threading.Event()
        self._error: BaseException | None = None
        self._done_ns = time.time_ns()
        if not futures:
            self._settled.set()
        for future in futures:
            future.add_callback(self._settle)
            future.add_errback(self._settle)

    def _settle(self, result: Any) -> None:
        now = time.time_ns()
        with self._lock:
            if isinstance(result, BaseException) and self._error is None:
                self._error = result
            self._pending -= 1
            if self._pending == 0:
                self._done_ns = now
                self._settled.set()

    def wait(self, timeout: float) -> int | None:
        if not self._settled.wait(timeout):
            return None
        if self._error is not None:
            if isinstance(self._error, unreachable()):
                raise client.connection_error(self._endpoints, self._error) from None
            raise self._error
        return self._done_ns


def _rebalance_listener(adapter: KafkaPythonAdapter) -> Any:
    from kafka import AsyncConsumerRebalanceListener

    class CommitOnRevoke(AsyncConsumerRebalanceListener):
        """Commit what was acknowledged before a partition moves; forget the rest.

        The consumer awaits this before it rejoins the group, so the commit still
        carries the generation that owns the partitions.
        """

        async def on_partitions_revoked(self, revoked: Any) -> None:
            await adapter.commit_revoked([tp.partition for tp in revoked])

        async def on_partitions_assigned(self, assigned: Any) -> None:
            adapter._assigned = True

        async def on_partitions_lost(self, lost: Any) -> None:
            adapter.acks.forget(tp.partition for tp in lost)

    return CommitOnRevoke()


class KafkaPythonAdapter(KafkaAdapterBase):
    """kafka-python's producer and consumer behind the shared Kafka operations."""

    def __init__(
        self, endpoints: Endpoints, params: KafkaClientParams, topic: str, group: str
    ) -> None:
        super().__init__(endpoints, params, topic, group)
        self.partitioner: Any = None

    # -- clients ---------------------------------------------------------------------

    def producer(self) -> Any:
        if self._producer is None:
            from brokers.kafka.partitioner import BatchPartitioner

            self.partitioner = BatchPartitioner()
            self._producer = client.producer(self.endpoints, self.params, self.partitioner)
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

    # -- producing -------------------------------------------------------------------

    def submit(self, batch: Sequence[bytes]) -> Confirmation:
        producer = self.producer()
        self.partitioner.next_batch()
        keys = keys_of(batch)
        try:
            if keys is None:
                futures = [producer.send(self.topic, value=body) for body in batch]
            else:  # each record to the partition its key's hash names
                futures = [
                    producer.send(self.topic, value=body, key=key)
                    for body, key in zip(batch, keys, strict=True)
                ]
        except unreachable() as exc:
            raise client.connection_error(self.endpoints, exc) from None
        return FuturesConfirmation(futures, self.endpoints)

    def produce(
        self, topic: str, values: Sequence[bytes], keys: Sequence[bytes], partitions: Sequence[int]
    ) -> Confirmation:
        producer = self.producer()
        try:
            futures = [
                producer.send(topic, value=value, key=key, partition=partition)
                for value, key, partition in zip(values, keys, partitions, strict=True)
            ]
        except unreachable() as exc:
            raise client.connection_error(self.endpoints, exc) from None
        return FuturesConfirmation(futures, self.endpoints)

    def flush(self, timeout: float) -> None:
        if self._producer is not None:
            self._producer.flush(timeout=timeout)

    # -- consuming -------------------------------------------------------------------

    def fetch(self, max_n: int) -> list[Record]:
        try:
            polled = self.consumer().poll(timeout_ms=int(POLL_TIMEOUT * 1000), max_records=max_n)
        except unreachable() as exc:
            raise client.connection_error(self.endpoints, exc) from None
        return [record for batch in polled.values() for record in batch]

    def seek(self, partition: int, offset: int) -> None:
        from kafka.structs import TopicPartition

        self.consumer().seek(TopicPartition(self.topic, partition), offset)

    def offsets(self, points: dict[int, int]) -> dict[Any, Any]:
        from kafka.structs import OffsetAndMetadata, TopicPartition

        return {
            TopicPartition(self.topic, p): OffsetAndMetadata(o, "", -1) for p, o in points.items()
        }

    def commit_offsets(self, points: dict[int, int], quiet: bool) -> bool:
        from kafka.errors import KafkaError

        try:
            self._consumer.commit(self.offsets(points))
        except group_moved_on():
            return False
        except KafkaError:
            if quiet:
                return False
            raise
        return True

    async def commit_revoked(self, partitions: list[int]) -> None:
        """Commit (awaited on the consumer's event loop) before ``partitions`` move."""
        points = self.revoked(partitions)
        if not points or self._consumer is None:
            return
        with contextlib.suppress(Exception):  # a refused commit means redeliveries, never loss
            await self._consumer.commit_async(self.offsets(points))

    def close_clients(self) -> None:
        try:
            if self._consumer is not None:
                self._consumer.close(autocommit=False)
        finally:
            if self._producer is not None:
                self._producer.close(timeout=10)
