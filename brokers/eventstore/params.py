"""The ``[broker.params]`` of EventStoreDB:
``SYSTEM.params_model``, which its adapter and recipes take."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from brokers.connection import BrokerParams, seconds


class EventStoreParams(BrokerParams):
    group: str = Field(
        "brokerbench", pattern=r"^[A-Za-z0-9_.-]{1,100}$", description="Consumer group name."
    )
    consumer_strategy: Literal["RoundRobin", "DispatchToSingle", "Pinned"] = Field(
        "RoundRobin", description="How the group spreads events over its consumers."
    )
    message_timeout: float = seconds(
        30.0, "Seconds before an unacknowledged event is delivered again."
    )
    max_retry_count: int = Field(
        1000,
        ge=0,
        le=1_000_000,
        description="Deliveries before an event is parked (parked events would count as lost).",
    )
    max_subscriber_count: int = Field(
        0, ge=0, le=10_000, description="Consumers the group accepts (0 = unbounded)."
    )
    # Buffers larger than the client's defaults (500 / 200 / 500 / 150) so that a busy
    # group does not starve its consumers between reads.
    live_buffer_size: int = Field(
        5000, ge=1, le=1_000_000, description="Server: live events buffered."
    )
    read_batch_size: int = Field(
        500, ge=1, le=100_000, description="Server: events read per batch."
    )
    history_buffer_size: int = Field(
        5000, ge=1, le=1_000_000, description="Server: history events buffered."
    )
    checkpoint_after: float = seconds(2.0, "Seconds between the group's checkpoints.")
    event_buffer_size: int = Field(
        1000,
        ge=1,
        le=1_000_000,
        description="Client: unacknowledged events in flight per consumer.",
    )
    max_ack_batch_size: int = Field(100, ge=1, le=10_000, description="Client: acks sent together.")
    max_ack_delay: float = Field(
        0.1, ge=0.001, le=1, description="Client: seconds an ack may wait to join a batch."
    )
    receive_wait: float = Field(
        1.0, ge=0.01, le=1, description="Seconds a receive waits for the first event."
    )
    append_timeout: float = seconds(10.0, "Seconds an append may take before it fails.")
