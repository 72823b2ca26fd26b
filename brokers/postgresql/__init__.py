"""PostgreSQL as a queue (docs/measurement.md §6): a jobs table, ``FOR UPDATE SKIP LOCKED`` receives,
delete as ack; primary + 2 synchronous standbys (``ANY 1``, ``remote_write``)."""

from __future__ import annotations

from brokers.base import BrokerSystem, Topology
from brokers.postgresql import adapter, durability
from brokers.postgresql.cloud import PostgresCloud
from brokers.postgresql.local import PostgresLocal
from brokers.postgresql.params import PostgresParams

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
    one_in_flight=(
        "each send is one INSERT transaction on the worker's connection and waits for its "
        "commit; psycopg's pipeline mode could keep several awaiting their commits, not used "
        "yet: more threads are more transactions in flight"
    ),
)
