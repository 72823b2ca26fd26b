"""PostgreSQL as a queue (docs/measurement.md §6): a jobs table, ``FOR UPDATE SKIP LOCKED`` receives,
delete as ack; primary + 2 synchronous standbys (``ANY 1``, ``remote_write``)."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from brokers.base import BrokerParams, BrokerSystem, Topology
from brokers.postgresql import adapter, durability
from brokers.postgresql.cloud import PostgresCloud
from brokers.postgresql.local import PostgresLocal


class PostgresParams(BrokerParams):
    replication: Literal["synchronous", "asynchronous"] = Field(
        "synchronous",
        description="synchronous: commit waits for ANY 1 standby (remote_write); "
        "asynchronous: the primary alone (the reference study's async variant).",
    )
    visibility_timeout: float = Field(
        30.0, gt=0, description="Seconds a received message stays hidden before redelivery."
    )
    poll_interval: float = Field(
        0.05, gt=0, le=1, description="Seconds between polls when the table is empty."
    )


SYSTEM = BrokerSystem(
    name="postgresql",
    title="PostgreSQL",
    params_model=PostgresParams,
    connect=adapter.connect,
    adapters=(adapter.PostgresAdapter,),
    prepare=adapter.prepare,
    describe=adapter.describe,
    durability=durability.durability,
    reference_topology=Topology(
        roles={"primary": 1, "standby": 2},
        replication="synchronous_standby_names = 'ANY 1 (s1, s2)', synchronous_commit = remote_write",
    ),
    local=PostgresLocal(),
    cloud=PostgresCloud(),
    client_package="psycopg",
    redelivery_after=lambda params: float(params.visibility_timeout),
)
