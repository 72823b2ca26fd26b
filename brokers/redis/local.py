"""Redis on this machine, each server with AOF on, on free loopback ports in a private
directory: one master (``single``), a master with two replicas (``cluster``), or Redis
Cluster of 3 shards × (master + 2 replicas) (``sharded``), made with
``redis-cli --cluster create``.

Every server requires the run's password (``requirepass``, Redis's ``default`` user, see
:mod:`brokers.credentials`) and replicas give it to their master (``masterauth``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from brokers import templating
from brokers.base import (
    Destination,
    Endpoints,
    FaultSupport,
    LocalDeployment,
    ParamProblem,
)
from brokers.credentials import Credentials, generate, write_private
from brokers.local import (
    ManagedProcess,
    NodeHosts,
    ProcessCluster,
    find_binary,
    free_ports,
    port_open,
    run_checked,
    start_cluster,
    unavailable,
    wait_for_port,
    wait_until,
)

if TYPE_CHECKING:
    from brokers.redis.params import RedisParams

SHARDS = 3
REPLICAS_PER_SHARD = 2
#: Replicas of the master in the ``cluster`` topology.
CLUSTER_REPLICAS = 2
#: Redis's built-in user: ``requirepass`` gives it the run's password.
USER = "default"
#: The process name of the master of the ``single`` and ``cluster`` topologies.
MASTER = "redis master"


def render_config(
    name: str,
    bind: str,
    port: int,
    data_dir: str,
    appendfsync: str,
    replica_of: str = "",
    cluster_enabled: bool = False,
    cluster_port: int = 0,
    password: str = "",
) -> str:
    """redis.conf of one node; used locally and (with other addresses) on AWS.

    A ``password`` (locally: the run's) is required of clients and given to the master.
    """
    return templating.render(
        __file__,
        "redis.conf.j2",
        name=name,
        bind=bind,
        port=port,
        data_dir=data_dir,
        appendfsync=appendfsync,
        replica_of=replica_of,
        cluster_enabled=cluster_enabled,
        cluster_port=cluster_port,
        password=password,
    )


class ReplicatedRedis(ProcessCluster):
    """A master and its replicas. Nothing promotes a replica here (no Sentinel): the
    master always leads, and while it is down the streams are unavailable."""

    def leader(self, destination: Destination) -> str:
        return MASTER


class RedisLocal(LocalDeployment["RedisParams"]):
    topologies = ("single", "cluster", "sharded")
    debian_packages = ("redis-server",)

    def param_problems(self, topology: str, params: RedisParams) -> list[ParamProblem]:
        """WAIT counts the replicas of the master a stream is on."""
        replicas = {"single": 0, "cluster": CLUSTER_REPLICAS, "sharded": REPLICAS_PER_SHARD}[
            topology
        ]
        if params.wait_replicas <= replicas:
            return []
        return [
            ParamProblem(
                "wait_replicas",
                f"{params.wait_replicas} replicas to WAIT for on topology {topology!r}, where a "
                f"master has {replicas}: every batch would time out; at most {replicas}",
            )
        ]

    def fault_support(self, topology: str) -> FaultSupport | None:
        if topology == "sharded":
            return None
        return FaultSupport(
            nodes=1 + CLUSTER_REPLICAS if topology == "cluster" else 1,
            leader="the master (node 0)",
            follower="a replica",
            fails_over=False,
            isolates=True,
            power_loss=True,
        )

    def missing(self) -> str | None:
        return unavailable(lambda: find_binary("redis-server", "redis-server"))

    def start(
        self, topology: str, params: RedisParams, workdir: Path, hosts: NodeHosts | None = None
    ) -> ProcessCluster:
        kind = ProcessCluster if topology == "sharded" else ReplicatedRedis
        cluster = kind(topology, workdir, hosts=hosts)
        credentials = generate(USER)
        if topology == "sharded":
            return start_cluster(cluster, lambda c: self._build_sharded(c, params, credentials))
        return start_cluster(
            cluster, lambda c: self._build(c, params, credentials, topology == "cluster")
        )

    def _server(
        self,
        cluster: ProcessCluster,
        slot: int,
        name: str,
        port: int,
        params: RedisParams,
        credentials: Credentials,
        **config: Any,
    ) -> ManagedProcess:
        data = cluster.workdir / name
        data.mkdir(parents=True, exist_ok=True)
        host = cluster.host(slot)
        text = render_config(
            name,
            host,
            port,
            str(data),
            params.appendfsync,
            password=credentials.password,
            **config,
        )
        conf = write_private(data / "redis.conf", text)
        binary = find_binary("redis-server", "redis-server")
        node = cluster.add(
            ManagedProcess(
                f"redis {name}",
                [binary, str(conf)],
                cluster.workdir / f"{name}.log",
                ready=lambda: port_open(host, port),
                data_dir=data,
            ),
            slot=slot,
        )
        wait_for_port(node, host, port, timeout=30)
        return node

    def _build_sharded(
        self, cluster: ProcessCluster, params: RedisParams, credentials: Credentials
    ) -> None:
        count = SHARDS * (1 + REPLICAS_PER_SHARD)
        # The cluster bus needs a port of its own (by default port + 10000, often taken);
        # all from one call, so that no bus port is another node's client port.
        every = free_ports(2 * count)
        ports, bus_ports = every[:count], every[count:]
        for i, (port, bus) in enumerate(zip(ports, bus_ports, strict=True)):
            self._server(
                cluster,
                i,
                f"node{i}",
                port,
                params,
                credentials,
                cluster_enabled=True,
                cluster_port=bus,
            )
        # The first SHARDS addresses become masters, the rest their replicas.
        run_checked(
            [
                find_binary("redis-cli", "redis-tools"),
                "--cluster",
                "create",
                *(f"{cluster.host(i)}:{p}" for i, p in enumerate(ports)),
                "--cluster-replicas",
                str(REPLICAS_PER_SHARD),
                "--cluster-yes",
            ],
            "redis-cli --cluster create",
            # From the environment, not the command line other users can read.
            env={**os.environ, "REDISCLI_AUTH": credentials.password},
        )
        cluster.endpoints = Endpoints(
            hosts=tuple(f"{cluster.host(i)}:{p}" for i, p in enumerate(ports[:SHARDS])),
            extra=(("mode", "cluster"), *credentials.extra()),
        )
        _wait_for_cluster(cluster.endpoints, count)

    def _build(
        self,
        cluster: ProcessCluster,
        params: RedisParams,
        credentials: Credentials,
        replicated: bool,
    ) -> None:
        replicas = CLUSTER_REPLICAS if replicated else 0
        names = ["master", *(f"replica{i}" for i in range(1, replicas + 1))]
        ports = free_ports(len(names))
        for i, (name, port) in enumerate(zip(names, ports, strict=True)):
            replica_of = "" if name == "master" else f"{cluster.host(0)} {ports[0]}"
            self._server(cluster, i, name, port, params, credentials, replica_of=replica_of)
        cluster.endpoints = Endpoints(
            hosts=tuple(f"{cluster.host(i)}:{p}" for i, p in enumerate(ports)),
            extra=credentials.extra(),
        )
        if replicated:
            _wait_for_replicas(cluster.endpoints, len(names) - 1)


def _first_server(endpoints: Endpoints) -> Any:
    """A client of the first server, with the run's password."""
    import redis

    from brokers.redis.adapter import auth_options

    host, port = endpoints.first
    return redis.Redis(host=host, port=port, **auth_options(endpoints))


def _wait_for_replicas(endpoints: Endpoints, count: int) -> None:
    client = _first_server(endpoints)

    def ready() -> bool:
        info = client.info("replication")
        online = [v for k, v in info.items() if k.startswith("slave") and isinstance(v, dict)]
        return sum(1 for r in online if r.get("state") == "online") >= count

    wait_until(ready, f"{count} Redis replicas", timeout=30)


def _wait_for_cluster(endpoints: Endpoints, nodes: int) -> None:
    client = _first_server(endpoints)

    def ready() -> bool:
        info = client.cluster("info")
        if not isinstance(info, dict) or info.get("cluster_state") != "ok":
            return False
        flags = [n["flags"] for n in client.cluster("nodes").values()]
        return sum("slave" in f for f in flags) == nodes - SHARDS

    wait_until(ready, f"Redis Cluster ({SHARDS} shards, all replicas attached)", timeout=90)
