"""What a confirmed RabbitMQ publish survives, from the queue ``describe`` declared and read back.

A quorum queue confirms a publish once a majority of its members have written it to their
Raft log and fsynced it (quorum queues persist every message, whatever its delivery
mode). A classic queue lives on one node: it confirms a persistent message to a durable
queue once it is fsynced to that node's store (or already delivered and acknowledged), a
transient one once the queue has it in memory. The members of the queue are read with
``rabbitmqctl``, which reaches only locally started nodes; elsewhere they are not known.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from brokers.durability import LOST_ON_CRASH, Durability, not_replicated

if TYPE_CHECKING:
    from brokers.rabbitmq.params import RabbitMQParams

#: A quorum queue member counts towards the majority once it has fsynced the message.
FSYNC = "fsync by each member before it counts (quorum queue)"


def quorum(described: Mapping[str, Any]) -> Durability:
    members = described.get("queue_members")
    if not isinstance(members, list):
        return Durability(
            replicated=False,
            replication="quorum queue (Raft), members not read back (no rabbitmqctl access)",
            fsync_per_message=True,
            fsync=FSYNC,
            confirmed="fsynced by a majority of the queue's members",
        )
    n = len(members)
    majority = n // 2 + 1
    if n <= 1:
        replication = not_replicated() + " (a quorum queue of one member)"
        confirmed = "fsynced by the queue's only member"
    else:
        replication = f"replicated to {n} (quorum queue, Raft), confirmed once a majority ({majority}) have it"
        confirmed = f"fsynced by a majority ({majority} of {n}) of the queue's members"
    return Durability(
        replicated=n > 1,
        replication=replication,
        fsync_per_message=True,
        fsync=FSYNC,
        confirmed=confirmed,
    )


def classic(described: Mapping[str, Any], params: RabbitMQParams) -> Durability:
    nodes = described.get("cluster_nodes")
    replication = not_replicated()
    if isinstance(nodes, list) and len(nodes) > 1:
        replication = f"classic queue on one of {len(nodes)} nodes, not replicated"
    mode = (described.get("client_settings") or {}).get("delivery_mode")
    persistent = (mode or ("persistent" if params.persistent else "transient")) == "persistent"
    durable = described.get("queue_durable", True) is not False
    if persistent and durable:
        fsync, confirmed = "fsync before the confirm (persistent messages)", "fsynced by the node"
    else:
        fsync = f"not persisted (transient messages or queue): {LOST_ON_CRASH}"
        confirmed = "held in the node's memory"
    return Durability(
        replicated=False,
        replication=replication,
        fsync_per_message=persistent and durable,
        fsync=fsync,
        confirmed=confirmed,
    )


def durability(described: Mapping[str, Any], params: RabbitMQParams) -> Durability:
    # The queue was declared with x-queue-type: a declare of another type would have failed.
    queue_type = described.get("queue_type") or params.queue_type
    return quorum(described) if queue_type == "quorum" else classic(described, params)
