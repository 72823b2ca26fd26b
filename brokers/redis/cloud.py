"""Redis nodes on AWS: Debian's pinned ``redis-server``, configured from the same
``redis.conf.j2`` as the local servers (AOF on, the scenario's fsync policy).

Only addresses, paths and sizes differ. With one master (the reference topology) the
replicas follow it (``replicaof``; replication is asynchronous). With several masters
(the ``redis-cluster`` stack: 3 masters + 6 replicas) every node runs in cluster mode and
the last node creates the cluster with ``redis-cli --cluster create``, giving each master
``replicas / masters`` replicas. Clients and replicas authenticate with the stack's broker
password (``requirepass`` / ``masterauth``, read from the parameter store at boot).
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

from brokers import templating
from brokers.base import Endpoints
from brokers.cloud import BROKER_PASSWORD, CloudFaults, CloudRecipe
from brokers.redis import local

if TYPE_CHECKING:
    from brokers.redis.params import RedisParams

PORT = 6379
BUS_PORT = PORT + 10000
DATA_DIR = "/var/lib/redis"
CONF = "/etc/redis/redis.conf"  # what Debian's redis-server.service runs
SERVICE = "redis-server"
#: How long the initialising node waits for every other node to answer.
NODES_WAIT_S = 1800


def is_sharded(cluster: dict[str, list[str]]) -> bool:
    return len(cluster.get("master", [])) > 1


def render_node_config(
    role: str, index: int, cluster: dict[str, list[str]], appendfsync: str
) -> str:
    """``redis.conf`` of one AWS node (the local template, AWS values)."""
    address = cluster[role][index]
    sharded = is_sharded(cluster)
    replica_of = "" if role == "master" or sharded else f"{cluster['master'][0]} {PORT}"
    return templating.render(
        local.__file__,
        "redis.conf.j2",
        name=f"{role}{index + 1}" if role == "replica" else role,
        bind=f"{address} 127.0.0.1",
        port=PORT,
        data_dir=DATA_DIR,
        appendfsync=appendfsync,
        replica_of=replica_of,
        cluster_enabled=sharded,
        password=BROKER_PASSWORD.placeholder,
    )


def all_nodes(cluster: dict[str, list[str]]) -> list[str]:
    """Masters first, then replicas: the order ``redis-cli --cluster create`` expects."""
    return list(cluster.get("master", [])) + list(cluster.get("replica", []))


def initialiser(cluster: dict[str, list[str]]) -> tuple[str, int]:
    """The node that creates the cluster: the last replica, else the last master."""
    if cluster.get("replica"):
        return "replica", len(cluster["replica"]) - 1
    return "master", len(cluster["master"]) - 1


class RedisCloud(CloudRecipe["RedisParams"]):
    """Roles ``master`` and ``replica``: one master with replicas, or a sharded cluster."""

    #: Where the node's data volume is mounted (the AOF lives here).
    data_dir = DATA_DIR
    #: A master and its replicas, nothing promotes a replica (no Sentinel): the master,
    #: node 0, always leads.
    faults = CloudFaults(f"{SERVICE}.service", ("master", "replica"), fails_over=False, leader=0)

    def faults_for(self, roles: dict[str, int]) -> CloudFaults | None:
        """None for Redis Cluster (several masters): not supported yet."""
        return None if roles.get("master", 0) > 1 else self.faults

    service_user = "redis"

    def install_commands(self) -> list[str]:
        return [
            "DEBIAN_FRONTEND=noninteractive apt-get install -y redis-server redis-tools",
            f"systemctl stop {SERVICE}",
            f"chown redis:redis {DATA_DIR}",
        ]

    def node_files(
        self, role: str, index: int, cluster: dict[str, list[str]], params: RedisParams
    ) -> dict[str, str]:
        appendfsync = getattr(params, "appendfsync", "everysec")
        return {CONF: render_node_config(role, index, cluster, appendfsync)}

    def start_commands(self, role: str, index: int, cluster: dict[str, list[str]]) -> list[str]:
        commands = [
            f"export REDISCLI_AUTH={BROKER_PASSWORD.shell}",  # for every redis-cli below
            f"chown root:redis {CONF}",
            f"chmod 0640 {CONF}",
            f"systemctl restart {SERVICE}",
        ]
        if not is_sharded(cluster) or (role, index) != initialiser(cluster):
            return commands
        nodes = all_nodes(cluster)
        wait = " && ".join(
            f"until redis-cli -h {address} -p {PORT} ping 2>/dev/null | grep -q PONG; do sleep 2; done"
            for address in nodes
        )
        replicas = len(cluster.get("replica", [])) // len(cluster["master"])
        create = (
            "redis-cli --cluster create "
            + " ".join(f"{address}:{PORT}" for address in nodes)
            + f" --cluster-replicas {replicas} --cluster-yes"
        )
        return [*commands, f"timeout {NODES_WAIT_S} bash -c {shlex.quote(wait)}", create]

    def ports(self) -> list[int]:
        return [PORT, BUS_PORT]

    def endpoints(self, cluster: dict[str, list[str]]) -> Endpoints:
        """Replication: the master first, then the replicas. Sharded: every master, and
        ``mode = cluster`` for the adapter."""
        if is_sharded(cluster):
            return Endpoints(
                hosts=tuple(f"{address}:{PORT}" for address in cluster["master"]),
                extra=(("mode", "cluster"),),
            )
        return Endpoints(hosts=tuple(f"{address}:{PORT}" for address in all_nodes(cluster)))
