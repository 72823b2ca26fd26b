"""The Kafka adapter on confluent-kafka (``client = "confluent-kafka"``, the default).

librdkafka does the protocol work in its own C threads, so a worker measures the broker
rather than the client. ``submit`` produces a batch to one partition (the next batch to
another, at random), each message with a delivery callback that
counts the batch's reports (:class:`Delivery`); callbacks are served — and a batch's
confirmation time stamped — while the adapter polls the producer. ``fetch`` takes what
the consumer has fetched ahead in one ``consume`` call. Before partitions move, the
``on_revoke`` callback commits what was acknowledged. What the operations do is
:class:`~brokers.kafka.base.KafkaAdapterBase`'s.
"""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Sequence
from typing import Any, NamedTuple

from brokers.base import Confirmation, Endpoints
from brokers.batches import keys_of
from brokers.kafka import rdkafka
from brokers.kafka.base import POLL_TIMEOUT, KafkaAdapterBase, Record
from brokers.kafka.params import KafkaClientParams

log = logging.getLogger(__name__)


class Fetched(NamedTuple):
    """A consumed message, read out of librdkafka's message once."""

    partition: int
    offset: int
    value: bytes
    headers: list[tuple[str, bytes]] | None


def _queue_full() -> Any:
    from confluent_kafka import KafkaError

    return KafkaError(KafkaError._QUEUE_FULL, "the producer's queue is full")


class Delivery(Confirmation):
    """The delivery reports of one batch: the producer's ``on_delivery`` callback.

    Done when the last report arrived (its time is the batch's confirmation time); failed
    when any report carries an error.
    """

    __slots__ = ("_done_ns", "_endpoints", "_error", "_pending", "_producer")

    def __init__(self, producer: Any, endpoints: Endpoints, count: int) -> None:
        self._producer = producer
        self._endpoints = endpoints
        self._pending = count
        self._error: Any = None
        self._done_ns = time.time_ns()

    def __call__(self, err: Any, message: Any) -> None:
        if err is not None and self._error is None:
            self._error = err
        self._pending -= 1
        if self._pending == 0:
            self._done_ns = time.time_ns()

    def not_queued(self, count: int, error: Any) -> None:
        """``count`` messages of the batch were never queued (no report will come): the
        batch failed with ``error`` (queue full where none is given)."""
        if self._error is None:
            self._error = error if error is not None else _queue_full()
        self._pending -= count
        if self._pending == 0:
            self._done_ns = time.time_ns()

    def wait(self, timeout: float) -> int | None:
        deadline = time.monotonic() + timeout
        while self._pending > 0:
            self._producer.poll(max(0.0, deadline - time.monotonic()))
            if self._pending > 0 and time.monotonic() >= deadline:
                return None
        if self._error is not None:
            raise rdkafka.error(self._endpoints, self._error)
        return self._done_ns


