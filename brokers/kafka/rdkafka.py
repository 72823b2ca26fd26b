"""Building confluent-kafka (librdkafka) clients for the Kafka-protocol systems, with the
same safe settings as :mod:`~brokers.kafka.client`'s kafka-python ones.

librdkafka logs through Python's ``logging`` (served from the application thread on
poll/consume) rather than to stderr, and its asynchronous errors reach an
:class:`ErrorLatch`, which the adapter raises from its next call when they are fatal.
confluent-kafka is imported only when a client is built.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from brokers.base import Endpoints
from brokers.errors import BrokerConnectionError, BrokerError
from brokers.kafka import client
from brokers.kafka.params import KafkaClientParams

log = logging.getLogger(__name__)

#: How long keyless messages stick to one partition: the adapter applies it at send-batch
#: boundaries (so no batch is split), librdkafka to other keyless messages, where a batch
#: produced within tens of microseconds lands on one partition unless the window ends in
#: the middle of it; the batches of the next milliseconds join it. Unset,
#: the window is twice ``linger.ms``: with LINGER_MS = 0, every message would go to a
#: random partition.
STICKY_PARTITIONING_MS = 10
#: How long the producer waits for more messages before it sends a request. 0: the
#: adapter hands a whole batch to librdkafka in a few microseconds, before its I/O thread
#: builds the request, so the batch still leaves as one request; messages produced while
#: requests are outstanding are batched anyway. Any linger is added to every
#: synchronous send: against one local broker (16 partitions, 100 B, acks=all) a worker
#: sent ~40,000 msgs/s with 0 ms, ~4,400 with 1 ms and ~1,000 with librdkafka's default
#: 5 ms (p50 send 0.12 / 1.2 / 5.3 ms); with 8 batches in flight ~48,000 / 34,000 / 8,200.
LINGER_MS = 0
#: Messages a consumer keeps fetched ahead of ``receive``, in kB (librdkafka's default is
#: 64 MB per consumer: too much with dozens of receivers per node).
PREFETCH_KBYTES = 8192

#: Errors of deliveries that mean the cluster did not answer in time.
UNREACHABLE = ("_MSG_TIMED_OUT", "_TRANSPORT", "_ALL_BROKERS_DOWN", "_TIMED_OUT", "_RESOLVE")
#: Commit errors that mean the partitions moved on: redeliveries follow, no loss.
GROUP_MOVED_ON = (
    "REBALANCE_IN_PROGRESS",
    "ILLEGAL_GENERATION",
    "UNKNOWN_MEMBER_ID",
    "_ASSIGNMENT_LOST",
    "FENCED_INSTANCE_ID",
)


def codes(names: tuple[str, ...]) -> frozenset[int]:
    from confluent_kafka import KafkaError

    return frozenset(getattr(KafkaError, name) for name in names)


def error(endpoints: Endpoints, err: Any) -> BrokerError:
    """A librdkafka error as one line naming the cluster."""
    message = f"Kafka at {client.where(endpoints)}: {err.name()}: {err.str()}"
    if err.code() in codes(UNREACHABLE):
        return BrokerConnectionError(message)
    return BrokerError(message)


class ErrorLatch:
    """librdkafka's ``error_cb``: keeps the first fatal error for the adapter to raise."""

    def __init__(self, endpoints: Endpoints) -> None:
        self.endpoints = endpoints
        self.fatal: Any = None

    def __call__(self, err: Any) -> None:
        if err.fatal() and self.fatal is None:
            self.fatal = err
        log.debug("librdkafka at %s: %s", client.where(self.endpoints), err)

    def check(self) -> None:
        if self.fatal is not None:
            raise error(self.endpoints, self.fatal)


def _common(endpoints: Endpoints, latch: ErrorLatch) -> dict[str, Any]:
    return {
        "bootstrap.servers": ",".join(endpoints.hosts),
        "socket.connection.setup.timeout.ms": int(client.BOOTSTRAP_TIMEOUT * 1000),
        "error_cb": latch,
        "logger": log,
    }


def producer(endpoints: Endpoints, params: KafkaClientParams, latch: ErrorLatch) -> Any:
    """A producer with the configured acks (``all`` → idempotent, in order)."""
    from confluent_kafka import KafkaException, Producer

    safe = params.acks == "all"
    request_ms = int(params.request_timeout * 1000)
    try:
        return Producer(
            {
                "acks": "all" if safe else "1",
                "enable.idempotence": safe,
                "linger.ms": LINGER_MS,
                "sticky.partitioning.linger.ms": STICKY_PARTITIONING_MS,
                "request.timeout.ms": request_ms,
                "message.timeout.ms": request_ms + 1000,
                **_common(endpoints, latch),
            }
        )
    except KafkaException as exc:
        raise error(endpoints, exc.args[0]) from None


def consumer(endpoints: Endpoints, params: KafkaClientParams, group: str, latch: ErrorLatch) -> Any:
    """A consumer with manual commits that starts at the earliest uncommitted offset."""
    from confluent_kafka import Consumer, KafkaException

    try:
        return Consumer(
            {
                "group.id": group,
                "enable.auto.commit": False,
                "enable.auto.offset.store": False,
                "auto.offset.reset": "earliest",
                "allow.auto.create.topics": False,
                "fetch.wait.max.ms": 500,  # a long poll: the broker answers when data arrives
                "topic.metadata.refresh.interval.ms": 10_000,  # partitions missed at start
                "session.timeout.ms": 30_000,
                "heartbeat.interval.ms": 3_000,
                "queued.max.messages.kbytes": PREFETCH_KBYTES,
                **_common(endpoints, latch),
            }
        )
    except KafkaException as exc:
        raise error(endpoints, exc.args[0]) from None


def await_topics(client_: Any, endpoints: Endpoints, topics: list[str], timeout: float) -> None:
    """Return once the cluster metadata lists every topic's partitions.

    A broker that has not caught up with a topic just created reports none.
    """
    from confluent_kafka import KafkaException

    deadline = time.monotonic() + timeout
    missing = list(topics)
    while missing:
        try:
            metadata = client_.list_topics(timeout=max(1.0, deadline - time.monotonic()))
        except KafkaException as exc:
            raise error(endpoints, exc.args[0]) from None
        missing = [
            t
            for t in missing
            if t not in metadata.topics
            or metadata.topics[t].error is not None
            or not metadata.topics[t].partitions
        ]
        if missing and time.monotonic() > deadline:
            raise BrokerError(f"topic {', '.join(missing)} not found at {client.where(endpoints)}")
        if missing:
            time.sleep(0.2)


def subscribe(
    consumer: Any, endpoints: Endpoints, topics: list[str], timeout: float, **callbacks: Any
) -> None:
    """Subscribe once the cluster metadata lists every topic's partitions (a group whose
    first assignment missed them would leave the topic unread for a while).

    ``callbacks`` are ``on_assign`` / ``on_revoke`` / ``on_lost`` (served inside ``consume``).
    """
    await_topics(consumer, endpoints, topics, timeout)
    consumer.subscribe(topics, **callbacks)
