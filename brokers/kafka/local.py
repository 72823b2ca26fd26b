"""Kafka on this machine: a KRaft single node or three nodes (combined broker + controller)
on loopback, from the official jars on Maven Central, each with its own ports, log
directory and configuration rendered from ``templates/server.properties.j2``.
"""

from __future__ import annotations

import base64
import importlib.util
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from brokers import templating
from brokers.base import (
    Destination,
    Endpoints,
    FaultSupport,
    LocalDeployment,
    ParamProblem,
    more_than_nodes,
)
from brokers.errors import BrokerStartError
from brokers.jvm import cache_dir, java_command, jvm_missing, maven_fetch
from brokers.kafka.params import replication_for
from brokers.local import (
    Deadline,
    ManagedProcess,
    NodeHosts,
    ProcessCluster,
    free_ports,
    log_contains,
    port_open,
    run_checked,
    start_cluster,
    wait_until,
)

if TYPE_CHECKING:
    from brokers.kafka.params import KafkaParams

#: The pinned release; brokers/kafka/pom.xml lists the same version.
KAFKA_VERSION = "3.9.1"
POM = Path(__file__).resolve().parent / "pom.xml"
#: Heap of the short-lived storage-format JVM.
TOOL_HEAP = "256m"
READY_LINE = "Kafka Server started"
START_TIMEOUT = 180.0


@dataclass(frozen=True)
class NodeConfig:
    """What differs between the nodes of one cluster (and between here and AWS)."""

    node_id: int
    bind: str
    advertised_host: str
    port: int
    controller_port: int
    log_dir: str


@dataclass(frozen=True)
class ClusterSizes:
    """Thread counts and sizes: small on a laptop, the Kafka defaults on AWS."""

    network_threads: int = 2
    io_threads: int = 2
    replica_fetchers: int = 1
    segment_bytes: int = 256 * 1024 * 1024
    offsets_partitions: int = 8
    rebalance_delay_ms: int = 0


def new_cluster_id(seed: str | None = None) -> str:
    """A KRaft cluster id (a base64url UUID); deterministic when ``seed`` is given."""
    raw = uuid.uuid5(uuid.NAMESPACE_URL, seed) if seed is not None else uuid.uuid4()
    text = base64.urlsafe_b64encode(raw.bytes).decode().rstrip("=")
    # Kafka never hands out ids starting with '-' (they look like options).
    return text if not text.startswith("-") else "A" + text[1:]


def voters(nodes: list[NodeConfig]) -> str:
    """``controller.quorum.voters``: ``id@host:controller_port`` of every node."""
    return ",".join(f"{n.node_id}@{n.advertised_host}:{n.controller_port}" for n in nodes)


def render_server_properties(
    node: NodeConfig,
    quorum: str,
    replication: int,
    min_insync: int,
    sizes: ClusterSizes,
    flush_messages: int | None = None,
) -> str:
    """server.properties of one node; used locally and (with other addresses) on AWS. The
    template takes the fields of ``node`` and ``sizes`` as they are named."""
    return templating.render(
        __file__,
        "server.properties.j2",
        kafka_version=KAFKA_VERSION,
        voters=quorum,
        replication=replication,
        min_insync=min_insync,
        flush_messages=flush_messages,
        **asdict(node),
        **asdict(sizes),
    )


def render_log4j() -> str:
    return templating.render(__file__, "log4j.properties.j2")


def jar_dir() -> Path:
    return cache_dir("kafka") / f"kafka_2.13-{KAFKA_VERSION}"


def fetched() -> bool:
    return (jar_dir() / ".complete").exists() and any(jar_dir().glob("kafka_2.13-*.jar"))


def classpath() -> list[str]:
    return [str(jar_dir() / "*")]


class KafkaCluster(ProcessCluster):
    """Stops all nodes together: one by one, the last node would wait for a controller
    quorum that no longer exists before it shuts down.

    For faults the leader is the broker leading partition 0 of the sweep point's topic
    (every node of a combined KRaft cluster is also a controller and leads some
    partitions; Kafka elects new partition leaders from the in-sync replicas by itself).
    """

    stop_timeout = 30.0

    def leader(self, destination: Destination) -> str:
        from brokers.kafka.admin import partition_leader

        return node_name(partition_leader(self.endpoints, destination.name))


def node_name(node_id: int) -> str:
    """The process name of the node with this KRaft node id."""
    return f"kafka node{node_id}"


#: Brokers of each local topology.
BROKERS = {"single": 1, "cluster": 3}


