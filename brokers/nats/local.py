"""NATS with JetStream on this machine: one server (``single``) or a 3-server JetStream
cluster (``cluster``), from the Debian package, on free loopback ports.

Every server has a unique server name, its own store directory and config file rendered
from ``templates/nats-server.conf.j2``; cluster servers route to each other on loopback.
Clients and routes log in with the run's user and password (:mod:`brokers.credentials`).
A server is ready when its monitoring endpoint ``/healthz`` reports JetStream healthy
and, in a cluster, ``/jsz`` names the JetStream meta leader.
"""

from __future__ import annotations

import json
import urllib.request
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
from brokers.credentials import generate, write_private
from brokers.errors import BrokerError
from brokers.local import (
    ManagedProcess,
    NodeHosts,
    ProcessCluster,
    find_binary,
    free_ports,
    start_cluster,
    unavailable,
    wait_for_port,
    wait_until,
)

if TYPE_CHECKING:
    from brokers.nats.params import NatsParams

PACKAGE = "nats-server"
START_TIMEOUT = 120.0
CLUSTER_NAME = "brokerbench"


def render_config(
    server_name: str,
    listen_host: str,
    client_port: int,
    cluster_port: int,
    monitor_port: int,
    store_dir: str,
    routes: list[str],
    *,
    monitor_host: str = "",
    max_memory_store: str = "256MB",
    max_file_store: str = "8GB",
    max_payload: str = "8MB",
    user: str = "",
    password: str = "",
) -> str:
    """nats-server.conf of one server; used locally and (other addresses, sizes) on AWS.

    With a ``password`` (locally: the run's), clients and the other servers' routes must
    log in as ``user`` with it.
    """
    return templating.render(
        __file__,
        "nats-server.conf.j2",
        server_name=server_name,
        listen_host=listen_host,
        client_port=client_port,
        cluster_port=cluster_port,
        monitor_host=monitor_host or listen_host,
        monitor_port=monitor_port,
        store_dir=store_dir,
        routes=routes,
        cluster_name=CLUSTER_NAME,
        max_memory_store=max_memory_store,
        max_file_store=max_file_store,
        max_payload=max_payload,
        user=user,
        password=password,
    )


def _monitor(host: str, monitor_port: int, path: str) -> dict[str, Any]:
    with urllib.request.urlopen(f"http://{host}:{monitor_port}{path}", timeout=2) as reply:
        data = json.load(reply)
    return data if isinstance(data, dict) else {}


def healthy(host: str, monitor_port: int, clustered: bool) -> bool:
    """True when ``/healthz`` says ok and, in a cluster, a JetStream meta leader is known."""
    try:
        if _monitor(host, monitor_port, "/healthz").get("status") != "ok":
            return False
        if clustered:
            meta = _monitor(host, monitor_port, "/jsz").get("meta_cluster") or {}
            return bool(meta.get("leader"))
        return True
    except (OSError, ValueError):  # a URLError is an OSError
        return False


def jetstream_leader(host: str, monitor_port: int, stream: str) -> str:
    """The server name leading ``stream`` (from ``/jsz``), else the JetStream meta leader."""
    jsz = _monitor(host, monitor_port, "/jsz?accounts=true&streams=true")
    for account in jsz.get("account_details") or []:
        for detail in account.get("stream_detail") or []:
            leader = (detail.get("cluster") or {}).get("leader")
            if detail.get("name") == stream and leader:
                return str(leader)
    return str((jsz.get("meta_cluster") or {}).get("leader") or "")


