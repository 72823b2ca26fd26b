"""The ``[broker.params]`` of MongoDB (and FerretDB):
``SYSTEM.params_model``, which its adapter and recipes take."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from brokers.connection import BrokerParams, seconds


class MongoParams(BrokerParams):
    w: Literal["majority"] | Annotated[int, Field(ge=1, le=50)] = Field(
        "majority",
        description='Write concern of sends, claims and acks: "majority" (safe: a majority '
        "of the replica set has the write) or 1 (the asynchronous variant: the primary alone).",
    )
    journal: bool = Field(True, description="j: acknowledge only once the write is journaled.")
    wtimeout_ms: int = Field(
        10_000,
        ge=0,
        le=3_600_000,
        description="wtimeout: a write not replicated within this fails (0 = wait).",
    )
    visibility_timeout: float = seconds(
        30.0, "Seconds a received message stays hidden before redelivery."
    )
    poll_interval: float = Field(
        0.05, ge=0.001, le=1, description="Seconds to wait after a receive that found nothing."
    )
