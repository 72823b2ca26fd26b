"""MongoDB as a queue (docs/measurement.md §6): ``insert_many`` with write concern majority, receive by
``find_one_and_update`` on a next-delivery time, delete as ack; a 3-node replica set.

No ``mongod`` can be had on this machine: locally FerretDB v1 (a MongoDB wire-protocol
server over PostgreSQL) stands in for it, labelled as such; the real replica set runs on
AWS (``cloud``).
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from brokers.base import BrokerParams, BrokerSystem, Topology
from brokers.mongodb import adapter, durability
from brokers.mongodb.cloud import MongoCloud
from brokers.mongodb.local import FerretDBLocal


class MongoParams(BrokerParams):
    w: Literal["majority"] | Annotated[int, Field(ge=1, le=50)] = Field(
        "majority",
        description='Write concern of sends, claims and acks: "majority" (safe: a majority '
        "of the replica set has the write) or 1 (the asynchronous variant: the primary alone).",
    )
    journal: bool = Field(True, description="j: acknowledge only once the write is journaled.")
    wtimeout_ms: int = Field(
        10_000, ge=0, description="wtimeout: a write not replicated within this fails (0 = wait)."
    )
    visibility_timeout: float = Field(
        30.0, gt=0, description="Seconds a received message stays hidden before redelivery."
    )
    poll_interval: float = Field(
        0.05, gt=0, le=1, description="Seconds to wait after a receive that found nothing."
    )


SYSTEM = BrokerSystem(
    name="mongodb",
    title="MongoDB",
    params_model=MongoParams,
    connect=adapter.connect,
    adapters=(adapter.MongoAdapter,),
    prepare=adapter.prepare,
    describe=adapter.describe,
    durability=durability.durability,
    reference_topology=Topology(
        roles={"mongod": 3},
        replication='replica set of 3, write concern w="majority" (2 of 3), journaled',
    ),
    local=FerretDBLocal(),
    cloud=MongoCloud(),
    caveats=(
        "Every receive is one find-and-modify per message (up to receive_batch round trips) "
        "and every claim is a replicated write.",
    ),
    client_package="pymongo",
)
