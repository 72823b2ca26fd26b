"""PostgreSQL nodes on AWS: Debian's pinned PostgreSQL, configured from the same
``postgresql.conf.j2`` and ``pg_hba.conf.j2`` as the local cluster.

Only addresses, paths and sizes differ: the servers listen on their private address, every
connection from the benchmark subnet authenticates with ``scram-sha-256`` (the ``postgres``
role's password is the stack's broker password, set in single-user mode before the primary
first starts; standbys read it from a 0600 password file), and shared buffers fit the
instance. The primary starts first; each standby waits for it, clones it with
``pg_basebackup`` and streams from it under its application name (``s1``, ``s2``), which the
primary's ``synchronous_standby_names = 'ANY 1 (s1, s2)'`` names.
"""

from __future__ import annotations

import ipaddress
from typing import TYPE_CHECKING

from brokers import templating
from brokers.base import Endpoints
from brokers.cloud import BROKER_PASSWORD, CloudFaults, CloudRecipe, shell_wait
from brokers.postgresql import local

if TYPE_CHECKING:
    from brokers.postgresql.params import PostgresParams

VERSION = "15"  # Debian 12's PostgreSQL
PORT = 5432
CONF_DIR = f"/etc/postgresql/{VERSION}/main"
DATA_ROOT = "/var/lib/postgresql"
DATA_DIR = f"{DATA_ROOT}/{VERSION}/main"
SERVICE = f"postgresql@{VERSION}-main"
BIN_DIR = f"/usr/lib/postgresql/{VERSION}/bin"
#: The password file of the ``postgres`` OS user (standbys: base backup and streaming).
PASSFILE = f"{DATA_ROOT}/.pgpass"
AUTH = "scram-sha-256"
#: Sizes on the reference instance (r5.2xlarge, 64 GiB): a quarter of memory for buffers.
SHARED_BUFFERS = "16GB"
MAX_CONNECTIONS = 300
#: How long a standby waits for its primary to accept connections.
PRIMARY_WAIT_S = 1800


def standby_name(index: int) -> str:
    return f"s{index + 1}"


def subnet_of(address: str) -> str:
    """The /24 all benchmark nodes share (brokers and clients sit in one subnet's first 256)."""
    return str(ipaddress.ip_network(f"{address}/24", strict=False))


def render_node_config(
    role: str, index: int, cluster: dict[str, list[str]], shared_buffers: str = SHARED_BUFFERS
) -> str:
    """``postgresql.conf`` settings of one AWS node (the local template, AWS values)."""
    primary = cluster["primary"][0]
    if role == "primary":
        name = "primary"
        address = primary
        standbys = [standby_name(i) for i in range(len(cluster.get("standby", [])))]
        conninfo = ""
    else:
        name = standby_name(index)
        address = cluster["standby"][index]
        standbys = []
        conninfo = (
            f"host={primary} port={PORT} user=postgres application_name={name} passfile={PASSFILE}"
        )
    return templating.render(
        local.__file__,
        "postgresql.conf.j2",
        role=role,
        name=name,
        listen_address=f"{address},127.0.0.1",
        port=PORT,
        socket_dir="",
        max_connections=MAX_CONNECTIONS,
        shared_buffers=shared_buffers,
        synchronous_commit="remote_write" if standbys else "on",
        synchronous_standby_names=f"ANY 1 ({', '.join(standbys)})" if standbys else "",
        primary_conninfo=conninfo,
    )


class PostgresCloud(CloudRecipe["PostgresParams"]):
    """A primary and streaming standbys (roles ``primary`` and ``standby``)."""

    #: Where the node's data volume is mounted (before the package creates its cluster).
    data_dir = DATA_ROOT
    #: No automatic fail-over: the primary, node 0, always leads.
    faults = CloudFaults(f"{SERVICE}.service", ("primary", "standby"), fails_over=False, leader=0)
    service_user = "postgres"

    def install_commands(self) -> list[str]:
        return [
            f"DEBIAN_FRONTEND=noninteractive apt-get install -y postgresql-{VERSION}",
            f"chown postgres:postgres {DATA_ROOT}",
        ]

    def node_files(
        self, role: str, index: int, cluster: dict[str, list[str]], params: PostgresParams
    ) -> dict[str, str]:
        return {
            f"{CONF_DIR}/conf.d/brokerbench.conf": render_node_config(role, index, cluster),
            f"{CONF_DIR}/pg_hba.conf": templating.render(
                local.__file__,
                "pg_hba.conf.j2",
                client_cidr=subnet_of(cluster["primary"][0]),
                auth=AUTH,
            ),
            PASSFILE: f"*:{PORT}:*:postgres:{BROKER_PASSWORD.placeholder}\n",
        }

    def start_commands(self, role: str, index: int, cluster: dict[str, list[str]]) -> list[str]:
        ready_local = shell_wait(f"pg_isready -q -h 127.0.0.1 -p {PORT}", 300, pause_s=1)
        if role == "primary":
            # Single-user mode needs no connection, so no authentication: the password is
            # read from the script's environment through a pipe, never from a command line.
            set_password = (
                "printf \"ALTER ROLE postgres PASSWORD '%s';\\n\" "
                f"{BROKER_PASSWORD.shell} | runuser -u postgres -- {BIN_DIR}/postgres --single"
                f" -D {DATA_DIR} -c config_file={CONF_DIR}/postgresql.conf postgres >/dev/null"
            )
            return [
                f"systemctl stop {SERVICE}",
                set_password,
                f"systemctl start {SERVICE}",
                ready_local,
            ]
        primary = cluster["primary"][0]
        return [
            f"systemctl stop {SERVICE}",
            shell_wait(f"pg_isready -q -h {primary} -p {PORT}", PRIMARY_WAIT_S),
            f"rm -rf {DATA_DIR}",
            f"runuser -u postgres -- env PGPASSFILE={PASSFILE} pg_basebackup -h {primary}"
            f" -p {PORT} -U postgres -w -D {DATA_DIR} -X stream",
            f"runuser -u postgres -- touch {DATA_DIR}/standby.signal",
            f"runuser -u postgres -- truncate -s 0 {DATA_DIR}/postgresql.auto.conf",
            f"systemctl start {SERVICE}",
            ready_local,
        ]

    def ports(self) -> list[int]:
        return [PORT]

    def endpoints(self, cluster: dict[str, list[str]]) -> Endpoints:
        """The primary first (the adapter's connection), then the standbys."""
        nodes = cluster["primary"] + cluster.get("standby", [])
        return Endpoints(
            hosts=tuple(f"{address}:{PORT}" for address in nodes),
            extra=(("dbname", "postgres"), ("user", "postgres")),
        )
