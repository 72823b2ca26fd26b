"""What a confirmed ActiveMQ Classic send survives, from what ``describe`` read back.

A persistent SEND with a receipt is a synchronous send: the broker answers once the
message is in its KahaDB store, synced before the answer if the store's
``journalDiskSyncStrategy`` is ``always`` (ActiveMQ's default; brokerbench's configuration
sets it). The statistics plugin ``describe`` reads does not report the strategy, so the
line does not claim the sync. There is no replication in this set-up.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from brokers.durability import Durability, not_replicated

if TYPE_CHECKING:
    from brokers.activemq.params import ActiveMQParams


def durability(described: Mapping[str, Any], params: ActiveMQParams) -> Durability:
    replicated = bool(described.get("replicated"))
    return Durability(
        replicated=replicated,
        replication=str(described.get("replication")) if replicated else not_replicated(),
        fsync_per_message=False,
        fsync="fsync: not read back (KahaDB journalDiskSyncStrategy)",
        confirmed="stored by the broker (KahaDB; receipt of a persistent SEND)",
    )
