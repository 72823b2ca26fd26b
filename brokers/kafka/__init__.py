"""Apache Kafka (docs/measurement.md §6): KRaft clusters from the official jars, topics with replication 3
and ``min.insync.replicas=2``, producers with ``acks=all``, consumer groups committing
offsets after processing. Its client pieces also serve KMQ and Redpanda. Workers use
confluent-kafka (librdkafka) by default, or kafka-python (``client`` parameter).
"""

from __future__ import annotations

from typing import Any

from brokers.base import BrokerSystem, Endpoints, KeySupport, Topology
from brokers.kafka import admin, durability
from brokers.kafka.adapter import KafkaPythonAdapter
from brokers.kafka.base import KafkaAdapterBase, connecting
from brokers.kafka.cloud import KafkaCloud
from brokers.kafka.confluent import ConfluentAdapter
from brokers.kafka.local import KafkaLocal
from brokers.kafka.params import KafkaClientParams, KafkaParams

DURABILITY_CAVEAT = (
    "A confirmed send is in the memory of at least min.insync.replicas brokers; Kafka "
    "leaves fsync to the OS unless log_flush_interval_messages is set (1 = every message)."
)
CLIENT_CAVEAT = (
    "Kafka has no per-message acknowledgement: offsets are committed every commit_interval "
    "(default 10 s) up to the lowest unacknowledged message, so a message that is not "
    "acknowledged comes back only when its partition moves to another receiver, and a "
    "receiver that dies causes up to commit_interval of redeliveries."
)
PYTHON_CLIENT_CAVEAT = (
    "Workers are Python: with confluent-kafka (the default) librdkafka does the protocol "
    "work in C, but each message still passes through the Python interpreter, so a worker "
    "sends fewer messages per second than Kafka's Java ProducerPerformance; with "
    "kafka-python (client = 'kafka-python', pure Python) a worker sends far fewer still. "
    "The run context names the client and its version."
)

#: A record key: a key's records go to one partition, read in order by one receiver.
KEYS = KeySupport("record key", ordered=True)

#: The adapter class of each ``client``.
ADAPTERS: dict[str, type[KafkaAdapterBase]] = {
    "confluent-kafka": ConfluentAdapter,
    "kafka-python": KafkaPythonAdapter,
}
connect = connecting(ADAPTERS)


def client_of(params: KafkaClientParams) -> str:
    """The distribution name of the client library workers use with ``params``."""
    return params.client


def describe(endpoints: Endpoints, params: KafkaParams) -> dict[str, Any]:
    return admin.describe(endpoints, params, probe=admin.prepare)


SYSTEM = BrokerSystem(
    name="kafka",
    title="Apache Kafka",
    params_model=KafkaParams,
    connect=connect,
    adapters=tuple(ADAPTERS.values()),
    prepare=admin.prepare,
    describe=describe,
    durability=durability.durability,
    reference_topology=Topology(
        roles={"broker": 3},
        replication="KRaft, 3 combined broker+controller nodes; replication factor 3, "
        "min.insync.replicas=2, acks=all",
    ),
    local=KafkaLocal(),
    cloud=KafkaCloud(),
    caveats=(DURABILITY_CAVEAT, CLIENT_CAVEAT, PYTHON_CLIENT_CAVEAT),
    client_package="confluent-kafka",
    client_for=client_of,
    acks_per_message=False,  # offsets committed every commit_interval
    receive_batch=500,  # one consume call returns what was fetched ahead
    keys=KEYS,
)
