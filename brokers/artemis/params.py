"""The ``[broker.params]`` of ActiveMQ Artemis:
``SYSTEM.params_model``, which its adapter and recipes take."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from brokers.connection import BrokerParams, Heap, seconds


class ArtemisParams(BrokerParams):
    """``[broker.params]`` for Artemis; the defaults are the safe configuration."""

    consumer_window_size: int = Field(
        10240,
        ge=-1,
        le=2**31 - 1,
        description="STOMP consumer credit in bytes: messages pushed ahead of receive (-1 = unbounded).",
    )
    send_timeout: float = seconds(30.0, "Seconds to wait for the receipts of one batch.")
    pairs: int = Field(
        1, ge=1, le=2, description="Local 'cluster' topology: number of live–backup pairs."
    )
    heap: Heap = Field("512m", description="Java heap (-Xmx) of each local broker.")
    journal_type: Literal["NIO", "ASYNCIO"] = Field(
        "NIO", description="Journal I/O (ASYNCIO needs libaio; NIO works everywhere)."
    )
