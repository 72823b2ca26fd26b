"""Building kafka-python clients for the Kafka-protocol systems (Kafka, KMQ, Redpanda), and
how an unreachable cluster is reported whichever client is used (one line naming
host:port, well within 30 s).

One place decides how kafka-python producers, consumers and admin clients are configured
(:mod:`~brokers.kafka.rdkafka` does the same for confluent-kafka). kafka-python is
imported only when a client is built.
"""

from __future__ import annotations

import socket
import time
from typing import Any

from brokers.base import Endpoints
from brokers.errors import BrokerConnectionError, BrokerError
from brokers.kafka.params import KafkaClientParams

#: How long connecting to the bootstrap servers may take before giving up.
BOOTSTRAP_TIMEOUT = 10.0


def where(endpoints: Endpoints) -> str:
    return ", ".join(endpoints.hosts)


def probe(endpoints: Endpoints, timeout: float | None = None) -> None:
    """Raise :class:`BrokerConnectionError` unless some bootstrap server accepts TCP."""
    deadline = time.monotonic() + (BOOTSTRAP_TIMEOUT if timeout is None else timeout)
    last = ""
    while True:
        for host, port in endpoints.addresses():
            try:
                with socket.create_connection((host, port), timeout=2.0):
                    return
            except OSError as exc:
                last = f"{host}:{port}: {exc.strerror or exc}"
        if time.monotonic() >= deadline:
            raise BrokerConnectionError(f"cannot reach Kafka at {where(endpoints)} ({last})")
        time.sleep(0.5)


def connection_error(endpoints: Endpoints, exc: BaseException) -> BrokerConnectionError:
    text = str(exc).strip().splitlines()
    detail = text[0] if text else type(exc).__name__
    return BrokerConnectionError(f"Kafka at {where(endpoints)}: {type(exc).__name__}: {detail}")


def _common(endpoints: Endpoints, params: KafkaClientParams) -> dict[str, Any]:
    return {
        "bootstrap_servers": list(endpoints.hosts),
        "request_timeout_ms": int(params.request_timeout * 1000),
        "bootstrap_timeout_ms": int(BOOTSTRAP_TIMEOUT * 1000),
    }


def producer(endpoints: Endpoints, params: KafkaClientParams, partitioner: Any = None) -> Any:
    """A producer with the configured acks (``all`` → idempotent, in order).

    ``partitioner`` places keyless records (kafka-python's default: a random partition each).
    """
    from kafka import KafkaProducer
    from kafka.errors import KafkaError

    safe = params.acks == "all"
    extra = {} if partitioner is None else {"partitioner": partitioner}
    try:
        return KafkaProducer(
            acks="all" if safe else 1,
            enable_idempotence=safe,
            retries=2**31 - 1,
            linger_ms=0,
            max_block_ms=int(params.request_timeout * 1000),
            delivery_timeout_ms=int(params.request_timeout * 1000) + 1000,
            allow_auto_create_topics=False,
            **extra,
            **_common(endpoints, params),
        )
    except KafkaError as exc:
        raise connection_error(endpoints, exc) from None


def consumer(endpoints: Endpoints, params: KafkaClientParams, group: str | None) -> Any:
    """A consumer with manual commits that starts at the earliest uncommitted offset."""
    from kafka import KafkaConsumer
    from kafka.errors import KafkaError

    try:
        return KafkaConsumer(
            group_id=group,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            allow_auto_create_topics=False,
            fetch_max_wait_ms=500,  # a long poll: the broker answers as soon as data arrives
            metadata_max_age_ms=10_000,  # partitions missed at start are found soon
            session_timeout_ms=30000,
            heartbeat_interval_ms=3000,
            **_common(endpoints, params),
        )
    except KafkaError as exc:
        raise connection_error(endpoints, exc) from None


def subscribe(
    consumer: Any, endpoints: Endpoints, topics: list[str], listener: Any, timeout: float
) -> None:
    """Subscribe once the consumer's metadata knows every topic's partitions.

    A broker that has not caught up with a topic just created reports none; a group
    whose first assignment missed them would leave the topic unread for a while.
    """
    deadline = time.monotonic() + timeout
    missing = list(topics)
    while missing:
        missing = [t for t in missing if not consumer.partitions_for_topic(t)]
        if missing and time.monotonic() > deadline:
            raise BrokerError(f"topic {', '.join(missing)} not found at {where(endpoints)}")
        if missing:
            time.sleep(0.2)
    consumer.subscribe(topics, listener=listener)


def admin(endpoints: Endpoints, timeout: float = 30.0) -> Any:
    from kafka import KafkaAdminClient
    from kafka.errors import KafkaError

    probe(endpoints)
    try:
        return KafkaAdminClient(
            bootstrap_servers=list(endpoints.hosts),
            request_timeout_ms=int(timeout * 1000),
            bootstrap_timeout_ms=int(BOOTSTRAP_TIMEOUT * 1000),
        )
    except KafkaError as exc:
        raise connection_error(endpoints, exc) from None
