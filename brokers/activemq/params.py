"""The ``[broker.params]`` of ActiveMQ Classic:
``SYSTEM.params_model``, which its adapter and recipes take."""

from __future__ import annotations

from pydantic import Field

from brokers.connection import BrokerParams


class ActiveMQParams(BrokerParams):
    """``[broker.params]`` for ActiveMQ Classic; the defaults are the safe configuration."""

    prefetch: int = Field(
        100, ge=1, description="Messages the broker pushes ahead to a consumer (unacked)."
    )
    send_timeout: float = Field(
        30.0, gt=0, description="Seconds to wait for the receipts of one batch."
    )
    heap: str = Field("512m", pattern=r"^\d+[mg]$", description="Java heap of the local broker.")
