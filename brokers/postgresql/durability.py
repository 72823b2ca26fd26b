"""What a confirmed PostgreSQL send survives, from the settings ``describe`` read back.

A send is one ``INSERT`` committed on the primary (autocommit). Whether the commit waits
for a standby is ``synchronous_commit`` (``replication = "asynchronous"`` sets it to
``local`` on the workers' connections, ``asynchronous_commit = true`` to ``off``: the WAL
is then not flushed before the commit returns) together with
``synchronous_standby_names``: with no standby named, or none streaming, the commit is the
primary's alone, whatever the scenario's ``replication`` asked for.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from brokers.durability import LOST_ON_CRASH, LOST_ON_FAILOVER, Durability, not_replicated

if TYPE_CHECKING:
    from brokers.postgresql.params import PostgresParams

#: What a commit waits for on a synchronous standby, by ``synchronous_commit``.
STANDBY_WAITS = {
    "remote_write": "written (not fsynced) by",
    "on": "flushed to disk by",
    "remote_apply": "applied by",
}


def durability(described: Mapping[str, Any], params: PostgresParams) -> Durability:
    settings = described.get("settings") or {}
    names = str(settings.get("synchronous_standby_names") or "").strip()
    fsync_on = str(settings.get("fsync") or "on") == "on"
    commit = (
        "off"
        if params.asynchronous_commit
        else "local"
        if params.replication == "asynchronous"
        else str(settings.get("synchronous_commit"))
    )
    standbys = [s for s in described.get("standbys") or [] if s.get("state") == "streaming"]
    waits_for_standby = bool(names) and bool(standbys) and commit in STANDBY_WAITS
    if not standbys:
        replication = not_replicated()
        if params.replication == "synchronous":
            why = "empty" if not names else f"{names!r}, but no standby streams"
            replication += f" (replication=synchronous, synchronous_standby_names {why})"
    elif waits_for_standby:
        replication = f"replicated synchronously ({names!r} of {len(standbys)} standbys streaming)"
    else:
        replication = f"replicated asynchronously to {len(standbys)} standbys: {LOST_ON_FAILOVER}"
    if not fsync_on:
        fsync = f"fsync off: {LOST_ON_CRASH}"
    elif commit == "off":
        fsync = (
            f"commit returns before its WAL is fsynced (synchronous_commit=off): {LOST_ON_CRASH}"
        )
    else:
        fsync = "fsync per commit"
    confirmed = "committed locally" if commit != "off" else "accepted by the primary"
    if waits_for_standby:
        confirmed += f" and {STANDBY_WAITS[commit]} a synchronous standby"
    return Durability(
        replicated=bool(standbys),
        replication=replication,
        fsync_per_message=fsync_on and commit != "off",
        fsync=fsync,
        confirmed=confirmed,
    )
