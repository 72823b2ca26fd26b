"""Artemis node layout and configuration files, shared by the local cluster and AWS nodes.

A broker instance is made by ``artemis create`` (scripts, users, JVM profile) and its
``etc/broker.xml`` is then replaced by ``templates/broker.xml.j2`` rendered for one
:class:`NodeConfig`. Both the local deployment and the cloud recipe go through
:func:`create_command` and :func:`render_broker_xml`; they differ only in addresses,
paths and sizes.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from brokers import templating
from brokers.base import Endpoints

ARTEMIS_VERSION = "2.39.0"
DISTRIBUTION = f"apache-artemis-{ARTEMIS_VERSION}"
#: Credentials brokerbench sets on every instance it creates (loopback / private subnet only).
USER = "brokerbench"
PASSWORD = "brokerbench"
CLUSTER_USER = "brokerbench-cluster"
CLUSTER_PASSWORD = "brokerbench-cluster"

Role = Literal["single", "live", "backup"]


@dataclass(frozen=True)
class NodeConfig:
    """One broker instance: its identity, addresses and sizes."""

    name: str
    role: Role
    group: str  # the live–backup pair it belongs to ("" for a single broker)
    host: str
    port: int  # the acceptor: STOMP clients and CORE cluster traffic
    http_port: int  # embedded web server (Jolokia management API)
    data_dir: str
    peers: tuple[str, ...] = ()  # host:port of every other node of the cluster
    heap: str = "512m"
    journal_type: str = "NIO"
    journal_buffer_timeout_ns: int = 500_000
    journal_file_size: str = "10M"
    max_disk_usage: int = 95
    stomp_consumer_credit: int = 10240

    @property
    def clustered(self) -> bool:
        return self.role != "single"

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def http_address(self) -> str:
        return f"{self.host}:{self.http_port}"


def pair_nodes(
    hosts: list[tuple[str, int, int]],
    data_dir: str | None = None,
    *,
    single: bool = False,
    **sizes: object,
) -> list[NodeConfig]:
    """Nodes for ``(host, port, http_port)`` triples: live0, backup0, live1, backup1, ….

    With ``single`` the one triple becomes a broker without HA. ``data_dir`` defaults to
    ``data`` inside each instance; a ``{name}`` placeholder in it is filled per node.
    """
    if single:
        if len(hosts) != 1:
            raise ValueError("a single broker takes exactly one address")
        (host, port, http_port) = hosts[0]
        data = (data_dir or "data").format(name="broker0")
        return [NodeConfig("broker0", "single", "", host, port, http_port, data, **sizes)]  # type: ignore[arg-type]
    if not hosts or len(hosts) % 2:
        raise ValueError("a replicated cluster takes live–backup pairs (an even number of nodes)")
    everyone = [f"{h}:{p}" for h, p, _ in hosts]
    nodes = []
    for index, (host, port, http_port) in enumerate(hosts):
        pair, is_backup = divmod(index, 2)
        name = f"{'backup' if is_backup else 'live'}{pair}"
        nodes.append(
            NodeConfig(
                name=name,
                role="backup" if is_backup else "live",
                group=f"pair{pair}",
                host=host,
                port=port,
                http_port=http_port,
                data_dir=(data_dir or "data").format(name=name),
                peers=tuple(a for a in everyone if a != f"{host}:{port}"),
                **sizes,  # type: ignore[arg-type]
            )
        )
    return nodes


def render_broker_xml(node: NodeConfig, cluster_password: str = CLUSTER_PASSWORD) -> str:
    return templating.render(
        __file__,
        "broker.xml.j2",
        trim_blocks=True,
        node=node,
        cluster_user=CLUSTER_USER,
        cluster_password=cluster_password,
    )


def create_command(
    artemis: str,
    instance: str,
    node: NodeConfig,
    password: str = PASSWORD,
    cluster_password: str = CLUSTER_PASSWORD,
    relax_jolokia: bool = True,
) -> list[str]:
    """``artemis create`` for one node, non-interactive (its broker.xml is replaced after).

    ``relax_jolokia`` lets Jolokia answer requests of any origin (local nodes only); without
    it only the broker's own HTTP host is an allowed origin, which is what the adapter sends.
    """
    return [
        artemis,
        "create",
        "--silent",
        "--force",
        "--user",
        USER,
        "--password",
        password,
        "--require-login",
        "--role",
        "amq",
        "--name",
        node.name,
        "--host",
        node.host,
        "--default-port",
        str(node.port),
        "--http-host",
        node.host,
        "--http-port",
        str(node.http_port),
        *(["--relax-jolokia"] if relax_jolokia else []),
        "--java-memory",
        node.heap.upper(),
        "--nio" if node.journal_type == "NIO" else "--aio",
        "--no-autotune",
        "--no-amqp-acceptor",
        "--no-mqtt-acceptor",
        "--no-hornetq-acceptor",
        "--no-stomp-acceptor",
        *(
            [
                "--clustered",
                "--replicated",
                *(["--backup"] if node.role == "backup" else []),
                "--cluster-user",
                CLUSTER_USER,
                "--cluster-password",
                cluster_password,
                "--static-cluster",
                ",".join(f"tcp://{p}" for p in node.peers),
            ]
            if node.clustered
            else []
        ),
        instance,
    ]


def endpoints_for(nodes: list[NodeConfig], password: str = PASSWORD) -> Endpoints:
    """Where clients and management connect (see :mod:`brokers.artemis.adapter`).

    An empty ``password`` leaves it out (clients get it from elsewhere, as on AWS).
    """
    lives = [n for n in nodes if n.role != "backup"]
    backups = [n for n in nodes if n.role == "backup"]
    extra = {
        "backups": ",".join(b.address for b in backups),
        "jolokia": ",".join(n.http_address for n in lives),
        "jolokia_backups": ",".join(b.http_address for b in backups),
        "password": password,
        "user": USER,
    }
    return Endpoints(
        hosts=tuple(n.address for n in lives),
        extra=tuple((key, value) for key, value in extra.items() if value or key != "password"),
    )
