"""ActiveMQ Classic on AWS: the Debian/Ubuntu package and the same configuration templates.

One broker node (role ``broker``); no replication. It runs as a systemd service with an
explicit heap and its own base directory, exactly as locally. Its user's password is the
stack's broker password (read from the parameter store at boot).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from brokers.activemq import config
from brokers.base import Endpoints
from brokers.cloud import BROKER_PASSWORD, CloudRecipe, systemd_unit

if TYPE_CHECKING:
    from brokers.activemq.params import ActiveMQParams

PORT = 61613
BASE = "/var/lib/brokerbench-activemq"


def _node(cluster: dict[str, list[str]], heap: str) -> config.NodeConfig:
    return config.NodeConfig(
        name="brokerbench",
        host=cluster["broker"][0],
        port=PORT,
        base_dir=BASE,
        heap=heap,
        store_limit="200 gb",
        temp_limit="50 gb",
        queue_memory_limit="1 gb",
    )


class ActiveMQCloud(CloudRecipe["ActiveMQParams"]):
    """cloud-init pieces for the ActiveMQ Classic node (r5.2xlarge: heap 16 GiB)."""

    heap = "16g"

    def install_commands(self) -> list[str]:
        packages = " ".join(("activemq", "libxstream-java", "libjettison-java"))
        return [
            "apt-get update",
            f"apt-get install -y openjdk-17-jre-headless {packages}",
            # The package's own service instance is not used.
            "systemctl disable --now activemq || true",
        ]

    def node_files(
        self, role: str, index: int, cluster: dict[str, list[str]], params: ActiveMQParams
    ) -> dict[str, str]:
        node = _node(cluster, self.heap)
        command = " ".join(config.broker_command(node, java="/usr/bin/java"))
        unit = systemd_unit(
            "ActiveMQ Classic (brokerbench)", f"WorkingDirectory={BASE}", f"ExecStart={command}"
        )
        return {
            **config.configuration_files(node, BROKER_PASSWORD.placeholder),
            "/etc/systemd/system/brokerbench-activemq.service": unit,
        }

    def start_commands(self, role: str, index: int, cluster: dict[str, list[str]]) -> list[str]:
        return [
            f"mkdir -p {BASE}/data {BASE}/tmp",
            "systemctl daemon-reload",
            "systemctl enable --now brokerbench-activemq",
        ]

    def ports(self) -> list[int]:
        return [PORT]

    def endpoints(self, cluster: dict[str, list[str]]) -> Endpoints:
        return Endpoints(
            hosts=(f"{cluster['broker'][0]}:{PORT}",),
            extra=(("user", config.USER),),
        )