class NatsCluster(ProcessCluster):
    """JetStream servers; for faults the leader is the point's stream leader (JetStream
    elects a new one from the stream's replicas by itself)."""

    def __init__(self, topology: str, workdir: Path, hosts: NodeHosts | None = None) -> None:
        super().__init__(topology, workdir, hosts=hosts)
        #: Server name → monitoring address (host, port).
        self.monitors: dict[str, tuple[str, int]] = {}

    def leader(self, destination: Destination) -> str:
        from brokers.nats.adapter import stream_name

        for name, (host, port) in self.monitors.items():
            if not self.node(process_name(name)).alive():
                continue
            try:
                leader = jetstream_leader(host, port, stream_name(destination))
            except (OSError, ValueError):  # a URLError is an OSError
                continue
            if leader:
                return process_name(leader)
        raise BrokerError(f"no running NATS server names a leader of {destination.name}")


def process_name(server: str) -> str:
    """The process name of the server named ``server``."""
    return f"nats-server {server}"


class NatsLocal(LocalDeployment["NatsParams"]):
    topologies = ("single", "cluster")
    debian_packages = (PACKAGE,)

    def param_problems(self, topology: str, params: NatsParams) -> list[ParamProblem]:
        """A stream's replicas are servers."""
        nodes = self.fault_support(topology).nodes
        return more_than_nodes("replicas", params.replicas, nodes, topology, "replicas")

    def fault_support(self, topology: str) -> FaultSupport:
        return FaultSupport(
            nodes=3 if topology == "cluster" else 1,
            leader="the leader of the point's stream",
            follower="a server that does not lead the stream",
            fails_over=True,
            isolates=True,
            power_loss=True,
        )

    def missing(self) -> str | None:
        return unavailable(lambda: find_binary("nats-server", PACKAGE))

    def start(
        self, topology: str, params: NatsParams, workdir: Path, hosts: NodeHosts | None = None
    ) -> ProcessCluster:
        size = 3 if topology == "cluster" else 1
        cluster = NatsCluster(topology, workdir, hosts)
        return start_cluster(cluster, lambda _: _build(cluster, size))


def _build(cluster: NatsCluster, size: int) -> None:
    binary = find_binary("nats-server", PACKAGE)
    ports = free_ports(3 * size)
    client_ports, cluster_ports, monitor_ports = (
        ports[i * size : (i + 1) * size] for i in range(3)
    )
    names = [f"n{i + 1}" for i in range(size)]
    hosts = [cluster.host(i) for i in range(size)]
    credentials = generate()
    nodes = []
    for i, name in enumerate(names):
        node_dir = cluster.workdir / name
        (node_dir / "jetstream").mkdir(parents=True)
        routes = [f"{hosts[j]}:{p}" for j, p in enumerate(cluster_ports) if j != i]
        text = render_config(
            name,
            hosts[i],
            client_ports[i],
            cluster_ports[i],
            monitor_ports[i],
            str(node_dir / "jetstream"),
            routes,
            user=credentials.user,
            password=credentials.password,
        )
        conf = write_private(node_dir / "nats-server.conf", text)
        monitor = cluster.monitors[name] = (hosts[i], monitor_ports[i])
        nodes.append(
            cluster.add(
                ManagedProcess(
                    process_name(name),
                    [binary, "-c", str(conf)],
                    cluster.workdir / f"{name}.log",
                    ready=lambda m=monitor: healthy(m[0], m[1], size > 1),  # type: ignore[misc]
                    data_dir=node_dir / "jetstream",
                ),
                slot=i,
            )
        )
    for node, host, port in zip(nodes, hosts, client_ports, strict=True):
        wait_for_port(node, host, port, timeout=START_TIMEOUT)
    for node, host, port in zip(nodes, hosts, monitor_ports, strict=True):
        wait_until(
            lambda host=host, port=port: healthy(host, port, size > 1),  # type: ignore[misc]
            f"{node.name} JetStream (/healthz on {host}:{port})",
            timeout=START_TIMEOUT,
            process=node,
        )
    cluster.endpoints = Endpoints(
        hosts=tuple(f"{h}:{p}" for h, p in zip(hosts, client_ports, strict=True)),
        extra=(
            ("monitor", ",".join(f"{h}:{p}" for h, p in zip(hosts, monitor_ports, strict=True))),
            *credentials.extra(),
        ),
    )
