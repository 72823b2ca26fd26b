"""NATS JetStream (docs/measurement.md §6): a stream with 3 replicas and a durable pull consumer with
explicit acks; publishing waits for the stream's acknowledgement. A 3-server cluster."""

from __future__ import annotations

from brokers.base import BrokerSystem, KeySupport, Topology
from brokers.nats import adapter, admin, durability
from brokers.nats.cloud import NatsCloud
from brokers.nats.local import NatsLocal
from brokers.nats.params import NatsParams

SYSTEM = BrokerSystem(
    name="nats",
    title="NATS JetStream",
    params_model=NatsParams,
    connect=adapter.connect,
    adapters=(adapter.NatsAdapter,),  # an asyncio client: workers run as tasks
    prepare=admin.prepare,
    describe=admin.describe,
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
    # One stream, read in its order by one consumer: each receiver gets its share of one
    # subject's messages in the order they were stored.
    keys=KeySupport("subject suffix", ordered=True),
)
