"""KMQ's redelivery tracker: reads the markers topic and sends again every message whose
start marker got no end marker before its redelivery time.

One tracker runs per receiver process and queue topic (shared by that process's
workers); the trackers of all processes form one consumer group on the markers topic,
so each markers partition is watched by exactly one of them. A tracker commits its
markers offsets up to the oldest start marker still open, so a tracker that takes over
a partition rebuilds the open markers from there.

The tracker uses kafka-python whatever ``client`` the workers use: it runs once per
process, so its speed does not limit a worker, and its consumer's rebalance listener
and position handling are the ones its hand-over logic was written against.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections import defaultdict
from typing import Any

from brokers.base import Endpoints
from brokers.errors import BrokerError
from brokers.kafka import client
from brokers.kafka.adapter import group_moved_on
from brokers.kafka.params import KafkaClientParams
from brokers.kmq import markers

log = logging.getLogger(__name__)

POLL_TIMEOUT_MS = 200
FETCH_TIMEOUT = 10.0


def tracker_group(queue_topic: str) -> str:
    return f"{queue_topic}.kmq-tracker"


class RedeliveryTracker:
    """A background thread watching the markers of one queue topic."""

    def __init__(self, endpoints: Endpoints, params: KafkaClientParams, queue_topic: str) -> None:
        self.endpoints = endpoints
        self.params = params
        self.queue = queue_topic
        self.markers = markers.markers_topic(queue_topic)
        #: markers partition → {(queue partition, offset): (redeliver at ms, marker offset)}
        self.open: dict[int, dict[tuple[int, int], tuple[int, int]]] = defaultdict(dict)
        #: markers partition → offset after the last marker read
        self.read_to: dict[int, int] = {}
        self.redelivered = 0
        self.error: BaseException | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._consumer: Any = None
        self._restart = threading.Lock()

    # -- life cycle ------------------------------------------------------------------

    def start(self) -> RedeliveryTracker:
        self._stop.clear()
        self.error = None
        self._thread = threading.Thread(
            target=self._run, name=f"kmq-tracker-{self.queue}", daemon=True
        )
        self._thread.start()
        return self

    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def check(self) -> None:
        """Raise when the tracker died; restart it for the next call."""
        with self._restart:
            if self.alive():
                return
            error = self.error
            self.start()
        if error is not None:
            raise BrokerError(f"KMQ redelivery tracker of {self.queue} failed: {error}")

    def stop(self, timeout: float = 30.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout)

    # -- the loop --------------------------------------------------------------------

    def _run(self) -> None:
        consumer = producer = fetcher = None
        try:
            consumer = client.consumer(self.endpoints, self.params, tracker_group(self.queue))
            client.subscribe(
                consumer,
                self.endpoints,
                [self.markers],
                self._listener(),
                self.params.request_timeout,
            )
            self._consumer = consumer
            producer = client.producer(self.endpoints, self.params)
            fetcher = client.consumer(self.endpoints, self.params, None)
            last_commit = time.monotonic()
            while not self._stop.is_set():
                polled = consumer.poll(timeout_ms=POLL_TIMEOUT_MS)
                for tp, records in polled.items():
                    for record in records:
                        self._apply(tp.partition, record)
                self._redeliver_due(producer, fetcher)
                if time.monotonic() - last_commit >= self.params.commit_interval:
                    self._commit()
                    last_commit = time.monotonic()
            self._commit(quiet=True)
        except Exception as exc:
            self.error = exc
            log.warning("KMQ redelivery tracker of %s stopped: %s", self.queue, exc)
        finally:
            self._consumer = None
            for kafka_client in (consumer, fetcher):
                if kafka_client is not None:
                    with contextlib.suppress(Exception):
                        kafka_client.close(autocommit=False)
            if producer is not None:
                with contextlib.suppress(Exception):
                    producer.close(timeout=10)

    def _listener(self) -> Any:
        from kafka import AsyncConsumerRebalanceListener

        tracker = self

        class Handover(AsyncConsumerRebalanceListener):
            """Commit how far the markers were handled before a partition may move; forget
            only the partitions that did move (the consumer keeps its position in the ones
            it keeps, so their open markers would not be read again)."""

            async def on_partitions_revoked(self, revoked: Any) -> None:
                offsets = tracker._commit_offsets([tp.partition for tp in revoked])
                if offsets and tracker._consumer is not None:
                    with contextlib.suppress(Exception):  # the next owner redelivers a little more
                        await tracker._consumer.commit_async(offsets)

            async def on_partitions_assigned(self, assigned: Any) -> None:
                kept = {tp.partition for tp in assigned}
                tracker._forget({*tracker.open, *tracker.read_to} - kept)

            async def on_partitions_lost(self, lost: Any) -> None:
                tracker._forget(tp.partition for tp in lost)

        return Handover()

    def _forget(self, partitions: Any) -> None:
        for partition in partitions:
            self.open.pop(partition, None)
            self.read_to.pop(partition, None)

    def _apply(self, markers_partition: int, record: Any) -> None:
        self.read_to[markers_partition] = record.offset + 1
        marker = markers.parse(record.key, record.value)
        if marker is None:
            return
        entries = self.open[markers_partition]
        if marker.is_start:
            entries[(marker.partition, marker.offset)] = (marker.redeliver_at_ms, record.offset)
        else:
            entries.pop((marker.partition, marker.offset), None)

    def _commit_offsets(self, partitions: Any = None) -> dict[Any, Any]:
        """Per markers partition: the oldest open start marker, or how far it was read."""
        from kafka.structs import OffsetAndMetadata, TopicPartition

        chosen = self.read_to if partitions is None else set(partitions) & set(self.read_to)
        offsets = {}
        for partition in chosen:
            entries = self.open.get(partition)
            point = min(v[1] for v in entries.values()) if entries else self.read_to[partition]
            offsets[TopicPartition(self.markers, partition)] = OffsetAndMetadata(point, "", -1)
        return offsets

    def _commit(self, quiet: bool = False) -> None:
        from kafka.errors import KafkaError

        offsets = self._commit_offsets()
        if not offsets or self._consumer is None:
            return
        try:
            self._consumer.commit(offsets)
        except group_moved_on():
            return
        except KafkaError:
            if not quiet:
                raise

    # -- redelivery ------------------------------------------------------------------

    def _redeliver_due(self, producer: Any, fetcher: Any) -> None:
        now_ms = int(time.time() * 1000)
        due: dict[int, list[tuple[int, int]]] = defaultdict(list)  # queue partition → …
        for markers_partition, entries in self.open.items():
            for (partition, offset), (at_ms, _) in entries.items():
                if at_ms <= now_ms:
                    due[partition].append((offset, markers_partition))
        for partition, items in due.items():
            self._redeliver(producer, fetcher, partition, sorted(items))

    def _redeliver(
        self, producer: Any, fetcher: Any, partition: int, items: list[tuple[int, int]]
    ) -> None:
        """Send the messages again (marked), then end their markers.

        A message the fetch did not reach in time stays open and is tried again on the
        next round; only one the log no longer holds is given up (its marker ended).
        """
        timeout = self.params.request_timeout + 5
        bodies, gone = self._fetch(fetcher, partition, [offset for offset, _ in items])
        settled = [(o, mp) for o, mp in items if o in bodies or o in gone]
        if gone:
            log.warning(
                "KMQ: %d messages of %s/%d are no longer in the log",
                len(gone),
                self.queue,
                partition,
            )
        header = [(markers.REDELIVERED_HEADER, b"1")]
        sent = [
            producer.send(self.queue, value=bodies[offset], headers=header)
            for offset, _ in settled
            if offset in bodies
        ]
        for future in sent:
            future.get(timeout=timeout)
        ended = [
            producer.send(
                self.markers,
                key=markers.key(partition, offset),
                value=markers.end(),
                partition=markers_partition,
            )
            for offset, markers_partition in settled
        ]
        for future in ended:
            future.get(timeout=timeout)
        for offset, markers_partition in settled:
            self.open[markers_partition].pop((partition, offset), None)
        self.redelivered += len(sent)

    def _fetch(
        self, fetcher: Any, partition: int, offsets: list[int]
    ) -> tuple[dict[int, bytes], set[int]]:
        """The queue messages at ``offsets`` of ``partition``, and the offsets the log no
        longer holds (passed over by the fetch); offsets not reached in time are in neither."""
        from kafka.structs import TopicPartition

        tp = TopicPartition(self.queue, partition)
        fetcher.assign([tp])
        wanted = set(offsets)
        found: dict[int, bytes] = {}
        gone: set[int] = set()
        remaining = sorted(wanted)
        deadline = time.monotonic() + FETCH_TIMEOUT
        while remaining and time.monotonic() < deadline:
            fetcher.seek(tp, remaining[0])
            records = fetcher.poll(timeout_ms=500, max_records=500).get(tp, [])
            if not records:
                continue
            for record in records:
                if record.offset in wanted:
                    found[record.offset] = record.value
            last = records[-1].offset
            gone |= {o for o in remaining if o <= last and o not in found}
            remaining = [o for o in remaining if o > last]
        return found, gone


# -- one tracker per process and queue ---------------------------------------------------

_lock = threading.Lock()
_trackers: dict[tuple[tuple[str, ...], str], tuple[RedeliveryTracker, int]] = {}


def acquire(endpoints: Endpoints, params: KafkaClientParams, queue_topic: str) -> RedeliveryTracker:
    """This process's tracker of ``queue_topic`` (started by the first receiver)."""
    key = (endpoints.hosts, queue_topic)
    with _lock:
        tracker, users = _trackers.get(key, (None, 0))
        if tracker is None:
            tracker = RedeliveryTracker(endpoints, params, queue_topic).start()
        _trackers[key] = (tracker, users + 1)
        return tracker


def release(tracker: RedeliveryTracker) -> None:
    """Stop the tracker when its last receiver in this process is done."""
    key = (tracker.endpoints.hosts, tracker.queue)
    with _lock:
        current, users = _trackers.get(key, (None, 0))
        if current is not tracker:
            return
        if users > 1:
            _trackers[key] = (tracker, users - 1)
            return
        del _trackers[key]
    tracker.stop()
