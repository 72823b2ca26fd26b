"""EventStoreDB on AWS: a cluster of KurrentDB nodes (role ``node``, 3 in the reference
topology) from Kurrent's Debian package repository, configured from ``kurrentdb.conf.j2``.

The nodes find each other through gossip seeds (every other node's private address) and
elect a leader themselves; appends are confirmed by a quorum. Nodes run in insecure mode
(no TLS, no authentication): only the benchmark's security group can reach them.
"""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

from brokers import templating
from brokers.base import Endpoints
from brokers.cloud import CloudFaults, CloudRecipe, shell_wait

if TYPE_CHECKING:
    from brokers.eventstore.params import EventStoreParams

VERSION = "25.0.0"
REPOSITORY = "https://packages.kurrent.io/public/kurrent-latest/setup.deb.sh"
ROLE = "node"
HTTP_PORT = 2113
REPLICATION_PORT = 1112
DATA_DIR = "/var/lib/kurrentdb"
LOG_DIR = "/var/log/kurrentdb"
CONF = "/etc/kurrentdb/kurrentdb.conf"
SERVICE = "kurrentdb"


def render_node_config(index: int, cluster: dict[str, list[str]]) -> str:
    nodes = cluster[ROLE]
    address = nodes[index]
    return templating.render(
        __file__,
        "kurrentdb.conf.j2",
        index=index + 1,
        cluster_size=len(nodes),
        data_dir=DATA_DIR,
        log_dir=LOG_DIR,
        address=address,
        http_port=HTTP_PORT,
        replication_port=REPLICATION_PORT,
        seeds=[f"{other}:{HTTP_PORT}" for other in nodes if other != address],
    )


class EventStoreCloud(CloudRecipe["EventStoreParams"]):
    """KurrentDB cluster nodes; every node starts the same way."""

    data_dir = DATA_DIR
    faults = CloudFaults(f"{SERVICE}.service", (ROLE,))

    def install_commands(self) -> list[str]:
        return [
            "DEBIAN_FRONTEND=noninteractive apt-get install -y curl",
            f"curl -1sLf {shlex.quote(REPOSITORY)} | bash",
            f"DEBIAN_FRONTEND=noninteractive apt-get install -y kurrentdb={VERSION}",
            f"mkdir -p {DATA_DIR} {LOG_DIR}",
            # The data volume may be mounted before the package exists: hand it to the
            # service's user, whatever the package calls it.
            f'owner="$(systemctl show -p User --value {SERVICE})";'
            f' chown -R "${{owner:-root}}:" {DATA_DIR} {LOG_DIR}',
        ]

    def node_files(
        self, role: str, index: int, cluster: dict[str, list[str]], params: EventStoreParams
    ) -> dict[str, str]:
        return {CONF: render_node_config(index, cluster)}

    def start_commands(self, role: str, index: int, cluster: dict[str, list[str]]) -> list[str]:
        ready = f"curl -fsS http://127.0.0.1:{HTTP_PORT}/health/live >/dev/null"
        return [
            f"systemctl enable {SERVICE}",
            f"systemctl restart {SERVICE}",
            shell_wait(ready, 600),
        ]

    def ports(self) -> list[int]:
        return [HTTP_PORT, REPLICATION_PORT]

    def endpoints(self, cluster: dict[str, list[str]]) -> Endpoints:
        """Every node's HTTP/gRPC port as gossip seeds; the client finds the leader."""
        return Endpoints(
            hosts=tuple(f"{address}:{HTTP_PORT}" for address in cluster[ROLE]),
            extra=(("tls", "false"),),
        )
