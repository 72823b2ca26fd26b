"""KMQ on Kafka (docs/measurement.md §6): individual message acknowledgements through start/end markers
on a second topic and a redelivery tracker, on the same KRaft clusters, topics settings
and client pieces as :mod:`brokers.kafka` (the queue's producer and consumer follow the
``client`` parameter; the redelivery tracker uses kafka-python).
"""

from __future__ import annotations

from typing import Any

from brokers.base import BrokerSystem, Destination, Endpoints, Topology
from brokers.kafka import DURABILITY_CAVEAT, PYTHON_CLIENT_CAVEAT, admin, client_of
from brokers.kafka import SYSTEM as KAFKA
from brokers.kmq import adapter, durability, markers
from brokers.kmq.params import KmqParams


def prepare(endpoints: Endpoints, params: KmqParams, destination: Destination) -> None:
    """The queue topic and its markers topic, with the same partitions and replication."""
    admin.prepare_topics(
        endpoints, params, [destination.name, markers.markers_topic(destination.name)]
    )


def describe(endpoints: Endpoints, params: KmqParams) -> dict[str, Any]:
    described = admin.describe(endpoints, params, probe=prepare)
    return {**described, "redelivery_timeout_s": params.redelivery_timeout}


SYSTEM = BrokerSystem(
    name="kmq",
    title="KMQ on Kafka",
    params_model=KmqParams,
    connect=adapter.connect,
    adapters=tuple(adapter.ADAPTERS.values()),
    prepare=prepare,
    describe=describe,
    durability=durability.durability,
    reference_topology=Topology(
        roles=dict(KAFKA.reference_topology.roles),
        replication=KAFKA.reference_topology.replication + "; markers topic replicated alike",
    ),
    local=KAFKA.local,
    cloud=KAFKA.cloud,
    caveats=(
        DURABILITY_CAVEAT,
        "Each receive waits for start markers (acks=all) before handing messages out; a "
        "message not acknowledged within redelivery_timeout (default 15 s) is sent again "
        "by the redelivery tracker of a receiver process, so redeliveries need a running "
        "receiver.",
        PYTHON_CLIENT_CAVEAT,
    ),
    client_package="confluent-kafka",
    client_for=client_of,
    # Kafka's record key; a message the tracker sends again is a second copy (a duplicate,
    # never counted as reordered).
    keys=KAFKA.keys,
)
