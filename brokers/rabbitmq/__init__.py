"""RabbitMQ (docs/measurement.md §6): a quorum queue (Raft-replicated), persistent messages, publisher
confirms per batch, consumer prefetch and manual acks; a 3-node cluster."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from brokers.base import BrokerParams, BrokerSystem, Topology
from brokers.rabbitmq import adapter, durability
from brokers.rabbitmq.cloud import RabbitMQCloud
from brokers.rabbitmq.local import RabbitMQLocal


class RabbitMQParams(BrokerParams):
    queue_type: Literal["quorum", "classic"] = Field(
        "quorum",
        description="quorum: Raft-replicated over the cluster (safe); "
        "classic: one node only, not replicated.",
    )
    quorum_size: int | None = Field(
        None, ge=1, description="Initial quorum queue members; unset = every cluster node."
    )
    persistent: bool = Field(True, description="Publish with delivery_mode 2 (persistent).")
    prefetch: int = Field(100, ge=1, le=65535, description="Consumer prefetch (basic.qos).")
    confirm_timeout: float = Field(
        30.0, gt=0, description="Seconds a batch may wait for its publisher confirms."
    )
    heartbeat: int = Field(60, ge=0, description="AMQP heartbeat in seconds (0 = off).")


SYSTEM = BrokerSystem(
    name="rabbitmq",
    title="RabbitMQ",
    params_model=RabbitMQParams,
    connect=adapter.connect,
    adapters=(adapter.RabbitMQAdapter,),
    prepare=adapter.prepare,
    describe=adapter.describe,
    durability=durability.durability,
    reference_topology=Topology(
        roles={"broker": 3},
        replication="quorum queue (Raft) on 3 nodes; publisher confirms after majority commit",
    ),
    local=RabbitMQLocal(),
    cloud=RabbitMQCloud(),
    caveats=(
        "Unacknowledged messages come back only when the consumer's channel closes "
        "(RabbitMQ has no per-message redelivery timeout).",
    ),
    client_package="pika",
)
