"""The ``[broker.params]`` of PostgreSQL:
``SYSTEM.params_model``, which its adapter and recipes take."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from brokers.connection import BrokerParams, seconds


class PostgresParams(BrokerParams):
    replication: Literal["synchronous", "asynchronous"] = Field(
        "synchronous",
        description="synchronous: commit waits for ANY 1 standby (remote_write); "
        "asynchronous: the primary alone (the reference study's async variant).",
    )
    asynchronous_commit: bool = Field(
        False,
        description="true: SET synchronous_commit = off on the workers' connections "
        "(PostgreSQL's asynchronous commit): a commit returns before its WAL is flushed, "
        "so a crash can lose the last confirmed messages.",
    )
    visibility_timeout: float = seconds(
        30.0, "Seconds a received message stays hidden before redelivery."
    )
    poll_interval: float = Field(
        0.05, ge=0.001, le=1, description="Seconds between polls when the table is empty."
    )
