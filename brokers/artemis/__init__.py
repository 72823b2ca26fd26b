"""ActiveMQ Artemis: persistent messages on a durable anycast queue, replicated live–backup pairs.

Clients speak STOMP with a receipt per message (see :mod:`brokers.artemis.adapter`).
Locally brokerbench runs the official binary distribution from Maven Central: one broker
(``single``) or live–backup replication pairs (``cluster``, ``pairs`` = 1 or 2) on
loopback. The reference topology on AWS is 3 live + 3 backup brokers.
"""

from __future__ import annotations

from brokers.artemis import durability
from brokers.artemis.adapter import connect, describe, prepare
from brokers.artemis.cloud import ArtemisCloud
from brokers.artemis.local import ArtemisLocal
from brokers.artemis.params import ArtemisParams
from brokers.base import BrokerSystem, Topology
from brokers.stomp import StompAdapter

SYSTEM: BrokerSystem[ArtemisParams] = BrokerSystem(
    name="artemis",
    title="ActiveMQ Artemis",
    params_model=ArtemisParams,
    connect=connect,
    adapters=(StompAdapter,),
    prepare=prepare,
    describe=describe,
    durability=durability.durability,
    reference_topology=Topology(
        roles={"live": 3, "backup": 3},
        replication="replication HA: each live broker synchronously replicates its journal "
        "to one backup (static cluster connectors)",
    ),
    local=ArtemisLocal(),
    cloud=ArtemisCloud(),
    caveats=(
        "A live broker acknowledges a send after its journal sync and its backup's "
        "confirmation; if the backup is down the live carries on unreplicated "
        "(describe() reports replica_sync).",
        "STOMP clients do not fail over transparently: a worker reconnects to the backup "
        "after its live broker fails, and unacknowledged messages are redelivered.",
        "With several live brokers, messages are spread by the cluster (ON_DEMAND load "
        "balancing, redistribution); each message still lives on one pair only.",
        "Redelivery counts are a lower bound: when a STOMP consumer closes, Artemis flags "
        "only the first of its unacknowledged messages as redelivered.",
    ),
    client_package="stomp.py",
    one_in_flight=(
        "the STOMP client waits for each batch's receipt before the next; receipts per frame "
        "could pipeline, not used yet"
    ),
)
