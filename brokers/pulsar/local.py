"""Pulsar on this machine, from the official server distribution on Maven Central.

* ``single``: ``PulsarStandaloneStarter`` — broker, one bookie and a RocksDB metadata store
  in one JVM; quorum 1/1/1 (the only one a single bookie allows).
* ``cluster``: ZooKeeper, three bookies and one broker as five processes; quorum 3/3/2.
  Separate processes rather than the standalone's ``--num-bookies 3``: they start in about
  30 s on two cores with ~1.3 GiB in all, use the same ``zookeeper``/``bookkeeper``/
  ``broker`` templates as the AWS nodes, and a single bookie can be stopped or killed.

Everything listens on 127.0.0.1 (bookies bind to the ``lo`` interface).

Faults (``cluster``) act on the broker and the bookies, not on ZooKeeper (the metadata
store: without it nothing works, and that is no failover to measure). The leader is the
broker serving the point's topic (a lookup); with one broker nothing takes its place, so
while it is down the topic is unavailable, and a restarted broker takes the topic over again
(its ledgers are on the bookies). A follower is a bookie: with ensemble 3, write quorum 3
and ack quorum 2 on three bookies, a send is confirmed by the two that remain.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from brokers.base import (
    Destination,
    Endpoints,
    FaultSupport,
    LocalDeployment,
    ParamProblem,
    more_than_nodes,
)
from brokers.errors import BrokerError, BrokerStartError
from brokers.jvm import cache_dir, java_command, jvm_missing, maven_fetch
from brokers.local import (
    LOOPBACK,
    Deadline,
    ManagedProcess,
    NodeHosts,
    ProcessCluster,
    free_ports,
    port_open,
    run_checked,
    start_cluster,
    wait_for_port,
    wait_until,
)
from brokers.pulsar import admin
from brokers.pulsar.config import (
    MAIN,
    POM,
    REPLICATED,
    UNREPLICATED,
    BrokerConf,
    Quorum,
    Sizes,
    distribution_name,
    jvm_options,
    metadata_setup_args,
    render_bookie,
    render_broker,
    render_standalone,
    render_zookeeper,
    version,
)
from brokers.pulsar.params import PulsarParams

START_TIMEOUT = 180.0
BOOKIES = 3
LOCAL_SIZES = Sizes()


def dist_root() -> Path:
    return cache_dir("pulsar") / version()


def home() -> Path:
    """The unpacked distribution (``lib/``, ``conf/``)."""
    return dist_root() / distribution_name()


def fetched() -> bool:
    return (dist_root() / ".complete").exists() and (home() / "lib").is_dir()


def classpath() -> list[str]:
    return [str(home() / "lib" / "*")]


def _bookies(topology: str) -> int:
    """Bookies of a local topology: three in ``cluster``, the standalone's one otherwise."""
    return BOOKIES if topology == "cluster" else 1


def _quorum(params: Any, topology: str) -> Quorum:
    """The cluster default quorum; a scenario's quorum must fit the local bookies."""
    default = REPLICATED if topology == "cluster" else UNREPLICATED
    bookies = _bookies(topology)
    wanted = params.quorum if isinstance(params, PulsarParams) else None
    if wanted is not None and wanted.ensemble > bookies:
        raise BrokerStartError(
            f"Pulsar topology {topology!r} has {bookies} bookie(s): ensemble_size "
            f"{wanted.ensemble} cannot be placed (use topology 'cluster' or quorum {default})"
        )
    return default


def _healthy(base: str) -> bool:
    try:
        return str(admin.call(base, "GET", "brokers/health")).strip().strip('"') == "ok"
    except BrokerError:
        return False


class PulsarCluster(ProcessCluster):
    """Stops brokers first, then the bookies together, then the metadata store."""

    stop_order = ("broker", "standalone", "bookie", "zookeeper")
    stop_timeout = 20.0

    def __init__(self, topology: str, workdir: Path, params: PulsarParams) -> None:
        super().__init__(topology, workdir)
        self.params = params
        #: Broker node name → its service port (how a lookup names it).
        self.broker_ports: dict[str, int] = {}

    def fault_nodes(self) -> list[str]:
        """The broker(s), then the bookies: ZooKeeper is left out."""
        brokers = [n.name for n in self.nodes if n.name.startswith("broker")]
        return brokers + [n.name for n in self.nodes if n.name.startswith("bookie")]

    def leader(self, destination: Destination) -> str:
        """The broker serving the point's topic, as a lookup names it."""
        address = admin.owner(admin.admin_url(self.endpoints), self.params, destination)
        port = int(address.rpartition(":")[2])
        for name, broker_port in self.broker_ports.items():
            if broker_port == port:
                return name
        raise BrokerError(
            f"the topic of {destination.name} is served by an unknown broker {address}"
        )


