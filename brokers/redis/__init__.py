"""Redis Streams (docs/measurement.md §6): XADD / XREADGROUP / XACK in a consumer group, XAUTOCLAIM of
messages stuck with a dead consumer; master + 2 replicas (asynchronous replication)."""

from __future__ import annotations

from brokers.base import BrokerSystem, KeySupport, Topology
from brokers.redis import adapter, durability
from brokers.redis.cloud import RedisCloud
from brokers.redis.local import RedisLocal
from brokers.redis.params import RedisParams

SYSTEM = BrokerSystem(
    name="redis",
    title="Redis Streams",
    params_model=RedisParams,
    connect=adapter.connect,
    # Against one master batches may be in flight; Redis Cluster confirms one at a time.
    adapters=(adapter.RedisAdapter, adapter.RedisClusterAdapter),
    prepare=adapter.prepare,
    describe=adapter.describe,
    durability=durability.durability,
    reference_topology=Topology(
        roles={"master": 1, "replica": 2},
        replication="asynchronous replication to 2 replicas; AOF fsync every second",
    ),
    local=RedisLocal(),
    caveats=(
        "Redis replication is asynchronous: a confirmed XADD can be lost on fail-over "
        "unless wait_replicas is set (WAIT).",
    ),
    cloud=RedisCloud(),
    client_package="redis",
    receive_batch=500,  # one XREADGROUP of every key
    # A message key picks the stream (of ``streams``); a consumer reads a stream in order.
    keys=KeySupport("stream by key", ordered=True),
)