class KafkaLocal(LocalDeployment["KafkaParams"]):
    """KRaft clusters started from the jars fetched by ``install``."""

    topologies = ("single", "cluster")
    debian_packages = ("openjdk-17-jre-headless", "maven")

    def missing(self) -> str | None:
        if importlib.util.find_spec("confluent_kafka") is None:
            return "confluent-kafka is not installed: pip install 'brokerbench[brokers]'"
        return jvm_missing(f"Kafka {KAFKA_VERSION} jars", fetched(), "kafka", "kafka-python")

    def install(self, log: Callable[[str], None]) -> None:
        maven_fetch(POM, jar_dir(), log)

    def fault_support(self, topology: str) -> FaultSupport:
        return FaultSupport(
            nodes=BROKERS[topology],
            leader="the leader of partition 0 of the point's topic",
            follower="a node that does not lead partition 0",
            fails_over=True,
            isolates=True,
            power_loss=True,
        )

    def param_problems(self, topology: str, params: KafkaParams) -> list[ParamProblem]:
        """Replicas within the brokers; min.insync.replicas within the replicas."""
        brokers = BROKERS[topology]
        too_many = more_than_nodes(
            "replication_factor", params.replication_factor, brokers, topology, "replicas"
        )
        if too_many:
            return too_many
        replicas = replication_for(params, brokers)
        wanted = params.min_insync_replicas
        if wanted is not None and wanted > replicas:
            return [
                ParamProblem(
                    "min_insync_replicas",
                    f"{wanted} in-sync replicas of {replicas} (the replication factor on "
                    f"topology {topology!r}): every send would fail; at most {replicas}",
                )
            ]
        return []

    def start(
        self, topology: str, params: KafkaParams, workdir: Path, hosts: NodeHosts | None = None
    ) -> ProcessCluster:
        if not fetched():
            raise BrokerStartError(
                f"Kafka {KAFKA_VERSION} jars are missing from {jar_dir()}: run 'brokerbench setup'"
            )
        cluster = KafkaCluster(topology, workdir, hosts=hosts)
        return start_cluster(cluster, lambda c: self._build(c, params, BROKERS[topology]))

    def _build(self, cluster: ProcessCluster, params: Any, count: int) -> None:
        """Render every node's configuration, format their storage, start them and wait
        until each logs that it started and the cluster lists every broker."""
        nodes = _node_configs(cluster, count)
        log4j = cluster.workdir / "log4j.properties"
        cluster.workdir.mkdir(parents=True, exist_ok=True)
        log4j.write_text(render_log4j())
        jvm = [
            f"-Dlog4j.configuration=file:{log4j}",
            "-Djava.awt.headless=true",
            "-XX:+ExitOnOutOfMemoryError",
        ]
        flush = getattr(params, "log_flush_interval_messages", None)
        configs = [_write_config(node, nodes, flush) for node in nodes]
        _format_storage(configs, new_cluster_id(), jvm)
        heap = getattr(params, "heap", "512m")
        started = [
            cluster.add(
                ManagedProcess(
                    node_name(node.node_id),
                    java_command("kafka.Kafka", classpath(), heap, args=[str(conf)], jvm=jvm),
                    cluster.workdir / f"node{node.node_id}.log",
                    cwd=Path(node.log_dir).parent,
                    ready=lambda n=node: port_open(n.bind, n.port),  # type: ignore[misc]
                    data_dir=Path(node.log_dir),
                ),
                slot=i,
            )
            for i, (node, conf) in enumerate(zip(nodes, configs, strict=True))
        ]
        deadline = Deadline.after(START_TIMEOUT)
        for process in started:
            wait_until(
                lambda p=process: log_contains(p.log_path, READY_LINE),  # type: ignore[misc]
                process.name,
                deadline.left(),
                process=process,
                interval=0.5,
            )
        cluster.endpoints = Endpoints(
            hosts=tuple(f"{n.advertised_host}:{n.port}" for n in nodes),
            extra=(("kafka_version", KAFKA_VERSION),),
        )
        _wait_for_brokers(cluster.endpoints, count, deadline.left(10.0))


def _node_configs(cluster: ProcessCluster, count: int) -> list[NodeConfig]:
    """Each node's ports, address (its host slot's) and log directory."""
    ports = free_ports(2 * count)
    return [
        NodeConfig(
            node_id=i + 1,
            bind=cluster.host(i),
            advertised_host=cluster.host(i),
            port=ports[2 * i],
            controller_port=ports[2 * i + 1],
            log_dir=str(cluster.workdir / f"node{i + 1}" / "data"),
        )
        for i in range(count)
    ]


def _write_config(node: NodeConfig, nodes: list[NodeConfig], flush: int | None) -> Path:
    """``server.properties`` of one node of ``nodes``, in its home; replicated three ways
    where there are three nodes (two in sync)."""
    replication = min(3, len(nodes))
    min_insync = 1 if replication == 1 else 2
    home = Path(node.log_dir).parent
    home.mkdir(parents=True, exist_ok=True)
    conf = home / "server.properties"
    conf.write_text(
        render_server_properties(
            node, voters(nodes), replication, min_insync, ClusterSizes(), flush
        )
    )
    return conf


def _format_storage(configs: list[Path], cluster_id: str, jvm: list[str]) -> None:
    """Format every node's log directory for the KRaft cluster ``cluster_id``, at once."""

    def format_one(conf: Path) -> str:
        cmd = java_command(
            "kafka.tools.StorageTool",
            classpath(),
            TOOL_HEAP,
            args=["format", "-t", cluster_id, "-c", str(conf), "--ignore-formatted"],
            jvm=jvm,
        )
        return run_checked(cmd, f"kafka storage format of {conf.parent.name}", timeout=120)

    with ThreadPoolExecutor(max_workers=len(configs)) as pool:
        list(pool.map(format_one, configs))


def _wait_for_brokers(endpoints: Endpoints, count: int, timeout: float) -> None:
    """Until the cluster metadata lists every broker (a started node registers a bit later)."""
    from brokers.kafka import client

    admin = client.admin(endpoints)
    try:

        def registered() -> bool:
            try:
                return len(admin.describe_cluster()["brokers"]) >= count
            except Exception:
                return False

        wait_until(registered, f"{count} Kafka brokers registering", timeout, interval=0.5)
    finally:
        admin.close()
