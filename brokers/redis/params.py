"""The ``[broker.params]`` of Redis Streams:
``SYSTEM.params_model``, which its adapter and recipes take."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from brokers.connection import BrokerParams, seconds


class RedisParams(BrokerParams):
    streams: int = Field(1, ge=1, le=10_000, description="Stream keys messages are spread over.")
    wait_replicas: int = Field(
        0,
        ge=0,
        le=16,
        description="WAIT for this many replicas after each batch (0 = do not wait).",
    )
    wait_timeout_ms: int = Field(
        1000, ge=0, le=3_600_000, description="Timeout of WAIT; fewer acks = failure."
    )
    claim_after: float = seconds(
        30.0, "Seconds a delivered, unacked message waits before XAUTOCLAIM."
    )
    appendfsync: Literal["always", "everysec", "no"] = Field(
        "everysec", description="AOF fsync policy of locally started servers."
    )
