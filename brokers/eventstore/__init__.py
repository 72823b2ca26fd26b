"""EventStoreDB / KurrentDB (docs/measurement.md §6): every batch appended to the sweep point's stream,
read through a persistent subscription (consumer group) with manual acks; a 3-node cluster
with quorum writes.

No EventStoreDB server can be had on this machine, so there is no local deployment: the
system runs on AWS only (``cloud``), and ``brokerbench brokers`` says so.
"""

from __future__ import annotations

from brokers.base import BrokerSystem, Topology
from brokers.eventstore import adapter, durability
from brokers.eventstore.cloud import EventStoreCloud
from brokers.eventstore.params import EventStoreParams

SYSTEM = BrokerSystem(
    name="eventstore",
    title="EventStoreDB",
    params_model=EventStoreParams,
    connect=adapter.connect,
    adapters=(adapter.EventStoreAdapter,),
    prepare=adapter.prepare,
    describe=adapter.describe,
    durability=durability.durability,
    reference_topology=Topology(
        roles={"node": 3},
        replication="3-node cluster: an append is confirmed once a quorum (2 of 3) has "
        "written and flushed it",
    ),
    local=None,
    cloud=EventStoreCloud(),
    caveats=(
        "Runs on AWS only: no EventStoreDB/KurrentDB server can be installed on this machine.",
        "Events the group parks after max_retry_count deliveries are never received and "
        "count as lost.",
    ),
    client_package="kurrentdbclient",
    one_in_flight=(
        "each append_to_stream waits for its quorum write: more threads are more appends in flight"
    ),
)
