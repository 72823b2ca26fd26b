"""The KMQ adapter: Kafka's adapter with individual acknowledgements.

``send`` is Kafka's. ``receive`` polls the queue topic, writes a start marker for every
message (waiting until the markers are confirmed) and only then hands the messages out;
from that moment the markers, not the consumer offset, keep the message safe, so the
queue offsets are committed every ``commit_interval`` up to what was handed out.
``ack`` writes end markers without waiting (a lost end marker only causes a
redelivery). The process's :mod:`~brokers.kmq.tracker` sends again what was not
acknowledged within ``redelivery_timeout``; those copies arrive marked as redelivered.
"""

from __future__ import annotations

import time
from collections.abc import Hashable, Sequence
from typing import Any, cast

from brokers.base import Destination, Endpoints, Received
from brokers.kafka import client
from brokers.kafka.adapter import KafkaAdapter, group_of
from brokers.kmq import markers, tracker
from brokers.kmq.params import KmqParams


def _redelivered(record: Any) -> bool:
    return any(name == markers.REDELIVERED_HEADER for name, _ in record.headers or ())


class KmqAdapter(KafkaAdapter):
    def __init__(self, endpoints: Endpoints, params: KmqParams, topic: str, group: str) -> None:
        super().__init__(endpoints, params, topic, group)
        self.kmq = params
        self.markers = markers.markers_topic(topic)
        self.tracker: tracker.RedeliveryTracker | None = None

    def receive(self, max_n: int) -> list[Received]:
        from kafka.errors import KafkaError
        from kafka.structs import TopicPartition

        if self.tracker is None:
            self.tracker = tracker.acquire(self.endpoints, self.params, self.topic)
        self.tracker.check()
        records = self.poll(max_n)
        if not records:
            return []
        producer = self.producer()
        redeliver_at = int((time.time() + self.kmq.redelivery_timeout) * 1000)
        try:
            started = [
                producer.send(
                    self.markers,
                    key=markers.key(r.partition, r.offset),
                    value=markers.start(redeliver_at),
                    partition=r.partition,
                )
                for r in records
            ]
            for future in started:
                future.get(timeout=self.params.request_timeout + 5)
        except KafkaError as exc:
            # Without start markers nobody would redeliver them: receive them again.
            first: dict[int, int] = {}
            for r in records:
                first[r.partition] = min(first.get(r.partition, r.offset), r.offset)
            for partition, offset in first.items():
                self.acks.rewind(partition, offset)
                self.consumer().seek(TopicPartition(self.topic, partition), offset)
            raise client.connection_error(self.endpoints, exc) from None
        for r in records:
            self.acks.acked(r.partition, r.offset)
        return [
            Received(r.value, (r.partition, r.offset), redelivered=_redelivered(r)) for r in records
        ]

    def ack(self, receipts: Sequence[Hashable]) -> None:
        producer = self.producer()
        for receipt in receipts:
            partition, offset = cast(tuple[int, int], receipt)
            producer.send(
                self.markers,
                key=markers.key(partition, offset),
                value=markers.end(),
                partition=partition,
            )
        if time.monotonic() - self._last_commit >= self.params.commit_interval:
            self.commit()

    def close(self) -> None:
        try:
            if self._producer is not None:
                self._producer.flush(timeout=self.params.request_timeout)
            super().close()
        finally:
            if self.tracker is not None:
                tracker.release(self.tracker)
                self.tracker = None


def connect(endpoints: Endpoints, params: KmqParams, destination: Destination) -> KmqAdapter:
    client.probe(endpoints)
    return KmqAdapter(endpoints, params, destination.name, group_of(destination))
