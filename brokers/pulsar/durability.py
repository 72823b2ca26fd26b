"""What a confirmed Pulsar send survives, from the ledger quorum ``describe`` read back.

Each entry (a batch of messages) is written to ``write_quorum`` bookies of the ledger's
``ensemble_size``; the broker confirms once ``ack_quorum`` of them have acknowledged it.
A bookie acknowledges after its journal write, fsynced first only with
``journalSyncData=true`` (BookKeeper's default; Pulsar's standalone configuration turns it
off, brokerbench's templates turn it on) — a bookie setting the broker's admin API does
not report, so the line does not claim the fsync.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from brokers.durability import Durability, not_replicated

if TYPE_CHECKING:
    from brokers.pulsar.params import PulsarParams


def durability(described: Mapping[str, Any], params: PulsarParams) -> Durability:
    ensemble = described.get("ensemble_size")
    write = int(described.get("write_quorum") or 0)
    ack = int(described.get("ack_quorum") or 0)
    bookies = int(described.get("bookies") or 0)
    if not write or not ack:
        replication = "replication: not read back (no ledger quorum)"
        confirmed = "written to the journal of the ack quorum of bookies"
    elif write == 1:
        replication = not_replicated(bookies)
        if bookies > 1:
            replication = f"{bookies} bookies, not replicated (write quorum 1)"
        confirmed = "written to the journal of one bookie"
    else:
        replication = (
            f"replicated to {write} bookies (ensemble {ensemble}), confirmed once the ack "
            f"quorum of {ack} have it"
        )
        confirmed = f"written to the journal of {ack} bookie{'s' if ack > 1 else ''}"
    return Durability(
        replicated=write > 1,
        replication=replication,
        fsync_per_message=False,
        fsync="fsync: not read back (the bookies' journalSyncData)",
        confirmed=confirmed,
    )
