"""The ``[broker.params]`` of NATS JetStream:
``SYSTEM.params_model``, which its adapter and recipes take."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from brokers.connection import BrokerParams, seconds


class NatsParams(BrokerParams):
    replicas: int | None = Field(
        None,
        ge=1,
        le=5,
        description="Stream replicas; unset = 3, or 1 when the cluster has fewer servers.",
    )
    storage: Literal["file", "memory"] = Field("file", description="Stream storage.")
    ack_wait: float = seconds(30.0, "Seconds a delivered, unacked message waits before redelivery.")
    max_ack_pending: int = Field(
        20_000,
        ge=1,
        le=10_000_000,
        description="Delivered but unacked messages the consumer allows.",
    )
    publish_timeout: float = seconds(
        10.0, "Seconds a publish waits for the stream's acknowledgement."
    )
    max_age: float | None = Field(
        None,
        ge=1,
        le=365 * 86_400,
        description="Stream max_age, seconds: older messages are discarded, acknowledged "
        "or not (a soak run's retention). Unset: no limit.",
    )
    max_bytes: int | None = Field(
        None,
        ge=1 << 20,
        le=1 << 50,
        description="Stream max_bytes: the oldest messages are discarded beyond it. Unset: "
        "no limit.",
    )
