"""EventStoreDB / KurrentDB (docs/measurement.md §6): every batch appended to the sweep point's stream,
read through a persistent subscription (consumer group) with manual acks; a 3-node cluster
with quorum writes.

No EventStoreDB server can be had on this machine, so there is no local deployment: the
system runs on AWS only (``cloud``), and ``brokerbench brokers`` says so.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from brokers.base import BrokerParams, BrokerSystem, Topology
from brokers.eventstore import adapter, durability
from brokers.eventstore.cloud import EventStoreCloud


class EventStoreParams(BrokerParams):
    group: str = Field("brokerbench", min_length=1, description="Consumer group name.")
    consumer_strategy: Literal["RoundRobin", "DispatchToSingle", "Pinned"] = Field(
        "RoundRobin", description="How the group spreads events over its consumers."
    )
    message_timeout: float = Field(
        30.0, gt=0, description="Seconds before an unacknowledged event is delivered again."
    )
    max_retry_count: int = Field(
        1000,
        ge=0,
        description="Deliveries before an event is parked (parked events would count as lost).",
    )
    max_subscriber_count: int = Field(
        0, ge=0, description="Consumers the group accepts (0 = unbounded)."
    )
    # Buffers larger than the client's defaults (500 / 200 / 500 / 150) so that a busy
    # group does not starve its consumers between reads.
    live_buffer_size: int = Field(5000, ge=1, description="Server: live events buffered.")
    read_batch_size: int = Field(500, ge=1, description="Server: events read per batch.")
    history_buffer_size: int = Field(5000, ge=1, description="Server: history events buffered.")
    checkpoint_after: float = Field(
        2.0, gt=0, description="Seconds between the group's checkpoints."
    )
    event_buffer_size: int = Field(
        1000, ge=1, description="Client: unacknowledged events in flight per consumer."
    )
    max_ack_batch_size: int = Field(100, ge=1, description="Client: acks sent together.")
    max_ack_delay: float = Field(
        0.1, gt=0, le=1, description="Client: seconds an ack may wait to join a batch."
    )
    receive_wait: float = Field(
        1.0, gt=0, le=1, description="Seconds a receive waits for the first event."
    )
    append_timeout: float = Field(
        10.0, gt=0, description="Seconds an append may take before it fails."
    )


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
)
