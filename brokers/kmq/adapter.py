"""The KMQ adapters: Kafka's adapters (either client library) with individual
acknowledgements.

``send`` is Kafka's. ``receive`` fetches from the queue topic, writes a start marker for
every message (waiting until the markers are confirmed) and only then hands the messages
out; from that moment the markers, not the consumer offset, keep the message safe, so the
queue offsets are committed every ``commit_interval`` up to what was handed out.
``ack`` writes end markers without waiting (a lost end marker only causes a
redelivery). The process's :mod:`~brokers.kmq.tracker` sends again what was not
acknowledged within ``redelivery_timeout``; those copies arrive marked as redelivered.
Queue producer and consumer follow the ``client`` parameter; the tracker always uses
kafka-python.
"""

from __future__ import annotations

import time
from collections.abc import Sequence

from brokers.base import Endpoints, Received, ReceivedBatch
from brokers.errors import BrokerError
from brokers.kafka import client
from brokers.kafka.adapter import KafkaPythonAdapter
from brokers.kafka.base import KafkaAdapterBase, PartitionOffset, Record, connecting
from brokers.kafka.confluent import ConfluentAdapter
from brokers.kmq import markers, tracker
from brokers.kmq.params import KmqParams


def _redelivered(record: Record) -> bool:
    return any(name == markers.REDELIVERED_HEADER for name, _ in record.headers or ())


class KmqOperations(KafkaAdapterBase):
    """KMQ's receive, ack and close over any Kafka client adapter (mixed in before it)."""

    def __init__(self, endpoints: Endpoints, params: KmqParams, topic: str, group: str) -> None:
        super().__init__(endpoints, params, topic, group)
        self.kmq = params
        self.markers = markers.markers_topic(topic)
        self.tracker: tracker.RedeliveryTracker | None = None

    def receive(self, max_n: int) -> list[Received[PartitionOffset]]:
        if self.tracker is None:
            self.tracker = tracker.acquire(self.endpoints, self.params, self.topic)
        self.tracker.check()
        records = self.poll(max_n)
        if not records:
            return []
        redeliver_at = int((time.time() + self.kmq.redelivery_timeout) * 1000)
        try:
            self.confirm(
                self.produce(
                    self.markers,
                    [markers.start(redeliver_at)] * len(records),
                    [markers.key(r.partition, r.offset) for r in records],
                    [r.partition for r in records],
                )
            )
        except Exception as exc:
            # Without start markers nobody would redeliver them: receive them again.
            first: dict[int, int] = {}
            for r in records:
                first[r.partition] = min(first.get(r.partition, r.offset), r.offset)
            self.rewind(first)
            if isinstance(exc, BrokerError):
                raise
            raise client.connection_error(self.endpoints, exc) from None
        for r in records:
            self.acks.acked(r.partition, r.offset)
        return [
            Received(r.value, (r.partition, r.offset), redelivered=_redelivered(r)) for r in records
        ]

    def receive_batch(self, max_n: int) -> ReceivedBatch[PartitionOffset]:
        """KMQ's :meth:`receive` (markers first), as columns."""
        return ReceivedBatch.of(self.receive(max_n))

    def ack(self, receipts: Sequence[PartitionOffset]) -> None:
        if receipts:
            self.produce(
                self.markers,
                [markers.end()] * len(receipts),
                [markers.key(partition, offset) for partition, offset in receipts],
                [partition for partition, _ in receipts],
            )
        self.commit_when_due()

    def close(self) -> None:
        try:
            self.flush(self.params.request_timeout)
            super().close()
        finally:
            if self.tracker is not None:
                tracker.release(self.tracker)
                self.tracker = None


class KmqConfluentAdapter(KmqOperations, ConfluentAdapter):
    """KMQ on confluent-kafka's queue producer and consumer."""


class KmqKafkaPythonAdapter(KmqOperations, KafkaPythonAdapter):
    """KMQ on kafka-python's queue producer and consumer."""


#: The adapter class of each ``client``.
ADAPTERS: dict[str, type[KafkaAdapterBase]] = {
    "confluent-kafka": KmqConfluentAdapter,
    "kafka-python": KmqKafkaPythonAdapter,
}
connect = connecting(ADAPTERS)
