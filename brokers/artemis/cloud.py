"""Artemis on AWS: the same distribution, ``artemis create`` and ``broker.xml`` template as locally.

Roles: ``live`` and ``backup`` (the reference topology is 3 + 3); backup ``i`` replicates
live ``i`` (replication group ``pair<i>``). Every node knows every other one through
static connectors. The broker runs as a systemd service with an explicit heap. The
``brokerbench`` user's password and the cluster password are the stack's secrets (read from
the parameter store at boot); Jolokia answers only requests from the broker's own origin.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from brokers.artemis import config
from brokers.base import Endpoints
from brokers.cloud import BROKER_PASSWORD, CLUSTER_SECRET, CloudRecipe, systemd_unit

if TYPE_CHECKING:
    from brokers.artemis.params import ArtemisParams

PORT = 61616
HTTP_PORT = 8161
INSTANCE = "/var/lib/artemis/instance"
DATA = "/var/lib/artemis/data"
STAGED_BROKER_XML = "/etc/brokerbench/artemis/broker.xml"
MAVEN_CENTRAL = "https://repo1.maven.org/maven2"


def _node(
    role: str, index: int, cluster: dict[str, list[str]], params: Any = None, heap: str = "16g"
) -> config.NodeConfig:
    lives, backups = cluster.get("live", []), cluster.get("backup", [])
    if not backups:  # a lone broker without HA
        return config.pair_nodes(
            [(lives[0], PORT, HTTP_PORT)], DATA, single=True, heap=heap, **_sizes(params)
        )[0]
    triples = []
    for live, backup in zip(lives, backups, strict=True):
        triples += [(live, PORT, HTTP_PORT), (backup, PORT, HTTP_PORT)]
    nodes = config.pair_nodes(triples, DATA, heap=heap, **_sizes(params))
    return nodes[2 * index + (1 if role == "backup" else 0)]


def _sizes(params: Any) -> dict[str, Any]:
    sizes: dict[str, Any] = {"journal_type": "ASYNCIO"}
    if params is not None:
        sizes["stomp_consumer_credit"] = max(params.consumer_window_size, 1024)
    return sizes


class ArtemisCloud(CloudRecipe["ArtemisParams"]):
    """cloud-init pieces for one Artemis node (r5.2xlarge: 64 GiB, heap 16 GiB)."""

    heap = "16g"

    def install_commands(self) -> list[str]:
        version = config.ARTEMIS_VERSION
        url = (
            f"{MAVEN_CENTRAL}/org/apache/activemq/apache-artemis/{version}/"
            f"{config.DISTRIBUTION}-bin.tar.gz"
        )
        return [
            "apt-get update",
            "apt-get install -y openjdk-17-jre-headless libaio1 curl",
            f"curl -fsSL {url} -o /tmp/artemis.tar.gz",
            "mkdir -p /opt && tar xzf /tmp/artemis.tar.gz -C /opt",
            f"ln -sfn /opt/{config.DISTRIBUTION} /opt/artemis",
        ]

    def node_files(
        self, role: str, index: int, cluster: dict[str, list[str]], params: ArtemisParams
    ) -> dict[str, str]:
        node = _node(role, index, cluster, params, self.heap)
        return {
            STAGED_BROKER_XML: config.render_broker_xml(node, CLUSTER_SECRET.placeholder),
            "/etc/systemd/system/artemis.service": systemd_unit(
                "ActiveMQ Artemis (brokerbench)",
                f"ExecStart={INSTANCE}/bin/artemis run",
                "Environment=JAVA_ARGS=",
            ),
        }

    def start_commands(self, role: str, index: int, cluster: dict[str, list[str]]) -> list[str]:
        node = _node(role, index, cluster, heap=self.heap)
        create = " ".join(
            config.create_command(
                "/opt/artemis/bin/artemis",
                INSTANCE,
                node,
                password=BROKER_PASSWORD.shell,
                cluster_password=CLUSTER_SECRET.shell,
                relax_jolokia=False,
            )
        )
        return [
            f"mkdir -p {DATA}",
            f"JAVA_ARGS='-Xmx256m' {create}",
            f"cp {STAGED_BROKER_XML} {INSTANCE}/etc/broker.xml",
            "systemctl daemon-reload",
            "systemctl enable --now artemis",
        ]

    def ports(self) -> list[int]:
        return [PORT, HTTP_PORT]

    def endpoints(self, cluster: dict[str, list[str]]) -> Endpoints:
        """Clients connect to the lives (each backup second); management on every node."""
        roles = ["live"] + (["backup"] if cluster.get("backup") else [])
        nodes = [_node(r, i, cluster) for r in roles for i in range(len(cluster[r]))]
        return config.endpoints_for(nodes, password="")
