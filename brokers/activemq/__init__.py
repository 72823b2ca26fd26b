"""ActiveMQ Classic (5.x, the broker of the 2015 study): persistent messages over STOMP.

One broker from the Debian package ``activemq``, started by brokerbench with its own
configuration and data directory; client acknowledgements per message. There is no
replication in this setup (the report says so).
"""

from __future__ import annotations

from brokers.activemq import durability
from brokers.activemq.adapter import connect, describe, prepare
from brokers.activemq.cloud import ActiveMQCloud
from brokers.activemq.local import ActiveMQLocal
from brokers.activemq.params import ActiveMQParams
from brokers.base import BrokerSystem, Topology
from brokers.stomp import StompAdapter

SYSTEM: BrokerSystem[ActiveMQParams] = BrokerSystem(
    name="activemq",
    title="ActiveMQ Classic",
    params_model=ActiveMQParams,
    connect=connect,
    adapters=(StompAdapter,),
    prepare=prepare,
    describe=describe,
    durability=durability.durability,
    reference_topology=Topology(roles={"broker": 1}, replication="none"),
    local=ActiveMQLocal(),
    cloud=ActiveMQCloud(),
    caveats=(
        "No replication here: a single ActiveMQ Classic broker; a confirmed message is "
        "synced to its KahaDB journal on one machine only.",
    ),
    client_package="stomp.py",
    one_in_flight=(
        "the STOMP client waits for each batch's receipt before the next; receipts per frame "
        "could pipeline, not used yet"
    ),
)