class ConfluentAdapter(KafkaAdapterBase):
    """confluent-kafka's producer and consumer behind the shared Kafka operations."""

    def __init__(
        self, endpoints: Endpoints, params: KafkaClientParams, topic: str, group: str
    ) -> None:
        super().__init__(endpoints, params, topic, group)
        self.latch = rdkafka.ErrorLatch(endpoints)
        self._partitions = 0  # of the topic, known once the producer is built
        self._partition = 0
        self._since = 0.0  # when the worker moved to this partition
        self._random = random.Random()
        #: The client can queue a batch in one call (confluent-kafka's ``produce_batch``).
        self._batches = False

    # -- clients ---------------------------------------------------------------------

    def producer(self) -> Any:
        self.latch.check()
        if self._producer is None:
            producer = rdkafka.producer(self.endpoints, self.params, self.latch)
            # Messages produced before the topic's partitions are known are partitioned
            # one by one later, not stuck to one partition per batch.
            rdkafka.await_topics(
                producer, self.endpoints, [self.topic], self.params.request_timeout
            )
            metadata = producer.list_topics(self.topic, timeout=self.params.request_timeout)
            self._partitions = len(metadata.topics[self.topic].partitions)
            self._partition = self._random.randrange(self._partitions)
            self._batches = hasattr(producer, "produce_batch")
            self._producer = producer
        return self._producer

    def consumer(self) -> Any:
        self.latch.check()
        if self._consumer is None:
            consumer = rdkafka.consumer(self.endpoints, self.params, self.group, self.latch)
            try:
                rdkafka.subscribe(
                    consumer,
                    self.endpoints,
                    [self.topic],
                    self.params.request_timeout,
                    on_assign=self._on_assign,
                    on_revoke=self._on_revoke,
                    on_lost=self._on_lost,
                )
            except BaseException:
                consumer.close()
                raise
            self._consumer = consumer
            self._last_commit = time.monotonic()
        return self._consumer

    # -- producing -------------------------------------------------------------------

    def submit(self, batch: Sequence[bytes]) -> Confirmation:
        from confluent_kafka import KafkaException

        producer = self.producer()
        keys = keys_of(batch)
        if keys is not None:
            return self._submit_keyed(producer, batch, keys)
        delivery = Delivery(producer, self.endpoints, len(batch))
        partition = self._next_partition()
        try:
            if self._batches:
                # One call for the batch: librdkafka queues it in C (no produce call per
                # message); a message it could not queue carries its error back.
                messages = [{"value": body} for body in batch]
                queued = producer.produce_batch(
                    self.topic, messages, partition=partition, on_delivery=delivery
                )
                if queued < len(batch):
                    errors = [m["_error"] for m in messages if "_error" in m]
                    delivery.not_queued(len(batch) - queued, errors[0] if errors else None)
            else:
                for body in batch:
                    producer.produce(self.topic, body, partition=partition, on_delivery=delivery)
        except KafkaException as exc:
            raise rdkafka.error(self.endpoints, exc.args[0]) from None
        producer.poll(0)  # serve the reports that are in, without waiting
        return delivery

    def _submit_keyed(
        self, producer: Any, batch: Sequence[bytes], keys: Sequence[bytes]
    ) -> Confirmation:
        """Produce a keyed batch: each record with its key, to the partition the key's hash
        names (librdkafka's partitioner), so a key's records stay in one partition."""
        from confluent_kafka import KafkaException

        delivery = Delivery(producer, self.endpoints, len(batch))
        try:
            if self._batches:
                messages = [{"value": b, "key": k} for b, k in zip(batch, keys, strict=True)]
                queued = producer.produce_batch(self.topic, messages, on_delivery=delivery)
                if queued < len(batch):
                    errors = [m["_error"] for m in messages if "_error" in m]
                    delivery.not_queued(len(batch) - queued, errors[0] if errors else None)
            else:
                for body, key in zip(batch, keys, strict=True):
                    producer.produce(self.topic, body, key, on_delivery=delivery)
        except KafkaException as exc:
            raise rdkafka.error(self.endpoints, exc.args[0]) from None
        producer.poll(0)
        return delivery

    def _next_partition(self) -> int:
        """The partition of the next batch: a batch goes to one partition, so it leaves as
        one request (librdkafka's own sticky partitioner switches on a timer, in the middle
        of a batch under load); batches of the next ``STICKY_PARTITIONING_MS`` join it, as
        librdkafka would, then the worker moves on to another partition at random."""
        now = time.monotonic()
        if self._partitions > 1 and now - self._since >= rdkafka.STICKY_PARTITIONING_MS / 1000:
            step = self._random.randrange(1, self._partitions)
            self._partition = (self._partition + step) % self._partitions
            self._since = now
        return self._partition

    def produce(
        self, topic: str, values: Sequence[bytes], keys: Sequence[bytes], partitions: Sequence[int]
    ) -> Confirmation:
        from confluent_kafka import KafkaException

        producer = self.producer()
        delivery = Delivery(producer, self.endpoints, len(values))
        try:
            for value, key, partition in zip(values, keys, partitions, strict=True):
                producer.produce(topic, value, key, partition, on_delivery=delivery)
        except KafkaException as exc:
            raise rdkafka.error(self.endpoints, exc.args[0]) from None
        producer.poll(0)
        return delivery

    def flush(self, timeout: float) -> None:
        if self._producer is not None:
            self._producer.flush(timeout)

    # -- consuming -------------------------------------------------------------------

    def _consume(self, max_n: int) -> list[Any]:
        consumer = self.consumer()
        # consume(n, timeout) returns early only once it has n messages: take what is
        # fetched already; else wait for one message and add what came with it.
        messages: list[Any] = consumer.consume(max_n, 0)
        if not messages:
            messages = consumer.consume(1, POLL_TIMEOUT)
            if messages and max_n > 1:
                messages += consumer.consume(max_n - 1, 0)
        self.latch.check()
        return messages

    def fetch(self, max_n: int) -> list[Record]:
        records: list[Record] = []
        for m in self._consume(max_n):
            err = m.error()
            if err is None:
                records.append(Fetched(m.partition(), m.offset(), m.value(), m.headers()))
            else:
                log.debug("consuming %s: %s", self.topic, err)
        return records

    def fetch_columns(self, max_n: int) -> tuple[list[bytes], dict[int, list[int]]]:
        """Values and offsets straight from librdkafka's messages (no record objects)."""
        values: list[bytes] = []
        by_partition: dict[int, list[int]] = {}
        offsets: list[int] = []
        current = -1
        for m in self._consume(max_n):
            if m.error() is not None:
                log.debug("consuming %s: %s", self.topic, m.error())
                continue
            partition = m.partition()
            if partition != current:  # messages come in runs of one partition
                offsets = by_partition.setdefault(partition, [])
                current = partition
            offsets.append(m.offset())
            values.append(m.value())
        return values, by_partition

    def seek(self, partition: int, offset: int) -> None:
        from confluent_kafka import KafkaException, TopicPartition

        try:
            self.consumer().seek(TopicPartition(self.topic, partition, offset))
        except KafkaException as exc:
            raise rdkafka.error(self.endpoints, exc.args[0]) from None

    def offsets(self, points: dict[int, int]) -> list[Any]:
        from confluent_kafka import TopicPartition

        return [TopicPartition(self.topic, p, o) for p, o in points.items()]

    def commit_offsets(self, points: dict[int, int], quiet: bool) -> bool:
        return self._commit(self._consumer, points, quiet)

    def _commit(self, consumer: Any, points: dict[int, int], quiet: bool) -> bool:
        from confluent_kafka import KafkaException

        try:
            results = consumer.commit(offsets=self.offsets(points), asynchronous=False)
            errors = [tp.error for tp in results or () if tp.error is not None]
        except KafkaException as exc:
            errors = [exc.args[0]]
        if not errors:
            return True
        if quiet or errors[0].code() in rdkafka.codes(rdkafka.GROUP_MOVED_ON):
            return False
        raise rdkafka.error(self.endpoints, errors[0])

    def _on_assign(self, consumer: Any, partitions: list[Any]) -> None:
        """The group's assignment (librdkafka assigns it once this returns)."""
        self._assigned = True

    def _on_revoke(self, consumer: Any, partitions: list[Any]) -> None:
        """Commit what was acknowledged before ``partitions`` move (the consumer still owns
        them while this runs, inside ``consume``); a refused commit means redeliveries."""
        points = self.revoked(tp.partition for tp in partitions if tp.topic == self.topic)
        if points:
            self._commit(consumer, points, quiet=True)

    def _on_lost(self, consumer: Any, partitions: list[Any]) -> None:
        self.acks.forget(tp.partition for tp in partitions if tp.topic == self.topic)

    def close_clients(self) -> None:
        try:
            if self._consumer is not None:
                self._consumer.close()
        finally:
            if self._producer is not None:
                self._producer.flush(10)
