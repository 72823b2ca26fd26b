"""The ``[broker.params]`` of Kafka-protocol systems; the defaults are docs/measurement.md §6's safe settings.

:class:`KafkaClientParams` holds what every system spoken to through the Kafka protocol
shares (Kafka, KMQ, Redpanda); :class:`KafkaParams` adds the Kafka broker's own topic
settings.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from brokers.connection import BrokerParams, Heap, seconds

#: The Python clients a worker may use, by distribution name.
KafkaClient = Literal["confluent-kafka", "kafka-python"]
#: More replicas than any cluster brokerbench starts or declares on AWS.
MAX_REPLICAS = 16
#: The longest retention a topic may be given: a year, in seconds.
MAX_RETENTION_S = 365 * 86_400


class KafkaClientParams(BrokerParams):
    client: KafkaClient = Field(
        "confluent-kafka",
        description="Client library of the workers: 'confluent-kafka' (librdkafka, C: "
        "measures the broker rather than the client) or 'kafka-python' (pure Python, "
        "far fewer messages per second per worker).",
    )
    partitions: int = Field(64, ge=1, le=10_000, description="Partitions of the topic.")
    replication_factor: int | None = Field(
        None,
        ge=1,
        le=MAX_REPLICAS,
        description="Replicas of each partition; unset: 3, or the number of brokers when "
        "the cluster has fewer (a single node: 1).",
    )
    acks: Literal["all", "1"] = Field(
        "all",
        description="Producer acks: 'all' waits for every in-sync replica (safe); '1' for "
        "the leader alone (the asynchronous-replication variant).",
    )
    commit_interval: float = seconds(
        10.0,
        "Seconds between offset commits of a receiver (commits cover only "
        "acknowledged messages; no receive while committing).",
    )
    request_timeout: float = Field(
        30.0, ge=0.1, le=300, description="Seconds a send or commit may take before it fails."
    )


class KafkaParams(KafkaClientParams):
    min_insync_replicas: int | None = Field(
        None,
        ge=1,
        le=MAX_REPLICAS,
        description="Topic min.insync.replicas; unset: 2, or 1 with a single replica.",
    )
    log_flush_interval_messages: int | None = Field(
        None,
        ge=1,
        le=2**31 - 1,
        description="Topic flush.messages (log.flush.interval.messages): fsync after this "
        "many messages; 1 = every message. Unset: Kafka's default (leave it to the OS).",
    )
    retention: float | None = Field(
        None,
        ge=1,
        le=MAX_RETENTION_S,
        description="Topic retention.ms, in seconds: segments older than this are deleted "
        "(a soak run watches disk use level off). Unset: the broker's (24 h as brokerbench "
        "starts it; checked every 5 min).",
    )
    retention_bytes: int | None = Field(
        None,
        ge=1 << 20,
        le=1 << 50,
        description="Topic retention.bytes: the most a partition keeps before its oldest "
        "segments are deleted. Unset: Kafka's default (no limit).",
    )
    segment_bytes: int | None = Field(
        None,
        ge=1 << 20,
        le=(1 << 31) - 1,
        description="Topic segment.bytes: retention deletes whole segments, so a small "
        "retention needs small segments. Unset: Kafka's default (1 GiB).",
    )
    heap: Heap = Field("512m", description="-Xmx of each locally started broker JVM.")

    @model_validator(mode="after")
    def _insync_within_replicas(self) -> KafkaParams:
        wanted, replicas = self.min_insync_replicas, self.replication_factor
        if wanted is not None and replicas is not None and wanted > replicas:
            raise ValueError(
                f"min_insync_replicas = {wanted} is more than replication_factor = {replicas}: "
                "every send would fail"
            )
        return self


def replication_for(params: KafkaClientParams, brokers: int) -> int:
    """The replication factor a new topic gets on a cluster of ``brokers`` nodes."""
    return params.replication_factor or min(3, max(1, brokers))


def min_insync_for(params: KafkaParams, replication: int) -> int:
    return params.min_insync_replicas or (1 if replication == 1 else 2)
