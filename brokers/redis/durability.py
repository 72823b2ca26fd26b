"""What a confirmed Redis send survives, from the settings ``describe`` read back.

An ``XADD`` is confirmed once the master has executed it: in its memory, appended to its
AOF (``appendonly``), fsynced before the reply only with ``appendfsync always``.
Replication is asynchronous; ``wait_replicas`` makes each batch wait (``WAIT``) until that
many replicas have received it — received, not fsynced.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from brokers.durability import LOST_ON_CRASH, LOST_ON_FAILOVER, Durability, not_replicated

if TYPE_CHECKING:
    from brokers.redis.params import RedisParams

#: The fsync words of each ``appendfsync`` policy (with ``appendonly yes``).
FSYNC = {
    "always": "fsync per write (appendfsync always)",
    "everysec": f"fsync every second (appendfsync everysec): {LOST_ON_CRASH}",
    "no": f"fsync left to the OS (appendfsync no): {LOST_ON_CRASH}",
}


def durability(described: Mapping[str, Any], params: RedisParams) -> Durability:
    settings = described.get("settings") or {}
    aof = str(settings.get("appendonly") or "no") == "yes"
    policy = str(settings.get("appendfsync") or "")
    replicas = int(described.get("connected_replicas") or 0)
    shards = described.get("cluster_shards")
    waits = min(params.wait_replicas, replicas)
    if not replicas:
        replication = not_replicated(int(shards or 1))
        if shards:
            replication = f"{shards} shards, not replicated"
    elif params.wait_replicas:
        replication = (
            f"replicated to {replicas} replicas, each batch WAITs for {params.wait_replicas}"
        )
    else:
        replication = f"replicated asynchronously to {replicas} replicas: {LOST_ON_FAILOVER}"
    if not aof:
        fsync = f"no AOF (appendonly no): {LOST_ON_CRASH}"
    else:
        fsync = FSYNC.get(policy, f"appendfsync {policy or '?'}")
    if aof and policy == "always":
        confirmed = "appended to the master's AOF and fsynced"
    else:
        confirmed = "executed by the master, in memory" + (" (AOF not yet fsynced)" if aof else "")
    if waits:
        confirmed += f" and received by {waits} replica{'s' if waits > 1 else ''}"
    return Durability(
        replicated=bool(replicas),
        replication=replication,
        fsync_per_message=aof and policy == "always",
        fsync=fsync,
        confirmed=confirmed,
    )
