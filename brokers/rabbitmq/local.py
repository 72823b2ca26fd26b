"""RabbitMQ on this machine: one node (``single``) or three nodes joined into one cluster
(``cluster``), from the Debian package, on free loopback ports in a private directory.

Each node has its own node name, AMQP and distribution ports, data, log and config files.
The cluster gets its own Erlang cookie and its own ``epmd`` on a free port, so it neither
uses nor disturbs an epmd (or RabbitMQ) already running here, and stopping it leaves
nothing behind. Nodes 2 and 3 join node 1 with ``rabbitmqctl`` (stop_app, join_cluster,
start_app).

Each node's first boot creates the run's user (:mod:`brokers.credentials`) as its only
user, an administrator with every permission on the default virtual host
(``default_user``/``default_pass``); RabbitMQ's ``guest`` is never created. A joining node
takes the users of the cluster it joins, which are the same.
"""

from __future__ import annotations

import secrets
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
from brokers.credentials import Credentials, generate, write_private
from brokers.errors import BrokerError, BrokerStartError
from brokers.local import (
    LOOPBACK,
    ManagedProcess,
    NodeHosts,
    ProcessCluster,
    find_binary,
    free_ports,
    port_open,
    start_cluster,
    unavailable,
    wait_for_port,
    wait_until,
)
from brokers.rabbitmq.ctl import LOOPBACK_DIST, Ctl

if TYPE_CHECKING:
    from brokers.rabbitmq.params import RabbitMQParams

PACKAGE = "rabbitmq-server"
RABBIT_BIN = ("/usr/lib/rabbitmq/bin",)  # the real scripts; /usr/sbin has su wrappers
ERLANG_BIN = ("/usr/lib/erlang/bin",)
#: Erlang start-up is slow on a small, busy machine.
START_TIMEOUT = 180.0
#: Schedulers must not busy-wait: several VMs and the clients share few cores here.
VM_ARGS = "+sbwt none +sbwtdcpu none +sbwtdio none"


def render_config(
    node_name: str,
    listen_host: str,
    amqp_port: int,
    *,
    default_user: str = "",
    default_pass: str = "",
    memory_watermark: float = 0.4,
    disk_free_limit: str = "50MB",
    cluster_name: str = "",
) -> dict[str, str]:
    """File name → content of one node's configuration (local and AWS)."""
    values: dict[str, Any] = dict(
        node_name=node_name,
        listen_host=listen_host,
        amqp_port=amqp_port,
        default_user=default_user,
        default_pass=default_pass,
        memory_watermark=memory_watermark,
        disk_free_limit=disk_free_limit,
        cluster_name=cluster_name,
    )
    return {
        "rabbitmq.conf": templating.render(__file__, "rabbitmq.conf.j2", **values),
        # No plugins: the management plugin (and its HTTP listener) stays off.
        "enabled_plugins": templating.render(__file__, "enabled_plugins.j2", plugins=[]),
    }


def _binaries() -> tuple[str, str, str]:
    server = find_binary("rabbitmq-server", PACKAGE, RABBIT_BIN)
    ctl = find_binary("rabbitmqctl", PACKAGE, RABBIT_BIN)
    epmd = find_binary("epmd", "erlang-base", ERLANG_BIN)
    return server, ctl, epmd


class RabbitCluster(ProcessCluster):
    """A node, or three joined in one cluster; faults act on the RabbitMQ nodes (not epmd).

    The leader is the leader of the sweep point's quorum queue (the other members follow
    it); a node started again rejoins the cluster from its data directory.
    """

    def fault_nodes(self) -> list[str]:
        return [n.name for n in self.nodes if n.name.startswith("rabbitmq ")]

    def leader(self, destination: Destination) -> str:
        ctl = Ctl.from_endpoints(self.endpoints)
        assert ctl is not None
        errors = []
        for node in ctl.nodes:
            if not self.node(f"rabbitmq {node}").alive():
                continue
            try:
                queue = ctl.queue(destination.name, node)
            except BrokerError as exc:
                errors.append(str(exc))
                continue
            if queue is None or not queue.get("leader"):
                raise BrokerError(f"queue {destination.name} has no leader on {node}")
            return f"rabbitmq {queue['leader']}"
        raise BrokerError("no RabbitMQ node answered: " + "; ".join(errors))


class RabbitMQLocal(LocalDeployment["RabbitMQParams"]):
    topologies = ("single", "cluster")
    debian_packages = (PACKAGE,)

    def missing(self) -> str | None:
        return unavailable(_binaries)

    def param_problems(self, topology: str, params: RabbitMQParams) -> list[ParamProblem]:
        """A quorum queue's members are cluster nodes."""
        nodes = self.fault_support(topology).nodes
        return more_than_nodes("quorum_size", params.quorum_size, nodes, topology, "members")

    def fault_support(self, topology: str) -> FaultSupport:
        return FaultSupport(
            nodes=3 if topology == "cluster" else 1,
            leader="the leader of the point's quorum queue",
            follower="another member of the queue",
            fails_over=True,
        )

    def start(
        self, topology: str, params: RabbitMQParams, workdir: Path, hosts: NodeHosts | None = None
    ) -> ProcessCluster:
        size = 3 if topology == "cluster" else 1
        cluster = RabbitCluster(topology, workdir)
        return start_cluster(cluster, lambda c: _build(c, size))


