"""What a confirmed Artemis send survives, from the brokers' state ``describe`` read back.

A persistent SEND's receipt comes once the live broker has written the message to its
journal — synced first with ``journal-sync-non-transactional`` — and, in a replicated
pair, once its backup has received it (the backup's copy is not synced before that).
A live broker whose backup is not in sync (``ReplicaSync`` false) confirms alone. With
several live brokers each message lives on one pair. Without the management API
(``jolokia`` endpoints) none of this is read back.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from brokers.durability import LOST_ON_CRASH, Durability, not_replicated

if TYPE_CHECKING:
    from brokers.artemis.params import ArtemisParams


def durability(described: Mapping[str, Any], params: ArtemisParams) -> Durability:
    if not described.get("nodes"):
        return Durability(
            replicated=False,
            replication="replication: not read back (no management API)",
            fsync_per_message=False,
            fsync="fsync: not read back (no management API)",
            confirmed="receipt of a persistent SEND",
        )
    lives = int(described.get("live_brokers") or 0)
    backups = int(described.get("backup_brokers") or 0)
    replicated = bool(described.get("replicated"))
    if replicated and lives > 1:
        replication = f"{lives} live–backup pairs, each message on one: replicated synchronously to its backup"
    elif replicated:
        replication = "replicated synchronously to a backup (live–backup pair)"
    elif backups:
        replication = (
            f"{backups} backup{'s' if backups > 1 else ''}, but not every live broker is in "
            "sync with its backup (ReplicaSync false): a confirmed message may be on its live "
            "broker only"
        )
    else:
        replication = not_replicated(lives)
    persistent = bool(described.get("persistence_enabled"))
    synced = persistent and bool(described.get("journal_sync_non_transactional"))
    if synced:
        fsync = "journal synced before each receipt (journal-sync-non-transactional)"
    elif persistent:
        fsync = f"journal not synced before the receipt (journal-sync-non-transactional false): {LOST_ON_CRASH}"
    else:
        fsync = f"persistence disabled: {LOST_ON_CRASH}"
    broker = "the live broker" if backups else "the broker"
    confirmed = f"synced to {broker}'s journal" if synced else f"accepted by {broker}"
    if replicated:
        confirmed += " and received by its backup"
    return Durability(
        replicated=replicated,
        replication=replication,
        fsync_per_message=synced,
        fsync=fsync,
        confirmed=confirmed,
    )
