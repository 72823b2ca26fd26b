"""RabbitMQ nodes on AWS: the Debian/Ubuntu package, the same configuration templates as
the local cluster (other addresses and sizes), and the same join with ``rabbitmqctl``.

Nodes are named ``rabbit@<private IP>`` (long names), so no DNS is needed between them.
The Erlang cookie is the stack's cluster secret and the ``brokerbench`` user's password the
stack's broker password (both generated per stack and read from the parameter store at
boot); ``guest`` does not exist. The management plugin stays off.
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

from brokers.base import Endpoints
from brokers.cloud import BROKER_PASSWORD, CLUSTER_SECRET, CloudFaults, CloudRecipe
from brokers.rabbitmq.local import render_config

if TYPE_CHECKING:
    from brokers.rabbitmq.params import RabbitMQParams

ROLE = "broker"
AMQP_PORT = 5672
ETC = "/etc/rabbitmq"
COOKIE = "/var/lib/rabbitmq/.erlang.cookie"


class RabbitMQCloud(CloudRecipe["RabbitMQParams"]):
    """Three ``broker`` nodes; the first starts alone, the others join it. Faults on AWS
    name node indexes only: the queue's leader is read with ``rabbitmqctl`` on a node."""

    faults = CloudFaults("rabbitmq-server.service", (ROLE,))

    #: Where the node's data volume is mounted (before the package is installed).
    data_dir = "/var/lib/rabbitmq"
    service_user = "rabbitmq"

    def __init__(self, version: str = "", user: str = "brokerbench") -> None:
        #: apt version string to pin (e.g. "3.10.8-1.1+deb12u1"); empty = the image's.
        self.version = version
        self.user = user

    def install_commands(self) -> list[str]:
        package = f"rabbitmq-server={self.version}" if self.version else "rabbitmq-server"
        return [
            "export DEBIAN_FRONTEND=noninteractive",
            "apt-get update -q",
            f"apt-get install -y -q {shlex.quote(package)}",
            # The package starts a node with its own name and cookie: start afresh.
            "systemctl stop rabbitmq-server || true",
            "rm -rf /var/lib/rabbitmq/mnesia",
        ]

    def node_files(
        self, role: str, index: int, cluster: dict[str, list[str]], params: RabbitMQParams
    ) -> dict[str, str]:
        address = cluster[ROLE][index]
        files = render_config(
            f"rabbit@{address}",
            "0.0.0.0",
            AMQP_PORT,
            default_user=self.user,
            default_pass=BROKER_PASSWORD.placeholder,
            disk_free_limit="2GB",
            cluster_name="brokerbench",
        )
        out = {f"{ETC}/{name}": content for name, content in files.items()}
        out[f"{ETC}/rabbitmq-env.conf"] = f"NODENAME=rabbit@{address}\nUSE_LONGNAME=true\n"
        out[COOKIE] = CLUSTER_SECRET.placeholder
        return out

    def start_commands(self, role: str, index: int, cluster: dict[str, list[str]]) -> list[str]:
        first = f"rabbit@{cluster[ROLE][0]}"
        commands = [
            f"chown rabbitmq:rabbitmq {COOKIE} && chmod 400 {COOKIE}",
            "systemctl enable rabbitmq-server",
            "systemctl restart rabbitmq-server",
            "rabbitmqctl await_startup --timeout 600",
        ]
        if index > 0:
            commands += [
                # Wait (up to 20 min) for the first node, then join it.
                f"for i in $(seq 240); do rabbitmqctl -n {first} await_startup --timeout 5 "
                "&& break; sleep 5; done",
                "rabbitmqctl stop_app",
                f"rabbitmqctl join_cluster {first}",
                "rabbitmqctl start_app",
            ]
        return commands

    def ports(self) -> list[int]:
        # AMQP, epmd, inter-node distribution, CLI tool distribution range.
        return [AMQP_PORT, 4369, 25672, *range(35672, 35683)]

    def endpoints(self, cluster: dict[str, list[str]]) -> Endpoints:
        """Every node's AMQP listener, with the user the nodes were configured with."""
        return Endpoints(
            hosts=tuple(f"{address}:{AMQP_PORT}" for address in cluster[ROLE]),
            extra=(("user", self.user),),
        )
