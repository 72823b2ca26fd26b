"""What a confirmed JetStream publish survives, from the stream ``describe`` created and read back.

A PubAck comes once the stream's leader has the message and, with more than one replica,
once a majority of the replicas have stored it (Raft). Stored is written, not fsynced:
JetStream fsyncs its files every ``sync_interval`` (2 minutes by default) unless
``sync_always`` is set — server settings ``describe`` does not read back, so the line does
not claim either. A memory-storage stream holds its messages in memory only.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from brokers.durability import LOST_ON_CRASH, Durability, not_replicated

if TYPE_CHECKING:
    from brokers.nats.params import NatsParams


def durability(described: Mapping[str, Any], params: NatsParams) -> Durability:
    replicas = int(described.get("replicas") or 1)
    servers = int(described.get("cluster_size") or 1)
    majority = replicas // 2 + 1
    if replicas > 1:
        replication = (
            f"replicated to {replicas} (stream replicas, Raft), confirmed once a majority "
            f"({majority}) have it"
        )
        by = f"a majority ({majority} of {replicas}) of the stream's replicas"
    else:
        replication = not_replicated()
        if servers > 1:
            replication = f"stream on one of {servers} servers, not replicated (replicas=1)"
        by = "the stream's server"
    if described.get("storage") == "memory":
        fsync, confirmed = f"memory storage: {LOST_ON_CRASH}", f"held in memory by {by}"
    else:
        fsync = "fsync: not read back (JetStream sync_interval, 2 minutes by default)"
        confirmed = f"stored by {by}"
    return Durability(
        replicated=replicas > 1,
        replication=replication,
        fsync_per_message=False,
        fsync=fsync,
        confirmed=confirmed,
    )