class PulsarLocal(LocalDeployment[PulsarParams]):
    """Standalone or ZooKeeper + 3 bookies + broker, from the unpacked distribution."""

    topologies = ("single", "cluster")
    debian_packages = ("openjdk-17-jre-headless", "maven")

    def missing(self) -> str | None:
        return jvm_missing(f"Pulsar {version()}", fetched(), "pulsar", "pulsar-client")

    def install(self, log: Callable[[str], None]) -> None:
        maven_fetch(POM, dist_root(), log, goal_args=["dependency:unpack"])

    def param_problems(self, topology: str, params: PulsarParams) -> list[ParamProblem]:
        """A ledger's ensemble is bookies (one in the standalone ``single``)."""
        return more_than_nodes(
            "ensemble_size",
            params.ensemble_size,
            _bookies(topology),
            topology,
            "bookies per ledger",
        )

    def fault_support(self, topology: str) -> FaultSupport:
        return FaultSupport(
            nodes=1 + BOOKIES if topology == "cluster" else 1,
            leader="the broker serving the point's topic (node 0, the only broker)",
            follower="a bookie (nodes 1–3); ZooKeeper takes no faults",
            fails_over=False,
        )

    def start(
        self, topology: str, params: PulsarParams, workdir: Path, hosts: NodeHosts | None = None
    ) -> ProcessCluster:
        if not fetched():
            raise BrokerStartError(
                f"Pulsar {version()} is missing from {dist_root()}: run 'brokerbench setup'"
            )
        quorum = _quorum(params, topology)
        if not isinstance(params, PulsarParams):
            params = PulsarParams.model_validate({})
        cluster = PulsarCluster(topology, workdir, params)
        build = self._cluster if topology == "cluster" else self._standalone
        return start_cluster(cluster, lambda _: build(cluster, quorum))

    def _standalone(self, cluster: PulsarCluster, quorum: Quorum) -> None:
        broker_port, web_port, bookie_port = free_ports(3)
        workdir = cluster.workdir
        workdir.mkdir(parents=True, exist_ok=True)
        conf = workdir / "standalone.conf"
        conf.write_text(
            render_standalone(_broker_conf("standalone", "", broker_port, web_port, quorum))
        )
        args = [
            "--config",
            str(conf),
            "--num-bookies",
            "1",
            "--bookkeeper-port",
            str(bookie_port),
            "--bookkeeper-dir",
            str(workdir / "bookkeeper"),
            "--metadata-dir",
            str(workdir / "metadata"),
            "--no-functions-worker",
            "--no-stream-storage",
        ]
        node = _launch(
            cluster,
            "standalone",
            LOCAL_SIZES.standalone_heap,
            args,
            workdir,
            LOCAL_SIZES.standalone_direct,
            jvm=[f"-Dpulsar.config.file={conf}"],
        )
        self._wait_for_broker(cluster, node, web_port)
        cluster.endpoints = _endpoints(broker_port, web_port)

    def _cluster(self, cluster: PulsarCluster, quorum: Quorum) -> None:
        """ZooKeeper, the cluster's metadata in it, the bookies, then the broker."""
        zk_port, broker_port, web_port, *bookie_ports = free_ports(3 + BOOKIES)
        zookeeper = [f"{LOOPBACK}:{zk_port}"]
        zk = _start_zookeeper(cluster, zk_port)
        wait_for_port(zk, LOOPBACK, zk_port, timeout=120)
        _set_up_metadata(cluster, zookeeper, broker_port, web_port)
        bookies = [
            (_start_bookie(cluster, index, port, zookeeper), port)
            for index, port in enumerate(bookie_ports, start=1)
        ]
        broker = _start_broker(cluster, zookeeper, quorum, broker_port, web_port)
        deadline = Deadline.after(START_TIMEOUT)
        for process, port in bookies:
            wait_for_port(process, LOOPBACK, port, timeout=deadline.left())
        self._wait_for_broker(cluster, broker, web_port, deadline)
        cluster.endpoints = _endpoints(broker_port, web_port)

    def _wait_for_broker(
        self,
        cluster: ProcessCluster,
        broker: ManagedProcess,
        web_port: int,
        deadline: Deadline | None = None,
    ) -> None:
        """Wait for the web port, then for a health check that writes through the bookies."""
        deadline = deadline or Deadline.after(START_TIMEOUT)
        wait_for_port(broker, LOOPBACK, web_port, timeout=deadline.left())
        base = f"http://{LOOPBACK}:{web_port}"
        wait_until(
            lambda: _healthy(base),
            f"{broker.name} health check (write and read through the bookies)",
            deadline.left(),
            process=broker,
            interval=1.0,
        )
        dead = cluster.dead_nodes()
        if dead:
            raise BrokerStartError(f"Pulsar node(s) {', '.join(dead)} exited while starting")


