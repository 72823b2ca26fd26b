"""Pulsar nodes on AWS (docs/measurement.md §6: 3 ZooKeeper + 3 bookies + 2 brokers), configured from
the same ``zookeeper``/``bookkeeper``/``broker`` templates as the local cluster; only
addresses, paths and sizes differ. Every process runs as a systemd unit that restarts
until the cluster metadata exists; the last ZooKeeper node initialises it.
"""

from __future__ import annotations

import shlex

from brokers.base import Endpoints
from brokers.cloud import CloudRecipe, machine_java_command
from brokers.pulsar.config import (
    MAIN,
    REPLICATED,
    BrokerConf,
    Sizes,
    ZooKeeperServer,
    jvm_options,
    metadata_setup_args,
    render_bookie,
    render_broker,
    render_unit,
    render_zookeeper,
    version,
)
from brokers.pulsar.params import PulsarParams

PULSAR_HOME = "/opt/pulsar"
CONF_DIR = "/etc/pulsar"
DATA_DIR = "/data"
CLUSTER_NAME = "brokerbench"
ZK_PORT = 2181
BOOKIE_PORT = 3181
BROKER_PORT = 6650
WEB_PORT = 8080
#: r5.2xlarge (8 vCPU, 64 GiB): large caches, Pulsar's per-core thread defaults.
AWS_SIZES = Sizes(
    zookeeper_heap="2g",
    bookie_heap="4g",
    bookie_direct="8g",
    broker_heap="8g",
    broker_direct="8g",
    write_cache_mb=1024,
    read_cache_mb=1024,
    rocksdb_block_cache_mb=512,
    journal_prealloc_mb=16,
    ledger_cache_mb=2048,
    bookie_threads=8,
    broker_threads=None,
    auto_recovery=True,
    shutdown_timeout_ms=60_000,
)
DOWNLOAD = (
    "https://repo1.maven.org/maven2/org/apache/pulsar/pulsar-server-distribution/"
    f"{version()}/pulsar-server-distribution-{version()}-bin.tar.gz"
)


def zookeeper_addresses(cluster: dict[str, list[str]]) -> list[str]:
    return [f"{host}:{ZK_PORT}" for host in cluster["zookeeper"]]


def java_line(role: str, heap: str, direct: str | None, args: list[str]) -> str:
    jvm = jvm_options(PULSAR_HOME, direct)
    return shlex.join(machine_java_command(MAIN[role], f"{PULSAR_HOME}/lib/*", heap, args, jvm))


class PulsarCloud(CloudRecipe[PulsarParams]):
    data_dir = DATA_DIR

    def install_commands(self) -> list[str]:
        return [
            "apt-get update -y",
            "DEBIAN_FRONTEND=noninteractive apt-get install -y openjdk-17-jre-headless curl",
            f"curl -fsSL --retry 5 -o /tmp/pulsar.tgz {DOWNLOAD}",
            f"mkdir -p {PULSAR_HOME} {CONF_DIR} {DATA_DIR}",
            f"tar -xzf /tmp/pulsar.tgz -C {PULSAR_HOME} --strip-components=1",
        ]

    def node_files(
        self, role: str, index: int, cluster: dict[str, list[str]], params: PulsarParams
    ) -> dict[str, str]:
        me = cluster[role][index]
        zookeeper = zookeeper_addresses(cluster)
        sizes = AWS_SIZES
        if role == "zookeeper":
            servers = [ZooKeeperServer(i + 1, host) for i, host in enumerate(cluster["zookeeper"])]
            conf = f"{CONF_DIR}/zookeeper.conf"
            return {
                conf: render_zookeeper(f"{DATA_DIR}/zookeeper", ZK_PORT, me, servers),
                f"{DATA_DIR}/zookeeper/myid": f"{index + 1}\n",
                self._unit_path(role): render_unit(
                    role, PULSAR_HOME, java_line(role, sizes.zookeeper_heap, None, [conf])
                ),
            }
        if role == "bookie":
            conf = f"{CONF_DIR}/bookkeeper.conf"
            line = java_line(role, sizes.bookie_heap, sizes.bookie_direct, ["--conf", conf])
            return {
                conf: render_bookie(
                    index + 1, BOOKIE_PORT, me, zookeeper, f"{DATA_DIR}/bookkeeper", sizes
                ),
                self._unit_path(role): render_unit(role, PULSAR_HOME, line),
            }
        if role == "broker":
            quorum = params.quorum if isinstance(params, PulsarParams) else None
            conf = f"{CONF_DIR}/broker.conf"
            line = java_line(role, sizes.broker_heap, sizes.broker_direct, ["--broker-conf", conf])
            return {
                conf: render_broker(
                    BrokerConf(
                        cluster_name=CLUSTER_NAME,
                        metadata_store="zk:" + ",".join(zookeeper),
                        broker_port=BROKER_PORT,
                        web_port=WEB_PORT,
                        bind="0.0.0.0",
                        advertised=me,
                        quorum=quorum or REPLICATED,
                        load_balancer=True,
                        sizes=sizes,
                    )
                ),
                self._unit_path(role): render_unit(role, PULSAR_HOME, line),
            }
        raise ValueError(f"Pulsar has no role {role!r} (zookeeper, bookie, broker)")

    @staticmethod
    def _unit_path(role: str) -> str:
        return f"/etc/systemd/system/pulsar-{role}.service"

    def start_commands(self, role: str, index: int, cluster: dict[str, list[str]]) -> list[str]:
        commands = ["systemctl daemon-reload", f"systemctl enable --now pulsar-{role}"]
        if role == "zookeeper" and index == len(cluster["zookeeper"]) - 1:
            brokers = cluster["broker"]
            setup = java_line(
                "init",
                "1g",
                None,
                metadata_setup_args(
                    CLUSTER_NAME,
                    zookeeper_addresses(cluster),
                    "http://" + ",".join(f"{b}:{WEB_PORT}" for b in brokers),
                    "pulsar://" + ",".join(f"{b}:{BROKER_PORT}" for b in brokers),
                ),
            )
            commands.append(f"until {setup}; do sleep 5; done")
        return commands

    def ports(self) -> list[int]:
        return [ZK_PORT, 2888, 3888, BOOKIE_PORT, BROKER_PORT, WEB_PORT]

    def endpoints(self, cluster: dict[str, list[str]]) -> Endpoints:
        brokers = cluster["broker"]
        return Endpoints(
            hosts=tuple(f"{b}:{BROKER_PORT}" for b in brokers),
            extra=(("admin", f"http://{brokers[0]}:{WEB_PORT}"), ("pulsar_version", version())),
        )