def _build(cluster: ProcessCluster, size: int) -> None:
    """epmd, then every node at once (the slow Erlang boots overlap), then the nodes after
    the first join it."""
    server, ctl_binary, epmd_binary = _binaries()
    workdir = cluster.workdir
    home = _erlang_home(workdir)
    ports = free_ports(1 + 2 * size)
    epmd_port, amqp_ports, dist_ports = ports[0], ports[1 : 1 + size], ports[1 + size :]
    names = [f"bb{i + 1}@localhost" for i in range(size)]
    ctl = Ctl(ctl_binary, str(home), epmd_port, tuple(names))
    credentials = generate()

    epmd = cluster.add(
        ManagedProcess(
            "epmd",
            [epmd_binary, "-port", str(epmd_port), "-address", LOOPBACK],
            workdir / "epmd.log",
            env=ctl.env(),
        )
    )
    wait_for_port(epmd, LOOPBACK, epmd_port, timeout=30)
    nodes = [
        _start_node(cluster, server, ctl, credentials, i, amqp_ports[i], dist_ports[i])
        for i in range(size)
    ]
    for node, port in zip(nodes, amqp_ports, strict=True):
        wait_for_port(node, LOOPBACK, port, timeout=START_TIMEOUT)
    for name in names:
        ctl.run(name, "await_startup", "--timeout", str(int(START_TIMEOUT)))
    for name in names[1:]:
        ctl.run(name, "stop_app")
        ctl.run(name, "join_cluster", names[0])
        ctl.run(name, "start_app", timeout=START_TIMEOUT)
    if size > 1:
        _wait_for_members(ctl, names)
    cluster.endpoints = Endpoints(
        hosts=tuple(f"{LOOPBACK}:{p}" for p in amqp_ports),
        extra=(*ctl.extra(), *credentials.extra()),
    )


def _erlang_home(workdir: Path) -> Path:
    """The nodes' and the CLI's home: the Erlang cookie they share, an empty env file."""
    home = workdir / "home"
    home.mkdir(parents=True, exist_ok=True)
    cookie = home / ".erlang.cookie"
    cookie.write_text(secrets.token_hex(20).upper())
    cookie.chmod(0o400)
    (home / "rabbitmq-env.conf").write_text("")
    return home


def _start_node(
    cluster: ProcessCluster,
    server: str,
    ctl: Ctl,
    credentials: Credentials,
    index: int,
    amqp_port: int,
    dist_port: int,
) -> ManagedProcess:
    """Node ``index`` (from 0) with its configuration files and directories; ready (after
    a restart too) once its AMQP port is open."""
    name = ctl.nodes[index]
    node_dir = cluster.workdir / f"bb{index + 1}"
    node_dir.mkdir()
    files = render_config(
        name,
        LOOPBACK,
        amqp_port,
        default_user=credentials.user,
        default_pass=credentials.password,
    )
    for file, content in files.items():
        write_private(node_dir / file, content)
    env = {
        **ctl.env(),
        "RABBITMQ_NODENAME": name,
        "RABBITMQ_USE_LONGNAME": "false",
        "RABBITMQ_NODE_IP_ADDRESS": LOOPBACK,
        "RABBITMQ_NODE_PORT": str(amqp_port),
        "RABBITMQ_DIST_PORT": str(dist_port),
        "RABBITMQ_MNESIA_BASE": str(node_dir / "mnesia"),
        "RABBITMQ_LOG_BASE": str(node_dir / "log"),
        "RABBITMQ_CONFIG_FILE": str(node_dir / "rabbitmq.conf"),
        "RABBITMQ_ADVANCED_CONFIG_FILE": str(node_dir / "advanced.config"),
        "RABBITMQ_ENABLED_PLUGINS_FILE": str(node_dir / "enabled_plugins"),
        "RABBITMQ_PID_FILE": str(node_dir / "rabbitmq.pid"),
        "RABBITMQ_SERVER_ADDITIONAL_ERL_ARGS": f"{LOOPBACK_DIST} {VM_ARGS}",
    }
    return cluster.add(
        ManagedProcess(
            f"rabbitmq {name}",
            [server],
            cluster.workdir / f"bb{index + 1}.log",
            env=env,
            cwd=node_dir,
            ready=lambda: port_open(LOOPBACK, amqp_port),
        )
    )


def _wait_for_members(ctl: Ctl, names: list[str]) -> None:
    """Until every node runs in the cluster; the error names the ones that do not."""
    running: set[str] = set()

    def ready() -> bool:
        running.clear()
        try:
            running.update(ctl.cluster_status().get("running_nodes", []))
        except BrokerError:
            return False
        return running >= set(names)

    try:
        wait_until(ready, f"RabbitMQ cluster of {', '.join(names)}", timeout=START_TIMEOUT)
    except BrokerStartError:
        absent = ", ".join(sorted(set(names) - running))
        raise BrokerStartError(f"RabbitMQ nodes not running in the cluster: {absent}") from None
