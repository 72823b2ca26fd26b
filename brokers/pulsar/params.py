"""``[broker.params]`` of Apache Pulsar scenarios."""

from __future__ import annotations

from pydantic import Field, model_validator

from brokers.connection import BrokerParams, seconds
from brokers.pulsar.config import Quorum


class PulsarParams(BrokerParams):
    """Pulsar settings of a run; the defaults are the safe configuration of docs/measurement.md §6.

    The quorum settings become the persistence policy of the benchmark namespace; when
    they are left out, the cluster's defaults apply (3/3/2 with three bookies, 1/1/1 in
    the single-bookie standalone).
    """

    ensemble_size: int | None = Field(
        None,
        ge=1,
        le=16,
        description="Bookies each ledger is striped over (None: cluster default).",
    )
    write_quorum: int | None = Field(None, ge=1, le=16, description="Copies of every entry.")
    ack_quorum: int | None = Field(
        None, ge=1, le=16, description="Bookie acknowledgements before a send is confirmed."
    )
    partitions: int = Field(
        0, ge=0, le=1024, description="Partitions of the topic; 0 = a non-partitioned topic."
    )
    batching: bool = Field(
        True, description="Producer batching: a send's messages travel as one entry."
    )
    batching_max_publish_delay_ms: int = Field(
        1,
        ge=0,
        le=10_000,
        description=(
            "With batching and batches in flight: milliseconds the producer gathers messages "
            "before it sends them as one entry (pulsar-perf's default: 1). A worker with one "
            "batch in flight flushes each batch at once."
        ),
    )
    batching_max_messages: int = Field(
        1000, ge=1, le=1_000_000, description="At most this many messages in one entry."
    )
    max_pending_messages: int = Field(
        10_000,
        ge=1,
        le=1_000_000,
        description=(
            "Messages a producer keeps awaiting confirmation before a send waits for room "
            "(over every batch a worker has in flight)."
        ),
    )
    receiver_queue_size: int = Field(
        100, ge=1, le=1_000_000, description="Messages the broker pushes ahead to each consumer."
    )
    ack_timeout: float = seconds(
        30.0, "Seconds before an unacknowledged message is redelivered.", ge=10.0
    )
    negative_ack_delay: float = seconds(
        1.0, "Seconds before a negatively acknowledged message comes back.", ge=0.01
    )
    send_timeout: float = seconds(30.0, "Seconds a send may take before failing.")
    namespace: str = Field(
        "public/brokerbench",
        pattern=r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$",
        description="tenant/namespace of the benchmark topics.",
    )

    @model_validator(mode="after")
    def _quorum_is_consistent(self) -> PulsarParams:
        given = [self.ensemble_size, self.write_quorum, self.ack_quorum]
        if any(v is not None for v in given) and None in given:
            raise ValueError("set ensemble_size, write_quorum and ack_quorum together")
        quorum = self.quorum
        if quorum is not None and not quorum.ack <= quorum.write <= quorum.ensemble:
            raise ValueError(
                "need ack_quorum <= write_quorum <= ensemble_size, "
                f"got {quorum.ack} / {quorum.write} / {quorum.ensemble}"
            )
        return self

    @property
    def quorum(self) -> Quorum | None:
        if self.ensemble_size is None or self.write_quorum is None or self.ack_quorum is None:
            return None
        return Quorum(self.ensemble_size, self.write_quorum, self.ack_quorum)
