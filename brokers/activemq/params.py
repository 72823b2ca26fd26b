"""The ``[broker.params]`` of ActiveMQ Classic:
``SYSTEM.params_model``, which its adapter and recipes take."""

from __future__ import annotations

from pydantic import Field

from brokers.connection import BrokerParams, Heap, seconds


class ActiveMQParams(BrokerParams):
    """``[broker.params]`` for ActiveMQ Classic; the defaults are the safe configuration."""

    prefetch: int = Field(
        100, ge=1, le=65535, description="Messages the broker pushes ahead to a consumer (unacked)."
    )
    send_timeout: float = seconds(30.0, "Seconds to wait for the receipts of one batch.")
    heap: Heap = Field("512m", description="Java heap of the local broker.")
