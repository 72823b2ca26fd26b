"""NATS JetStream (docs/measurement.md §6): a stream with 3 replicas and a durable pull consumer with
explicit acks; publishing waits for the stream's acknowledgement. A 3-server cluster."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from brokers.base import BrokerParams, BrokerSystem, Topology
from brokers.nats import adapter, durability
from brokers.nats.cloud import NatsCloud
from brokers.nats.local import NatsLocal


class NatsParams(BrokerParams):
    replicas: int | None = Field(
        None,
        ge=1,
        le=5,
        description="Stream replicas; unset = 3, or 1 when the cluster has fewer servers.",
    )
    storage: Literal["file", "memory"] = Field("file", description="Stream storage.")
    ack_wait: float = Field(
        30.0, gt=0, description="Seconds a delivered, unacked message waits before redelivery."
    )
    max_ack_pending: int = Field(
        20_000, ge=1, description="Delivered but unacked messages the consumer allows."
    )
    publish_timeout: float = Field(
        10.0, gt=0, description="Seconds a publish waits for the stream's acknowledgement."
    )


SYSTEM = BrokerSystem(
    name="nats",
    title="NATS JetStream",
    params_model=NatsParams,
    connect=adapter.connect,
    adapters=(adapter.NatsAdapter,),  # an asyncio client: workers run as tasks
    prepare=adapter.prepare,
    describe=adapter.describe,
    durability=durability.durability,
    reference_topology=Topology(
        roles={"server": 3},
        replication="stream replicas 3 (Raft); a PubAck means stored by a majority",
    ),
    local=NatsLocal(),
    cloud=NatsCloud(),
    caveats=(
        "NATS 2.9 acknowledges a message once a majority of the stream's replicas have "
        "written it, but fsyncs its files only periodically (every 2 min by default): "
        "a simultaneous crash of a majority can lose acknowledged messages.",
    ),
    client_package="nats-py",
)
