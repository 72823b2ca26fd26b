"""What a confirmed Redpanda send survives, from the topic ``describe`` read back.

Each partition is a Raft group of ``replication_factor`` replicas. With ``acks=all`` and
no write caching (topic ``write.caching`` false or disabled) a batch is confirmed once a
majority of the replicas have fsynced it; with write caching, once a majority hold it in
memory, fsynced later (``flush.ms`` / ``flush.bytes``). With ``acks=1`` the leader alone
confirms, before any fsync (Redpanda flushes such writes in the background). Redpanda
ignores ``min.insync.replicas``: the majority is Raft's.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from brokers.durability import LOST_ON_CRASH, LOST_ON_FAILOVER, Durability, not_replicated

if TYPE_CHECKING:
    from brokers.redpanda.params import RedpandaParams


#: A majority crashing at once loses what it had confirmed but not yet fsynced.
LOST_ON_MAJORITY_CRASH = "a confirmed message can be lost if a majority crash together"


def fsync_words(acks: str, caching: set[str], rf: int) -> tuple[bool | None, str]:
    """Whether a confirmed batch was fsynced first (None: not read back), and the words."""
    if acks != "all":
        return False, f"fsync in the background (acks={acks}): {LOST_ON_CRASH}"
    if not caching or "None" in caching:
        return None, "fsync: not read back (the topic's write.caching)"
    if caching <= {"false", "disabled"}:
        return True, "fsync per batch before it is confirmed (write.caching=false)"
    lost = LOST_ON_MAJORITY_CRASH if rf > 1 else LOST_ON_CRASH
    return False, f"fsync by flush.ms / flush.bytes (write.caching=true): {lost}"


def durability(described: Mapping[str, Any], params: RedpandaParams) -> Durability:
    topics = described.get("topics") or []
    factors = [int(t["replication_factor"]) for t in topics if t.get("replication_factor")]
    rf = min(factors, default=0)
    acks = str(described.get("producer_acks") or params.acks)
    majority = rf // 2 + 1
    if not rf:
        replication = "replication: not read back (no topic described)"
    elif rf == 1:
        replication = not_replicated(int(described.get("brokers") or 1))
    elif acks == "all":
        replication = f"replicated to {rf} (Raft), confirmed once a majority ({majority}) have it"
    else:
        replication = (
            f"replicated asynchronously to {rf} (acks={acks}: the leader alone confirms): "
            f"{LOST_ON_FAILOVER}"
        )
    caching = {str((t.get("configs") or {}).get("write.caching")) for t in topics}
    fsynced, fsync = fsync_words(acks, caching, rf)
    held = {True: "fsynced", False: "not yet fsynced", None: "fsync not read back"}[fsynced]
    if acks != "all" or rf == 1:
        confirmed = f"written by the leader, {held}"
    elif rf:
        confirmed = f"written by a majority ({majority} of {rf}) of the replicas, {held}"
    else:
        confirmed = f"written by a majority of the replicas, {held}"
    return Durability(
        replicated=rf > 1,
        replication=replication,
        fsync_per_message=bool(fsynced),
        fsync=fsync,
        confirmed=confirmed,
    )
