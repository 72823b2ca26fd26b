"""RabbitMQ (docs/measurement.md §6): a quorum queue (Raft-replicated), persistent messages, publisher
confirms per batch, consumer prefetch and manual acks; a 3-node cluster."""

from __future__ import annotations

from brokers.base import BrokerSystem, Topology
from brokers.rabbitmq import adapter, durability
from brokers.rabbitmq.cloud import RabbitMQCloud
from brokers.rabbitmq.local import RabbitMQLocal
from brokers.rabbitmq.params import RabbitMQParams

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
