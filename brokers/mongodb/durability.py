"""What a confirmed MongoDB send survives, from the server and write concern ``describe`` read back.

Every write carries the scenario's write concern: ``w`` members (``"majority"``: a majority
of the voting members) must have applied it, and with ``j=true`` each of them has written
it to its on-disk journal (fsynced) before the acknowledgement. Locally FerretDB on one
PostgreSQL server stands in for MongoDB: it accepts the write concern without enforcing it
and answers once PostgreSQL has committed — PostgreSQL's settings are not read back, so
the line does not claim the flush there.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from brokers.durability import LOST_ON_CRASH, LOST_ON_FAILOVER, Durability, not_replicated

if TYPE_CHECKING:
    from brokers.mongodb.params import MongoParams

#: How ``describe`` states the majority in force, e.g. "w=majority (2 of 3), j=true, …".
MAJORITY = re.compile(r"majority \((\d+) of (\d+)\)")


def stand_in(w: object) -> Durability:
    return Durability(
        replicated=False,
        replication=f"{not_replicated()} (FerretDB on PostgreSQL stands in; w={w} not enforced)",
        fsync_per_message=False,
        fsync="fsync: not read back (FerretDB's PostgreSQL backend)",
        confirmed="committed by FerretDB's PostgreSQL backend",
    )


def durability(described: Mapping[str, Any], params: MongoParams) -> Durability:
    requested = described.get("write_concern_requested") or {}
    w = requested.get("w", params.w)
    journal = bool(requested.get("j", params.journal))
    in_force = str(described.get("write_concern_in_force") or "")
    if in_force.startswith("not enforced") or str(described.get("version")).startswith("FerretDB"):
        return stand_in(w)
    members = [
        m
        for m in described.get("members") or []
        if not (isinstance(m, Mapping) and m.get("state") == "ARBITER")
    ]
    n = (len(members) or 1) if described.get("replica_set") else 1
    found = MAJORITY.search(in_force)
    majority, voting = (int(found[1]), int(found[2])) if found else (n // 2 + 1, n)
    acked = majority if w == "majority" else int(w)
    how = "journaled" if journal else "applied"
    if n <= 1:
        replication, confirmed = not_replicated(), f"{how} by the server"
    elif acked <= 1:
        replication = f"replicated asynchronously to {n - 1} secondaries (w=1): {LOST_ON_FAILOVER}"
        confirmed = f"{how} by the primary"
    elif w == "majority":
        replication = (
            f"replicated to {n} members, confirmed once a majority ({majority} of {voting} "
            "voting) have it (w=majority)"
        )
        confirmed = f"{how} by a majority ({majority}) of the members"
    else:
        replication = f"replicated to {n} members, confirmed once {acked} have it (w={w})"
        confirmed = f"{how} by {acked} members"
    if journal:
        fsync = "journal fsynced before the acknowledgement (j=true)"
    else:
        lost = (
            LOST_ON_CRASH
            if acked <= 1
            else "a confirmed message can be lost if the acknowledging members crash together"
        )
        fsync = f"journal not awaited (j=false): {lost}"
    return Durability(
        replicated=n > 1,
        replication=replication,
        fsync_per_message=journal,
        fsync=fsync,
        confirmed=confirmed,
    )
