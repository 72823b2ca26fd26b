"""What a confirmed EventStoreDB append survives, from the cluster members ``describe`` read back.

An append is confirmed once a quorum of the cluster's database nodes (a majority of the
cluster size) have written it; read-only replicas do not count. Each node flushes its
writes to disk before they count unless ``UnsafeDisableFlushToDisk`` is set — a node
setting ``describe`` does not read back, so the line does not claim the flush.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from brokers.durability import Durability, not_replicated

if TYPE_CHECKING:
    from brokers.eventstore.params import EventStoreParams

#: The gossip state (kurrentdbclient's) of a read-only replica, which is not in the quorum.
READ_ONLY_REPLICA = "NODE_STATE_REPLICA"


def durability(described: Mapping[str, Any], params: EventStoreParams) -> Durability:
    members = [m for m in described.get("members") or [] if m.get("state") != READ_ONLY_REPLICA]
    nodes = len(members)
    quorum = nodes // 2 + 1
    if nodes > 1:
        replication = f"replicated to {nodes} nodes, confirmed once a quorum ({quorum}) have it"
        confirmed = f"written by a quorum ({quorum} of {nodes}) of the nodes"
    else:
        replication, confirmed = not_replicated(), "written by the node"
    return Durability(
        replicated=nodes > 1,
        replication=replication,
        fsync_per_message=False,
        fsync="fsync: not read back (UnsafeDisableFlushToDisk; flushed before it counts by default)",
        confirmed=confirmed,
    )
