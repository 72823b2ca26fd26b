"""RocketMQ 5 on this machine, from the name server, broker and proxy jars on Maven Central.

* ``single``: name server, one master (``ASYNC_MASTER``: there is no slave to wait for)
  and the gRPC proxy (cluster mode).
* ``cluster``: name server, a ``SYNC_MASTER`` (by default) with its ``SLAVE``, and the
  proxy; ready only once the master reports its slave in sync.

Faults (``cluster``) act on the master and its slave only (the name server and the proxy
are not broker nodes of the data): the leader is the broker the name server lists as
master of ``broker-a``, the follower its slave. Without the controller (DLedger) mode a
slave never becomes master: while the master is down the topic takes no sends and serves
no receives (the proxy's POP consumption needs the master), and a restarted master carries
on from its store; a restarted slave catches up over HA replication.

Every JVM gets an explicit heap and runs with the loopback-bind library
(:mod:`brokers.rocketmq.loopback`), so nothing listens beyond 127.0.0.1.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from pathlib import Path

from brokers.base import Destination, Endpoints, FaultSupport, LocalDeployment
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
    start_cluster,
    wait_for_port,
    wait_until,
)
from brokers.rocketmq import loopback, remoting
from brokers.rocketmq.config import (
    MAIN,
    POM,
    BrokerNode,
    Sizes,
    jvm_options,
    main_args,
    render_broker,
    render_namesrv,
    render_proxy,
    version,
)
from brokers.rocketmq.params import RocketMQParams

START_TIMEOUT = 180.0
LOCAL_SIZES = Sizes()
BROKER_NAME = "broker-a"
MASTER = f"{BROKER_NAME}-master"


def jar_dir() -> Path:
    return cache_dir("rocketmq") / version()


def fetched() -> bool:
    return (jar_dir() / ".complete").exists() and any(jar_dir().glob("rocketmq-proxy-*.jar"))


def _bindable(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((LOOPBACK, port))
        except OSError:
            return False
    return True


def broker_ports(count: int, taken: set[int]) -> list[int]:
    """Listen ports whose ``port - 2`` is free too: a broker also listens there."""
    chosen: list[int] = []
    for _ in range(50):
        for port in free_ports(4):
            used = taken | set(chosen) | {p - 2 for p in chosen}
            if port in used or port - 2 in used or port - 2 < 1024:
                continue
            if _bindable(port - 2):
                chosen.append(port)
            if len(chosen) == count:
                return chosen
    raise BrokerStartError("found no free port pairs for the RocketMQ brokers")


class RocketMQCluster(ProcessCluster):
    """Stops all nodes at once: the data is thrown away, and each RocketMQ JVM takes
    seconds to run its shutdown hooks (it is killed after a short grace period)."""

    stop_timeout = 5.0

    def __init__(self, topology: str, workdir: Path) -> None:
        super().__init__(topology, workdir)
        #: Broker node name → its listen port (how the name server's addresses name them).
        self.ports: dict[str, int] = {}

    def fault_nodes(self) -> list[str]:
        return [n.name for n in self.nodes if n.name.startswith(BROKER_NAME)]

    def leader(self, destination: Destination) -> str:
        """The node the name server lists as master (broker id 0) of ``broker-a``; while
        the master is down it is listed by nobody, and still the only one that can lead."""
        namesrv = self.endpoints.get("namesrv")
        try:
            master = remoting.cluster_info(namesrv).get(BROKER_NAME, {}).get(0)
        except BrokerError:
            master = None
        if master is not None:
            port = int(master.rpartition(":")[2])
            for name, node_port in self.ports.items():
                if node_port == port:
                    return name
            raise BrokerError(f"the name server lists an unknown master {master}")
        return MASTER


class RocketMQLocal(LocalDeployment[RocketMQParams]):
    """Name server + broker(s) + proxy from the jars fetched by ``install``."""

    topologies = ("single", "cluster")
    debian_packages = ("openjdk-17-jre-headless", "maven", "gcc")

    def missing(self) -> str | None:
        reason = jvm_missing(
            f"RocketMQ {version()} jars", fetched(), "rocketmq", "rocketmq-python-client"
        )
        if reason:
            return reason
        if not loopback.library().exists():
            if loopback.compiler() is None:
                return "no C compiler for RocketMQ's loopback-bind library: install gcc"
            return "RocketMQ's loopback-bind library is not built yet: run 'brokerbench setup'"
        return None

    def install(self, log: Callable[[str], None]) -> None:
        maven_fetch(POM, jar_dir(), log)
        if not loopback.library().exists():
            log("building RocketMQ's loopback-bind library…")
        loopback.build()

    def fault_support(self, topology: str) -> FaultSupport:
        return FaultSupport(
            nodes=2 if topology == "cluster" else 1,
            leader="the master (node 0), as the name server lists it",
            follower="its slave (node 1); while it is down the master confirms alone",
            fails_over=False,
            # The brokers' stores are on the lazy filesystem (measured on one broker).
            power_loss=topology == "single",
        )

    def start(
        self, topology: str, params: RocketMQParams, workdir: Path, hosts: NodeHosts | None = None
    ) -> ProcessCluster:
        if not fetched():
            raise BrokerStartError(
                f"RocketMQ {version()} jars are missing from {jar_dir()}: run 'brokerbench setup'"
            )
        if not isinstance(params, RocketMQParams):
            params = RocketMQParams.model_validate({})
        library = loopback.build()
        cluster = RocketMQCluster(topology, workdir)
        return start_cluster(
            cluster, lambda _: self._build(cluster, params, topology == "cluster", library)
        )

    def _build(
        self, cluster: RocketMQCluster, params: RocketMQParams, with_slave: bool, library: Path
    ) -> None:
        """Name server, then the broker(s) registered with it (the slave in sync), then the
        proxy clients connect to."""
        namesrv_port, grpc_port, proxy_remoting_port, *ha_ports = free_ports(5)
        taken = {namesrv_port, grpc_port, proxy_remoting_port, *ha_ports}
        listen_ports = broker_ports(2 if with_slave else 1, taken)
        namesrv = [f"{LOOPBACK}:{namesrv_port}"]
        deadline = Deadline.after(START_TIMEOUT)

        conf = render_namesrv(namesrv_port, LOOPBACK)
        ns = _launch(cluster, library, "namesrv", "namesrv", conf)
        wait_for_port(ns, LOOPBACK, namesrv_port, timeout=deadline.left())

        nodes = _broker_nodes(params, with_slave, listen_ports, ha_ports, cluster.workdir)
        brokers = [_launch_broker(cluster, library, node, params, namesrv) for node in nodes]
        _await_brokers(brokers, namesrv[0], deadline)

        conf = render_proxy(namesrv, grpc_port, proxy_remoting_port)
        proxy = _launch(cluster, library, "proxy", "proxy", conf)
        wait_for_port(proxy, LOOPBACK, grpc_port, timeout=deadline.left())
        dead = cluster.dead_nodes()
        if dead:
            raise BrokerStartError(f"RocketMQ node(s) {', '.join(dead)} exited while starting")
        cluster.endpoints = Endpoints(
            hosts=(f"{LOOPBACK}:{grpc_port}",),
            extra=(("namesrv", namesrv[0]), ("rocketmq_version", version())),
        )


def _launch(
    cluster: RocketMQCluster,
    library: Path,
    name: str,
    role: str,
    conf: str,
    data_dir: Path | None = None,
) -> ManagedProcess:
    """Write one node's configuration into its home and start its JVM there with the local
    memory of its ``role``, bound to loopback by ``library``; ``data_dir`` is what a power
    cut may take."""
    heap, direct = {
        "namesrv": (LOCAL_SIZES.namesrv_heap, None),
        "broker": (LOCAL_SIZES.broker_heap, LOCAL_SIZES.broker_direct),
        "proxy": (LOCAL_SIZES.proxy_heap, LOCAL_SIZES.proxy_direct),
    }[role]
    home = cluster.workdir / name
    (home / "conf").mkdir(parents=True, exist_ok=True)
    path = home / ("proxy.json" if role == "proxy" else f"{role}.conf")
    path.write_text(conf)
    command = java_command(
        MAIN[role],
        [str(jar_dir() / "*")],
        heap,
        main_args(role, path),
        jvm_options(home, direct),
    )
    env = {"ROCKETMQ_HOME": str(home), "LD_PRELOAD": str(library)}
    return cluster.add(
        ManagedProcess(
            name, command, cluster.workdir / f"{name}.log", env=env, cwd=home, data_dir=data_dir
        )
    )


def _broker_nodes(
    params: RocketMQParams,
    with_slave: bool,
    listen_ports: list[int],
    ha_ports: list[int],
    workdir: Path,
) -> list[BrokerNode]:
    """The master of ``broker-a`` and, with a slave, its slave: ports and store."""
    members = [(params.broker_role(with_slave), "master"), ("SLAVE", "slave")]
    return [
        BrokerNode(
            BROKER_NAME,
            broker_id,
            role,
            LOOPBACK,
            LOOPBACK,
            listen_ports[broker_id],
            ha_ports[broker_id],
            str(workdir / f"{BROKER_NAME}-{member}" / "store"),
        )
        for broker_id, (role, member) in enumerate(members[: 2 if with_slave else 1])
    ]


def _launch_broker(
    cluster: RocketMQCluster,
    library: Path,
    node: BrokerNode,
    params: RocketMQParams,
    namesrv: list[str],
) -> tuple[ManagedProcess, BrokerNode]:
    """Start one broker node; it is ready (after a restart too) once its port is open."""
    name = f"{node.broker_name}-{'master' if node.broker_id == 0 else 'slave'}"
    conf = render_broker(node, params.flush_disk_type, namesrv, LOCAL_SIZES)
    process = _launch(
        cluster,
        library,
        name,
        "broker",
        conf,
        # Its store: the commit log, the consume queues, the topics' and offsets' files.
        data_dir=Path(node.store),
    )
    process.ready = lambda port=node.port: port_open(LOOPBACK, port)
    cluster.ports[name] = node.port
    return process, node


def _await_brokers(
    brokers: list[tuple[ManagedProcess, BrokerNode]], namesrv: str, deadline: Deadline
) -> None:
    """Until every broker listens and is registered with the name server, and the
    master reports its slave in sync (where there is one)."""
    for process, node in brokers:
        wait_for_port(process, LOOPBACK, node.port, timeout=deadline.left())
    master_process, master = brokers[0]
    wait_until(
        lambda: _registered(namesrv, len(brokers)),
        f"{BROKER_NAME} registration with the name server",
        deadline.left(),
        process=master_process,
        interval=0.5,
    )
    if len(brokers) > 1:
        slave = brokers[1][0]
        wait_until(
            lambda: _slave_in_sync(f"{LOOPBACK}:{master.port}"),
            f"{slave.name} replication (the master reports no slave in sync)",
            deadline.left(),
            process=slave,
            interval=0.5,
        )


def _registered(namesrv: str, brokers: int) -> bool:
    try:
        ids = remoting.cluster_info(namesrv).get(BROKER_NAME, {})
    except BrokerError:
        return False
    return len(ids) >= brokers


def _slave_in_sync(master: str) -> bool:
    try:
        return int(remoting.ha_status(master).get("inSyncSlaveNums", 0)) >= 1
    except BrokerError:
        return False
