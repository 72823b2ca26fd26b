"""Redis Streams (docs/measurement.md §6): XADD / XREADGROUP / XACK in a consumer group, XAUTOCLAIM of
messages stuck with a dead consumer; master + 2 replicas (asynchronous replication)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from brokers.base import BrokerParams, BrokerSystem, Topology
from brokers.redis import adapter, durability
from brokers.redis.cloud import RedisCloud
from brokers.redis.local import RedisLocal


class RedisParams(BrokerParams):
    streams: int = Field(1, ge=1, le=10_000, description="Stream keys messages are spread over.")
    wait_replicas: int = Field(
        0, ge=0, description="WAIT for this many replicas after each batch (0 = do not wait)."
    )
    wait_timeout_ms: int = Field(1000, ge=0, description="Timeout of WAIT; fewer acks = failure.")
    claim_after: float = Field(
        30.0, gt=0, description="Seconds a delivered, unacked message waits before XAUTOCLAIM."
    )
    appendfsync: Literal["always", "everysec", "no"] = Field(
        "everysec", description="AOF fsync policy of locally started servers."
    )


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
)
