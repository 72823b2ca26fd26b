"""Redpanda (docs/measurement.md §6): Kafka-protocol brokers on Raft, served by the Kafka adapters, with
the same topic and producer settings; run on AWS only (no local server here).
"""

from __future__ import annotations

from typing import Any

from brokers.base import BrokerSystem, Destination, Endpoints, Topology
from brokers.kafka import ADAPTERS, CLIENT_CAVEAT, KEYS, PYTHON_CLIENT_CAVEAT, admin, client_of
from brokers.kafka import connect as kafka_connect
from brokers.redpanda import cloud, durability
from brokers.redpanda.params import RedpandaParams
from brokers.redpanda.version import broker_versions

#: Every acknowledged batch is fsynced: no write caching on the topic.
TOPIC_CONFIGS = {"write.caching": "false"}


def prepare(endpoints: Endpoints, params: RedpandaParams, destination: Destination) -> None:
    admin.create_topics(endpoints, params, [destination.name], TOPIC_CONFIGS)


def describe(endpoints: Endpoints, params: RedpandaParams) -> dict[str, Any]:
    described = admin.describe(endpoints, params, probe=prepare)
    versions = broker_versions(endpoints, params.admin_port)
    described["kafka_api_version"] = described.pop("version")
    described.pop("version_source", None)
    described["version"] = ", ".join(sorted(set(versions.values()))) or "unknown"
    described["broker_versions"] = versions
    return described


SYSTEM = BrokerSystem(
    name="redpanda",
    title="Redpanda",
    params_model=RedpandaParams,
    connect=kafka_connect,
    adapters=tuple(ADAPTERS.values()),
    prepare=prepare,
    describe=describe,
    durability=durability.durability,
    reference_topology=Topology(
        roles={"broker": 3},
        replication="Raft, 3 replicas (acks=all waits for a majority); every batch fsynced",
    ),
    local=None,
    cloud=cloud.RedpandaCloud(),
    caveats=(
        "Verified on AWS only: no Redpanda server can be started on this machine.",
        "Redpanda fsyncs every acknowledged batch (write.caching=false) and replicates with "
        "Raft: acks=all waits for a majority of the 3 replicas.",
        CLIENT_CAVEAT,
        PYTHON_CLIENT_CAVEAT,
    ),
    client_package="confluent-kafka",
    client_for=client_of,
    acks_per_message=False,  # the Kafka adapters: offsets committed
    receive_batch=500,  # one consume call returns what was fetched ahead
    keys=KEYS,  # the Kafka adapters: a record key, one partition per key
)