def _launch(
    cluster: PulsarCluster,
    name: str,
    heap: str,
    args: list[str],
    node_dir: Path,
    direct: str | None = None,
    *,
    main: str = "",
    jvm: Sequence[str] = (),
    ready: Callable[[], bool] | None = None,
) -> ManagedProcess:
    """Start the JVM of node ``name`` in ``node_dir`` (its Pulsar logs there, its output in
    ``<name>.log``), with the main class of ``main`` (by default of ``name``)."""
    options = [*jvm_options(home(), direct, node_dir), *jvm]
    command = java_command(MAIN[main or name], classpath(), heap, args, options)
    log = cluster.workdir / f"{name}.log"
    return cluster.add(ManagedProcess(name, command, log, cwd=node_dir, ready=ready))


def _start_zookeeper(cluster: PulsarCluster, port: int) -> ManagedProcess:
    """The metadata store: one ZooKeeper server."""
    zk_dir = cluster.workdir / "zookeeper"
    zk_dir.mkdir(parents=True, exist_ok=True)
    conf = zk_dir / "zookeeper.conf"
    conf.write_text(render_zookeeper(str(zk_dir / "data"), port, LOOPBACK, servers=[]))
    return _launch(cluster, "zookeeper", LOCAL_SIZES.zookeeper_heap, [str(conf)], zk_dir)


def _set_up_metadata(
    cluster: PulsarCluster, zookeeper: list[str], broker_port: int, web_port: int
) -> None:
    """Write the cluster's metadata (its name and the broker's URLs) into ZooKeeper."""
    init = java_command(
        MAIN["init"],
        classpath(),
        "256m",
        metadata_setup_args(
            "local",
            zookeeper,
            f"http://{LOOPBACK}:{web_port}",
            f"pulsar://{LOOPBACK}:{broker_port}",
        ),
        jvm_options(home(), log_dir=cluster.workdir),
    )
    run_checked(init, "Pulsar cluster metadata setup", timeout=180, cwd=cluster.workdir)


def _start_bookie(
    cluster: PulsarCluster, index: int, port: int, zookeeper: list[str]
) -> ManagedProcess:
    """Bookie ``index`` (from 1), bound to ``lo``; ready (after a restart too) once its
    port is open."""
    sizes = LOCAL_SIZES
    bookie_dir = cluster.workdir / f"bookie-{index}"
    bookie_dir.mkdir(parents=True, exist_ok=True)
    conf = bookie_dir / "bookkeeper.conf"
    conf.write_text(render_bookie(index, port, LOOPBACK, zookeeper, str(bookie_dir), sizes, "lo"))
    return _launch(
        cluster,
        f"bookie-{index}",
        sizes.bookie_heap,
        ["--conf", str(conf)],
        bookie_dir,
        sizes.bookie_direct,
        main="bookie",
        ready=lambda: port_open(LOOPBACK, port),
    )


def _start_broker(
    cluster: PulsarCluster, zookeeper: list[str], quorum: Quorum, broker_port: int, web_port: int
) -> ManagedProcess:
    """The one broker; ready (after a restart too) once its health check passes."""
    sizes = LOCAL_SIZES
    broker_dir = cluster.workdir / "broker"
    broker_dir.mkdir(parents=True, exist_ok=True)
    (broker_dir / "broker.conf").write_text(
        render_broker(
            _broker_conf("local", "zk:" + ",".join(zookeeper), broker_port, web_port, quorum)
        )
    )
    broker = _launch(
        cluster,
        "broker",
        sizes.broker_heap,
        ["--broker-conf", str(broker_dir / "broker.conf")],
        broker_dir,
        sizes.broker_direct,
        ready=lambda: _healthy(f"http://{LOOPBACK}:{web_port}"),
    )
    cluster.broker_ports[broker.name] = broker_port
    return broker


def _broker_conf(
    cluster_name: str, metadata_store: str, broker_port: int, web_port: int, quorum: Quorum
) -> BrokerConf:
    """A broker here: on loopback, local sizes, no load balancer (one broker)."""
    return BrokerConf(
        cluster_name=cluster_name,
        metadata_store=metadata_store,
        broker_port=broker_port,
        web_port=web_port,
        bind=LOOPBACK,
        advertised=LOOPBACK,
        quorum=quorum,
        load_balancer=False,
        sizes=LOCAL_SIZES,
    )


def _endpoints(broker_port: int, web_port: int) -> Endpoints:
    return Endpoints(
        hosts=(f"{LOOPBACK}:{broker_port}",),
        extra=(("admin", f"http://{LOOPBACK}:{web_port}"), ("pulsar_version", version())),
    )
