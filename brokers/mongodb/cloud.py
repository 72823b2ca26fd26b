"""MongoDB on AWS: a 3-member replica set (role ``mongod``) of the pinned MongoDB
Community Server from MongoDB's Debian repository, configured from ``mongod.conf.j2``.

Every node starts ``mongod``; the last one waits for its peers, initiates the replica set,
waits for a primary and sets the cluster-wide default write concern to ``majority``
(the adapter also sets it, with ``j``, on every write).
"""

from __future__ import annotations

import json
import shlex
from typing import TYPE_CHECKING, Any

from brokers import templating
from brokers.base import Endpoints
from brokers.cloud import CloudFaults, CloudRecipe, shell_wait

if TYPE_CHECKING:
    from brokers.mongodb.params import MongoParams

VERSION = "7.0.14"
SERIES = "7.0"
PORT = 27017
REPLICA_SET = "rs0"
ROLE = "mongod"
DATA_DIR = "/var/lib/mongodb"
CONF = "/etc/mongod.conf"
#: WiredTiger cache on the reference instance (r5.2xlarge, 64 GiB): about half the memory.
CACHE_SIZE_GB = 30
#: How long the last node waits for its peers and for a primary.
PEER_WAIT_S = 1800


def render_node_config(index: int, cluster: dict[str, list[str]]) -> str:
    address = cluster[ROLE][index]
    return templating.render(
        __file__,
        "mongod.conf.j2",
        name=f"{ROLE}-{index}",
        data_dir=DATA_DIR,
        cache_size_gb=CACHE_SIZE_GB,
        log_path="/var/log/mongodb/mongod.log",
        port=PORT,
        bind_ip=f"{address},127.0.0.1",
        replica_set=REPLICA_SET,
    )


def initiate_document(cluster: dict[str, list[str]]) -> dict[str, Any]:
    return {
        "_id": REPLICA_SET,
        "members": [
            {"_id": i, "host": f"{address}:{PORT}"} for i, address in enumerate(cluster[ROLE])
        ],
    }


def _ping(host: str) -> str:
    """A shell condition: the ``mongod`` at ``host`` answers."""
    ping = "db.adminCommand({ping: 1})"
    return f"mongosh --quiet --host {host} --port {PORT} --eval '{ping}' >/dev/null 2>&1"


class MongoCloud(CloudRecipe["MongoParams"]):
    """Three ``mongod`` replica-set members; the last initiates the set."""

    data_dir = DATA_DIR
    faults = CloudFaults("mongod.service", (ROLE,))

    def install_commands(self) -> list[str]:
        keyring = f"/usr/share/keyrings/mongodb-server-{SERIES}.gpg"
        repo = (
            f"deb [ signed-by={keyring} ] http://repo.mongodb.org/apt/debian "
            f"bookworm/mongodb-org/{SERIES} main"
        )
        return [
            "DEBIAN_FRONTEND=noninteractive apt-get install -y gnupg curl",
            f"curl -fsSL https://www.mongodb.org/static/pgp/server-{SERIES}.asc"
            f" | gpg --dearmor --yes -o {keyring}",
            f"echo {shlex.quote(repo)} > /etc/apt/sources.list.d/mongodb-org-{SERIES}.list",
            "apt-get update",
            "DEBIAN_FRONTEND=noninteractive apt-get install -y"
            f" mongodb-org-server={VERSION} mongodb-mongosh",
            f"mkdir -p {DATA_DIR} /var/log/mongodb",
            f"chown -R mongodb:mongodb {DATA_DIR} /var/log/mongodb",
        ]

    def node_files(
        self, role: str, index: int, cluster: dict[str, list[str]], params: MongoParams
    ) -> dict[str, str]:
        return {CONF: render_node_config(index, cluster)}

    def start_commands(self, role: str, index: int, cluster: dict[str, list[str]]) -> list[str]:
        commands = [
            "systemctl enable mongod",
            "systemctl restart mongod",
            shell_wait(_ping("127.0.0.1"), 300, pause_s=1),
        ]
        if index != len(cluster[ROLE]) - 1:
            return commands
        commands += [shell_wait(_ping(address), PEER_WAIT_S) for address in cluster[ROLE][:-1]]
        initiate = f"rs.initiate({json.dumps(initiate_document(cluster))})"
        primary = "mongosh --quiet --eval 'db.hello().isWritablePrimary' | grep -q true"
        default_wc = (
            "db.adminCommand({setDefaultRWConcern: 1, "
            'defaultWriteConcern: {w: "majority", j: true}})'
        )
        commands += [
            f"mongosh --quiet --eval {shlex.quote(initiate)}",
            shell_wait(primary, PEER_WAIT_S),
            f"mongosh --quiet --eval {shlex.quote(default_wc)}",
        ]
        return commands

    def ports(self) -> list[int]:
        return [PORT]

    def endpoints(self, cluster: dict[str, list[str]]) -> Endpoints:
        """Every member; pymongo finds the primary through the replica set's name."""
        return Endpoints(
            hosts=tuple(f"{address}:{PORT}" for address in cluster[ROLE]),
            extra=(("database", "brokerbench"), ("replica_set", REPLICA_SET)),
        )
