"""Redis on this machine: one master (``single``) or a master with two replicas
(``cluster``), each with AOF on, on free loopback ports in a private directory."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from brokers import templating
from brokers.base import Endpoints, LocalDeployment
from brokers.errors import BrokerUnavailable
from brokers.local import (
    LOOPBACK,
    ManagedProcess,
    ProcessCluster,
    find_binary,
    free_ports,
    start_cluster,
    wait_for_port,
    wait_until,
)


def render_config(
    name: str, bind: str, port: int, data_dir: str, appendfsync: str, replica_of: str = ""
) -> str:
    """redis.conf of one node; used locally and (with other addresses) on AWS."""
    return templating.render(
        __file__,
        "redis.conf.j2",
        name=name,
        bind=bind,
        port=port,
        data_dir=data_dir,
        appendfsync=appendfsync,
        replica_of=replica_of,
        cluster_enabled=False,
    )


class RedisLocal(LocalDeployment):
    topologies = ("single", "cluster")
    debian_packages = ("redis-server",)

    def missing(self) -> str | None:
        try:
            find_binary("redis-server", "redis-server")
        except BrokerUnavailable as exc:
            return str(exc)
        return None

    def start(self, topology: str, params: Any, workdir: Path) -> ProcessCluster:
        cluster = ProcessCluster(topology, workdir)
        return start_cluster(cluster, lambda c: self._build(c, params, topology == "cluster"))

    def _build(self, cluster: ProcessCluster, params: Any, replicated: bool) -> None:
        binary = find_binary("redis-server", "redis-server")
        names = ["master", "replica1", "replica2"] if replicated else ["master"]
        ports = free_ports(len(names))
        for name, port in zip(names, ports, strict=True):
            data = cluster.workdir / name
            data.mkdir(parents=True, exist_ok=True)
            conf = data / "redis.conf"
            replica_of = "" if name == "master" else f"{LOOPBACK} {ports[0]}"
            conf.write_text(
                render_config(name, LOOPBACK, port, str(data), params.appendfsync, replica_of)
            )
            node = cluster.add(
                ManagedProcess(
                    f"redis {name}", [binary, str(conf)], cluster.workdir / f"{name}.log"
                )
            )
            wait_for_port(node, LOOPBACK, port, timeout=30)
        cluster.endpoints = Endpoints(hosts=tuple(f"{LOOPBACK}:{p}" for p in ports))
        if replicated:
            _wait_for_replicas(cluster.endpoints, len(names) - 1)


def _wait_for_replicas(endpoints: Endpoints, count: int) -> None:
    import redis

    host, port = endpoints.first
    client = redis.Redis(host=host, port=port)

    def ready() -> bool:
        info = client.info("replication")
        online = [v for k, v in info.items() if k.startswith("slave") and isinstance(v, dict)]
        return sum(1 for r in online if r.get("state") == "online") >= count

    wait_until(ready, f"{count} Redis replicas", timeout=30)
