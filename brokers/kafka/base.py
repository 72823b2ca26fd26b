"""What the Kafka adapters of every client library share (Kafka, KMQ, Redpanda).

:class:`KafkaAdapterBase` implements docs/measurement.md §2's operations once: ``send`` submits the batch
and waits for its confirmation; ``receive`` hands out what a fetch returned and counts it
until acknowledged; ``ack`` marks offsets as processed, and every ``commit_interval``
seconds — and when partitions are taken away or the worker stops — the adapter commits,
synchronously and between two fetches, the offset below which every handed-out message was
acknowledged. Delivery is therefore at-least-once: whatever was received but not
acknowledged comes back when its partition moves to another receiver.

A client library's adapter supplies the client calls: producing (``submit``, ``produce``),
fetching, seeking, committing and closing. :func:`connecting` builds a system's ``connect``
from its adapter classes, keyed by the ``client`` parameter.
"""

from __future__ import annotations

import abc
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Protocol

from brokers.base import Adapter, Confirmation, Destination, Endpoints, Received, ReceivedBatch
from brokers.batches import GroupedReceipts
from brokers.errors import BrokerConnectionError
from brokers.kafka import client
from brokers.kafka.offsets import AckTracker, group_of
from brokers.kafka.params import KafkaClientParams

#: Longest a ``receive`` call waits for messages.
POLL_TIMEOUT = 1.0
#: How much longer than ``request_timeout`` a send may wait for its confirmation.
CONFIRM_GRACE = 5.0

#: A received message's receipt: its partition and offset.
PartitionOffset = tuple[int, int]


class Record(Protocol):
    """A fetched message, whichever client fetched it."""

    @property
    def partition(self) -> int: ...
    @property
    def offset(self) -> int: ...
    @property
    def value(self) -> bytes: ...
    @property
    def headers(self) -> Sequence[tuple[str, bytes]] | None: ...


