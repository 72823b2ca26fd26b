"""The ``[broker.params]`` of RabbitMQ:
``SYSTEM.params_model``, which its adapter and recipes take."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from brokers.connection import BrokerParams, seconds


class RabbitMQParams(BrokerParams):
    queue_type: Literal["quorum", "classic"] = Field(
        "quorum",
        description="quorum: Raft-replicated over the cluster (safe); "
        "classic: one node only, not replicated.",
    )
    quorum_size: int | None = Field(
        None, ge=1, le=16, description="Initial quorum queue members; unset = every cluster node."
    )
    persistent: bool = Field(True, description="Publish with delivery_mode 2 (persistent).")
    prefetch: int = Field(100, ge=1, le=65535, description="Consumer prefetch (basic.qos).")
    confirm_timeout: float = seconds(30.0, "Seconds a batch may wait for its publisher confirms.")
    heartbeat: int = Field(60, ge=0, le=3600, description="AMQP heartbeat in seconds (0 = off).")
