"""Apache Pulsar (docs/measurement.md §6): the official 3.x server distribution from Maven Central, ledgers
with ensemble 3 / write quorum 3 / ack quorum 2 on three bookies that fsync their journal
before acknowledging, a Shared subscription, optionally partitioned topics; pulsar-client.
"""

from __future__ import annotations

from brokers.base import BrokerSystem, KeySupport, Topology
from brokers.pulsar import adapter, admin, durability
from brokers.pulsar.cloud import PulsarCloud
from brokers.pulsar.local import PulsarLocal
from brokers.pulsar.params import PulsarParams

DURABILITY_CAVEAT = (
    "A confirmed send is in the fsynced journal of ack_quorum bookies (journalSyncData=true; "
    "Pulsar's own standalone configuration turns journal fsync off, brokerbench turns it on)."
)
LOCAL_CAVEAT = (
    "Locally the 'cluster' topology runs ZooKeeper, three bookies and one broker as separate "
    "processes on one host: the copies are real but share one disk and two cores; 'single' is "
    "the standalone with one bookie (quorum 1/1/1, no replication)."
)
BATCHING_CAVEAT = (
    "With batching (default) a send's messages travel as one BookKeeper entry; "
    "acknowledgements are per message (batch-index acks). Unacknowledged messages come back "
    "after ack_timeout (min. 10 s) or when their receiver disconnects; Pulsar counts only the "
    "former as redeliveries."
)

SYSTEM = BrokerSystem(
    name="pulsar",
    title="Apache Pulsar",
    params_model=PulsarParams,
    connect=adapter.connect,
    adapters=(adapter.PulsarAdapter,),
    prepare=admin.prepare,
    describe=admin.describe,
    durability=durability.durability,
    reference_topology=Topology(
        roles={"zookeeper": 3, "bookie": 3, "broker": 2},
        replication="ensemble 3, write quorum 3, ack quorum 2; bookie journal fsync before ack",
    ),
    local=PulsarLocal(),
    cloud=PulsarCloud(),
    caveats=(DURABILITY_CAVEAT, LOCAL_CAVEAT, BATCHING_CAVEAT),
    client_package="pulsar-client",
    # A shared subscription hands a key's messages to whichever consumer is free: no
    # per-key order is promised (a Key_Shared or failover subscription would).
    keys=KeySupport("message key", ordered=False),
)
