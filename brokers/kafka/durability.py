"""What a confirmed Kafka send survives, from the topics and brokers ``describe`` read back.

With ``acks=all`` the leader confirms a batch once every replica in the in-sync set has
appended it — at least ``min.insync.replicas`` of them, or the send fails; with
``acks=1`` once the leader alone has. "Appended" is to the log file, i.e. the page cache:
Kafka fsyncs only after ``flush.messages`` messages (``log.flush.interval.messages``,
default never) or ``log.flush.interval.ms`` (default never), leaving the rest to the OS.
With ``flush.messages=1`` every replica fsyncs each append before it counts, so the
confirmation follows the fsyncs. Replication is read from the topics prepared (their
lowest replication factor: KMQ's markers topic is prepared alike), the flush settings from
the topics' effective configs and the brokers'.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from brokers.durability import LOST_ON_CRASH, LOST_ON_FAILOVER, Durability, as_int, not_replicated

if TYPE_CHECKING:
    from brokers.kafka.params import KafkaParams

#: What the in-sync replicas had in their page cache only, when they all lose power.
LOST_ON_IN_SYNC_CRASH = "a confirmed message can be lost if the in-sync replicas crash together"
#: ``flush.messages`` / ``log.flush.interval.messages`` when unset: Long.MAX_VALUE (never).
NEVER = 2**63 - 1


def replication_words(
    described: Mapping[str, Any], acks: str
) -> tuple[int | None, int | None, str]:
    """The topics' lowest replication factor, ``min.insync.replicas`` (None where not read
    back) and the words for them."""
    topics = described.get("topics") or []
    factors = [as_int(t.get("replication_factor")) for t in topics]
    rf = min((f for f in factors if f is not None), default=None)
    settings = [as_int((t.get("configs") or {}).get("min.insync.replicas")) for t in topics]
    known = [m for m in settings if m is not None]
    min_insync = min(known) if known and len(known) == len(settings) else None
    if rf is None:
        return None, min_insync, "replication: not read back (no topic described)"
    if rf <= 1:
        return rf, min_insync, not_replicated(int(described.get("brokers") or 1))
    if acks != "all":
        words = f"replicated asynchronously to {rf} (acks={acks}: the leader alone confirms)"
        return rf, min_insync, f"{words}: {LOST_ON_FAILOVER}"
    if min_insync is None:
        return rf, None, f"replicated to {rf}, min.insync.replicas not read back"
    words = (
        f"replicated to {rf}, confirmed once all in-sync replicas (at least "
        f"min.insync.replicas={min_insync}) have it"
    )
    return rf, min_insync, words


def fsync_words(
    configs: list[Mapping[str, Any]], brokers: Mapping[str, Any], lost: str
) -> tuple[bool | None, str]:
    """Whether every replica fsyncs an append before it counts (None: not read back), and
    the words, from the topics' ``flush.messages`` and the brokers' ``log.flush.interval.ms``."""
    flushes = [as_int(c.get("flush.messages")) for c in configs]
    if not flushes or None in flushes:
        return None, "fsync: not read back (the topic's flush.messages)"
    if all(f == 1 for f in flushes):
        return True, "fsync per append on every replica (flush.messages=1)"
    every = sorted({f for f in flushes if f is not None and f != NEVER})
    ms = sorted(
        {
            str(b["log.flush.interval.ms"])
            for b in brokers.values()
            if b.get("log.flush.interval.ms")
        }
    )
    triggers = [f"every {', '.join(map(str, every))} messages (flush.messages)"] if every else []
    triggers += [f"every {', '.join(ms)} ms (log.flush.interval.ms)"] if ms else []
    if not triggers:
        return False, f"fsync left to the OS (log.flush.*): {lost}"
    return False, f"fsync {' or '.join(triggers)}, else left to the OS: {lost}"


def durability(described: Mapping[str, Any], params: KafkaParams) -> Durability:
    configs = [t.get("configs") or {} for t in described.get("topics") or []]
    acks = str(described.get("producer_acks") or params.acks)
    rf, min_insync, replication = replication_words(described, acks)
    if any(str(c.get("unclean.leader.election.enable")) == "true" for c in configs):
        replication += f"; unclean.leader.election.enable=true: {LOST_ON_FAILOVER}"
    all_in_sync = acks == "all" and rf is not None and rf > 1
    lost = LOST_ON_IN_SYNC_CRASH if all_in_sync else LOST_ON_CRASH
    fsynced, fsync = fsync_words(configs, described.get("broker_configs") or {}, lost)
    held = {True: "fsynced", False: "in the page cache", None: "fsync not read back"}[fsynced]
    if all_in_sync and min_insync is not None:
        confirmed = f"appended by every in-sync replica (at least {min_insync}), {held}"
    elif all_in_sync:
        confirmed = f"appended by every in-sync replica, {held}"
    else:
        confirmed = f"appended by the leader, {held}"
    return Durability(
        replicated=rf is not None and rf > 1,
        replication=replication,
        fsync_per_message=bool(fsynced),
        fsync=fsync,
        confirmed=confirmed,
    )
