"""What a confirmed RocketMQ send survives, from the brokers' configs ``describe`` read back.

A master answers a send once its commit log has the message: fsynced first with
``SYNC_FLUSH``, flushed in the background with ``ASYNC_FLUSH``. Replication to the
master's slaves is asynchronous unless the master waits for them: in RocketMQ 5 a
``SYNC_MASTER`` waits only when ``inSyncReplicas`` (the master included) is 2 or more —
its default is 1, under which ``SYNC_MASTER`` answers as ``ASYNC_MASTER`` does. A slave
acknowledges what it has received, not fsynced. Where ``inSyncReplicas`` is not read back
the line does not claim that a send waits for a slave.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from brokers.durability import LOST_ON_CRASH, LOST_ON_FAILOVER, Durability, as_int, not_replicated

if TYPE_CHECKING:
    from brokers.rocketmq.params import RocketMQParams


def waits_for_slave(masters: list[Mapping[str, Any]]) -> bool | None:
    """Whether every master's send waits for a slave (None: not read back)."""
    if {str(m.get("brokerRole")) for m in masters} != {"SYNC_MASTER"}:
        return False
    in_sync = [as_int(m.get("inSyncReplicas")) for m in masters]
    if None in in_sync:
        return None
    return all(n is not None and n >= 2 for n in in_sync)


def replication_words(masters: list[Mapping[str, Any]], brokers: list[Mapping[str, Any]]) -> str:
    paired = {str(b.get("name")) for b in brokers if as_int(b.get("id")) != 0}
    alone = [m for m in masters if str(m.get("name")) not in paired]
    if len(alone) == len(masters):
        return not_replicated(len(masters))
    roles = ", ".join(sorted({str(m.get("brokerRole")) for m in masters}))
    each = f"each of {len(masters)} masters" if len(masters) > 1 else "the master"
    waits = waits_for_slave(masters)
    if waits:
        words = (
            f"replicated synchronously: {each} waits for its slave ({roles}, inSyncReplicas ≥ 2)"
        )
    elif waits is None:
        words = (
            f"{each} replicates to its slave; whether a send waits for it is not read back "
            f"({roles} waits only with inSyncReplicas ≥ 2, RocketMQ 5's default is 1): "
            f"{LOST_ON_FAILOVER}"
        )
    else:
        why = roles if roles != "SYNC_MASTER" else "SYNC_MASTER with inSyncReplicas=1"
        words = f"replicated asynchronously: {each} does not wait for its slave ({why}): {LOST_ON_FAILOVER}"
    if alone:
        words += f"; {len(alone)} of {len(masters)} masters have no slave"
    return words


def durability(described: Mapping[str, Any], params: RocketMQParams) -> Durability:
    brokers = described.get("brokers") or []
    masters = [b for b in brokers if as_int(b.get("id")) == 0]
    replication = replication_words(masters, brokers)
    paired = {str(b.get("name")) for b in brokers if as_int(b.get("id")) != 0}
    replicated = bool(masters) and all(str(m.get("name")) in paired for m in masters)
    flush = sorted({str(m.get("flushDiskType")) for m in masters})
    synced = flush == ["SYNC_FLUSH"]
    if synced:
        fsync, confirmed = "fsync per send on the master (SYNC_FLUSH)", "fsynced by the master"
    elif flush == ["ASYNC_FLUSH"]:
        fsync = f"fsync in the background (ASYNC_FLUSH): {LOST_ON_CRASH}"
        confirmed = "written by the master, not yet fsynced"
    else:
        fsync = f"fsync: flushDiskType {', '.join(flush) or 'not read back'}"
        confirmed = "written by the master"
    if replicated and waits_for_slave(masters):
        confirmed += " and received by its slave"
    return Durability(
        replicated=replicated,
        replication=replication,
        fsync_per_message=synced,
        fsync=fsync,
        confirmed=confirmed,
    )
