"""What a confirmed SQS send survives, from the service ``describe`` read back.

Amazon SQS is a managed service: AWS documents that it stores every message redundantly
across several availability zones; neither that nor its persistence can be configured or
read. Locally ElasticMQ stands in: one server, no replication, messages written to an H2
database when its storage is enabled — not read back, so the line does not claim it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from brokers.durability import Durability, not_replicated

if TYPE_CHECKING:
    from brokers.sqs.params import SqsParams

#: The version ``describe`` reports for the managed service (a stand-in names itself).
MANAGED = "Amazon SQS"


def durability(described: Mapping[str, Any], params: SqsParams) -> Durability:
    version = str(described.get("version") or "")
    if version.startswith(MANAGED):
        return Durability(
            replicated=True,
            replication="managed service, stored redundantly across availability zones "
            "(as AWS documents it; not readable)",
            fsync_per_message=False,
            fsync="fsync: not readable (managed service)",
            confirmed="accepted by SQS (SendMessageBatch succeeded)",
        )
    return Durability(
        replicated=False,
        replication=f"{not_replicated()}: {version or 'a local stand-in'}",
        fsync_per_message=False,
        fsync="fsync: not read back (the stand-in's message storage)",
        confirmed="accepted by the stand-in server",
    )
