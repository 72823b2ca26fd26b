"""MongoDB as a queue (docs/measurement.md §6): ``insert_many`` with write concern majority, receive by
``find_one_and_update`` on a next-delivery time, delete as ack; a 3-node replica set.

No ``mongod`` can be had on this machine: locally FerretDB v1 (a MongoDB wire-protocol
server over PostgreSQL) stands in for it, labelled as such; the real replica set runs on
AWS (``cloud``).
"""

from __future__ import annotations

from brokers.base import BrokerSystem, Topology
from brokers.mongodb import adapter, durability
from brokers.mongodb.cloud import MongoCloud
from brokers.mongodb.local import FerretDBLocal
from brokers.mongodb.params import MongoParams

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
    one_in_flight=(
        "pymongo's blocking client waits for each insert_many's write concern; its asyncio "
        "client is not used yet: more threads are more batches in flight"
    ),
)
