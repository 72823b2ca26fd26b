"""Kafka nodes on AWS: the pinned Apache release, configured from the same
``server.properties.j2`` and ``log4j.properties.j2`` as the local clusters; only the
addresses, paths, heap and thread counts differ.
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

from brokers import templating
from brokers.base import Destination, Endpoints
from brokers.cloud import CloudFaults, CloudRecipe
from brokers.kafka.local import (
    KAFKA_VERSION,
    ClusterSizes,
    NodeConfig,
    new_cluster_id,
    render_log4j,
    render_server_properties,
    voters,
)

if TYPE_CHECKING:
    from brokers.kafka.params import KafkaParams

KAFKA_HOME = "/opt/kafka"
CONF_DIR = "/etc/kafka"
#: The node's data volume; Kafka's log directory lies inside it.
VOLUME = "/var/lib/kafka"
DATA_DIR = f"{VOLUME}/data"
PORT = 9092
CONTROLLER_PORT = 9093
#: Heap of a broker on the reference instance (r5.2xlarge, 64 GiB: the rest is page cache).
HEAP = "6g"
ROLE = "broker"
#: The defaults of a Kafka distribution, for an 8-vCPU machine.
SIZES = ClusterSizes(
    network_threads=3,
    io_threads=8,
    replica_fetchers=2,
    segment_bytes=1024 * 1024 * 1024,
    offsets_partitions=50,
    rebalance_delay_ms=3000,
)
DOWNLOAD = f"https://archive.apache.org/dist/kafka/{KAFKA_VERSION}/kafka_2.13-{KAFKA_VERSION}.tgz"


def cluster_id(brokers: list[str]) -> str:
    """The same KRaft cluster id on every node, derived from the nodes' addresses."""
    return new_cluster_id(seed="brokerbench-kafka:" + ",".join(brokers))


def node_config(index: int, brokers: list[str]) -> NodeConfig:
    return NodeConfig(
        node_id=index + 1,
        bind="0.0.0.0",
        advertised_host=brokers[index],
        port=PORT,
        controller_port=CONTROLLER_PORT,
        log_dir=DATA_DIR,
    )


class KafkaCloud(CloudRecipe["KafkaParams"]):
    """One combined broker + controller per node of the ``broker`` role (node id = index + 1).

    For faults the leader is the broker leading partition 0 of the point's topic, as locally.
    """

    data_dir = VOLUME
    faults = CloudFaults("kafka.service", (ROLE,))

    def install_commands(self) -> list[str]:
        return [
            "apt-get update -y",
            "DEBIAN_FRONTEND=noninteractive apt-get install -y openjdk-17-jre-headless curl",
            f"curl -fsSL --retry 5 -o /tmp/kafka.tgz {DOWNLOAD}",
            f"mkdir -p {KAFKA_HOME} {CONF_DIR} {DATA_DIR}",
            f"tar -xzf /tmp/kafka.tgz -C {KAFKA_HOME} --strip-components=1",
            f"id kafka >/dev/null 2>&1 || useradd --system --home-dir {VOLUME} kafka",
            f"chown -R kafka:kafka {VOLUME}",
        ]

    def node_files(
        self, role: str, index: int, cluster: dict[str, list[str]], params: KafkaParams
    ) -> dict[str, str]:
        brokers = cluster[ROLE]
        nodes = [node_config(i, brokers) for i in range(len(brokers))]
        replication = min(3, len(brokers))
        return {
            f"{CONF_DIR}/server.properties": render_server_properties(
                nodes[index],
                voters(nodes),
                replication,
                1 if replication == 1 else 2,
                SIZES,
                getattr(params, "log_flush_interval_messages", None),
            ),
            f"{CONF_DIR}/log4j.properties": render_log4j(),
            "/etc/systemd/system/kafka.service": templating.render(
                __file__,
                "kafka.service.j2",
                kafka_version=KAFKA_VERSION,
                kafka_home=KAFKA_HOME,
                conf_dir=CONF_DIR,
                heap=HEAP,
            ),
        }

    def start_commands(self, role: str, index: int, cluster: dict[str, list[str]]) -> list[str]:
        fmt = (
            f"{KAFKA_HOME}/bin/kafka-storage.sh format --ignore-formatted"
            f" -t {cluster_id(cluster[ROLE])} -c {CONF_DIR}/server.properties"
        )
        return [
            f"su -s /bin/sh kafka -c {shlex.quote(fmt)}",
            "systemctl daemon-reload",
            "systemctl enable --now kafka",
        ]

    def ports(self) -> list[int]:
        return [PORT, CONTROLLER_PORT]

    def fault_leader(
        self, endpoints: Endpoints, params: KafkaParams, destination: Destination
    ) -> int:
        from brokers.kafka.admin import partition_leader

        # Node ids count from 1 on AWS as here; fault nodes count from 0.
        return partition_leader(endpoints, destination.name) - 1