class KafkaAdapterBase(Adapter[PartitionOffset]):
    """One worker's producer (built on the first send) or consumer (first receive)."""

    pipelined = True

    def __init__(
        self, endpoints: Endpoints, params: KafkaClientParams, topic: str, group: str
    ) -> None:
        self.endpoints = endpoints
        self.params = params
        self.topic = topic
        self.group = group
        self.acks = AckTracker()
        self._producer: Any = None
        self._consumer: Any = None
        self._last_commit = time.monotonic()
        #: Whether the group gave this consumer an assignment yet (possibly empty).
        self._assigned = False

    def joined(self) -> bool:
        """Once the consumer group gave this consumer its first assignment: until then
        the group rebalances as its members join, and nobody receives."""
        return self._assigned

    # -- what a client library supplies ------------------------------------------------

    @abc.abstractmethod
    def submit(self, batch: Sequence[bytes]) -> Confirmation:
        """Produce ``batch`` (keyless, to one partition where the client can) to the topic."""

    @abc.abstractmethod
    def produce(
        self, topic: str, values: Sequence[bytes], keys: Sequence[bytes], partitions: Sequence[int]
    ) -> Confirmation:
        """Produce keyed records to the given partitions of ``topic``."""

    @abc.abstractmethod
    def fetch(self, max_n: int) -> list[Record]:
        """Up to ``max_n`` records, waiting at most :data:`POLL_TIMEOUT`."""

    def fetch_columns(self, max_n: int) -> tuple[list[bytes], dict[int, list[int]]]:
        """What :meth:`fetch` returns, as the values and their offsets by partition."""
        records = self.fetch(max_n)
        by_partition: dict[int, list[int]] = {}
        for record in records:
            by_partition.setdefault(record.partition, []).append(record.offset)
        return [record.value for record in records], by_partition

    @abc.abstractmethod
    def seek(self, partition: int, offset: int) -> None:
        """Fetch ``partition`` of the topic from ``offset`` again."""

    @abc.abstractmethod
    def commit_offsets(self, points: dict[int, int], quiet: bool) -> bool:
        """Commit ``points`` (partition → offset) synchronously.

        False when the group refused them because partitions are moving (their messages
        are delivered again, never lost); other failures raise unless ``quiet``.
        """

    @abc.abstractmethod
    def flush(self, timeout: float) -> None:
        """Wait until everything produced so far is confirmed (or ``timeout``)."""

    @abc.abstractmethod
    def close_clients(self) -> None:
        """Close the consumer and the producer that were built (flushing the producer)."""

    # -- the three operations --------------------------------------------------------

    def confirm(self, confirmation: Confirmation) -> int:
        """Wait for ``confirmation`` (bounded by ``request_timeout``); its time in ns."""
        timeout = self.params.request_timeout + CONFIRM_GRACE
        deadline = time.monotonic() + timeout
        while True:
            done = confirmation.wait(max(0.0, deadline - time.monotonic()))
            if done is not None:
                return done
            if time.monotonic() >= deadline:
                raise BrokerConnectionError(
                    f"Kafka at {client.where(self.endpoints)}: "
                    f"no confirmation within {timeout:.0f} s"
                )

    def send(self, batch: Sequence[bytes]) -> None:
        self.confirm(self.submit(batch))

    def poll(self, max_n: int) -> list[Record]:
        """Records of one fetch (each handed out, so counted until acknowledged)."""
        records = self.fetch(max_n)
        for record in records:
            self.acks.handed_out(record.partition, record.offset)
        return records

    def receive(self, max_n: int) -> list[Received[PartitionOffset]]:
        return [Received(r.value, (r.partition, r.offset)) for r in self.poll(max_n)]

    def receive_batch(self, max_n: int) -> ReceivedBatch[PartitionOffset]:
        """One fetch as columns: the values, and their offsets by partition as the receipt."""
        values, by_partition = self.fetch_columns(max_n)
        for partition, offsets in by_partition.items():
            self.acks.handed_out_many(partition, offsets)
        return ReceivedBatch(values, GroupedReceipts(by_partition, len(values)))

    def ack(self, receipts: Sequence[PartitionOffset]) -> None:
        if isinstance(receipts, GroupedReceipts):
            for partition, offsets in receipts.groups.items():
                self.acks.acked_many(partition, offsets)
        else:
            for partition, offset in receipts:
                self.acks.acked(partition, offset)
        self.commit_when_due()

    # -- commits ---------------------------------------------------------------------

    def commit_when_due(self) -> None:
        if time.monotonic() - self._last_commit >= self.params.commit_interval:
            self.commit()

    def commit(self, quiet: bool = False) -> None:
        """Commit acknowledged offsets synchronously (nothing is received meanwhile)."""
        self._last_commit = time.monotonic()
        if self._consumer is None:
            return
        points = self.acks.commit_points()
        if points and self.commit_offsets(points, quiet):
            self.acks.committed(points)

    def revoked(self, partitions: Iterable[int]) -> dict[int, int]:
        """``partitions`` move to another receiver: what to commit first; forget the rest."""
        chosen = list(partitions)
        points = self.acks.commit_points(chosen)
        self.acks.forget(chosen)
        return points

    def rewind(self, first: Mapping[int, int]) -> None:
        """Receive again from ``first`` (partition → offset): those were not handed out."""
        for partition, offset in first.items():
            self.acks.rewind(partition, offset)
            self.seek(partition, offset)

    def close(self) -> None:
        try:
            if self._consumer is not None:
                self.commit(quiet=True)
        finally:
            try:
                self.close_clients()
            finally:
                self._consumer = self._producer = None


Connect = Callable[[Endpoints, Any, Destination], KafkaAdapterBase]


def connecting(adapters: Mapping[str, type[KafkaAdapterBase]]) -> Connect:
    """A system's ``connect``: the adapter class of ``params.client``, once a broker answers."""

    def connect(endpoints: Endpoints, params: Any, destination: Destination) -> KafkaAdapterBase:
        client.probe(endpoints)
        adapter = adapters[params.client]
        return adapter(endpoints, params, destination.name, group_of(destination))

    return connect
