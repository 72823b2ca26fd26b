"""PostgreSQL on this machine: a private primary (``single``) or a primary with two
streaming standbys made by ``pg_basebackup`` (``cluster``), on free loopback ports.

The superuser is the run's generated user (:mod:`brokers.credentials`); every connection,
over TCP or the Unix socket, authenticates with its password (``scram-sha-256``). The
standbys and ``pg_basebackup`` read it from a private ``pgpass`` file (``PGPASSFILE``).

The server refuses to run as root, so as root the processes run as the ``postgres``
user that Debian's package creates.
"""

from __future__ import annotations

import glob
import os
import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from brokers import templating
from brokers.base import Destination, Endpoints, FaultSupport, LocalDeployment
from brokers.credentials import Credentials, generate, write_private
from brokers.errors import BrokerConnectionError, BrokerUnavailable
from brokers.local import (
    LOOPBACK,
    ManagedProcess,
    NodeHosts,
    ProcessCluster,
    find_binary,
    free_ports,
    port_open,
    run_checked,
    start_cluster,
    unavailable,
    wait_until,
)

if TYPE_CHECKING:
    from brokers.postgresql.params import PostgresParams

STANDBYS = ("s1", "s2")
#: The process name of the primary.
PRIMARY = "postgres primary"
#: How every connection authenticates (TCP and the Unix socket, replication included).
AUTH = "scram-sha-256"


def server_binary(name: str) -> str:
    """``name`` (``postgres``, ``initdb`` …) of the newest PostgreSQL installed."""
    newest_first = sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)
    return find_binary(name, "postgresql", newest_first)


def as_server_user() -> list[str]:
    """Prefix that runs a command as ``postgres`` when we are root."""
    if os.geteuid() != 0:
        return []
    if shutil.which("runuser") is None:
        raise BrokerUnavailable("runuser not found: install the Debian package util-linux")
    try:
        import pwd

        pwd.getpwnam("postgres")
    except KeyError:
        raise BrokerUnavailable(
            "user 'postgres' does not exist: install the Debian package postgresql"
        ) from None
    return ["runuser", "-u", "postgres", "--"]


def render_config(
    name: str,
    role: str,
    port: int,
    socket_dir: str,
    standbys: tuple[str, ...],
    primary_conninfo: str,
    listen_address: str = LOOPBACK,
) -> str:
    """postgresql.conf of one node; used locally and (with other addresses) on AWS."""
    sync_names = f"ANY 1 ({', '.join(standbys)})" if standbys else ""
    return templating.render(
        __file__,
        "postgresql.conf.j2",
        role=role,
        name=name,
        listen_address=listen_address,
        port=port,
        socket_dir=socket_dir,
        max_connections=300,
        shared_buffers="256MB",
        synchronous_commit="remote_write" if standbys else "on",
        synchronous_standby_names=sync_names,
        primary_conninfo=primary_conninfo,
    )


class PostgresCluster(ProcessCluster):
    """A primary and its standbys. There is no automatic fail-over: the primary always
    leads, and while it is down the queue is unavailable (a standby only reads)."""

    def leader(self, destination: Destination) -> str:
        return PRIMARY


class PostgresLocal(LocalDeployment["PostgresParams"]):
    topologies = ("single", "cluster")
    debian_packages = ("postgresql",)

    def fault_support(self, topology: str) -> FaultSupport:
        return FaultSupport(
            nodes=1 + len(STANDBYS) if topology == "cluster" else 1,
            leader="the primary (node 0)",
            follower="a streaming standby",
            fails_over=False,
            isolates=True,
            power_loss=True,
        )

    def missing(self) -> str | None:
        return unavailable(lambda: server_binary("postgres"), as_server_user)

    def start(
        self, topology: str, params: PostgresParams, workdir: Path, hosts: NodeHosts | None = None
    ) -> ProcessCluster:
        cluster = PostgresCluster(topology, workdir, hosts=hosts)
        return start_cluster(cluster, lambda c: self._build(c, topology == "cluster"))

    def _build(self, cluster: ProcessCluster, replicated: bool) -> None:
        cluster.workdir.mkdir(parents=True, exist_ok=True)
        workdir = cluster.workdir
        prefix = as_server_user()
        owner = "postgres" if prefix else ""
        if prefix:
            # The server user must reach its data: a private directory it owns, outside
            # whatever root-only directory the caller chose.
            workdir = cluster.private_dir("brokerbench-postgres-")
            shutil.chown(workdir, owner, owner)
        standbys = STANDBYS if replicated else ()
        ports = free_ports(1 + len(standbys))
        hosts = [cluster.host(i) for i in range(1 + len(standbys))]
        credentials = generate()
        pgpass = f"*:*:*:{credentials.user}:{credentials.password}\n"
        # libpq reads the password from here: pg_basebackup, and each standby's WAL receiver.
        passfile = {"PGPASSFILE": str(write_private(workdir / "pgpass", pgpass, owner))}

        def start_server(
            slot: int, name: str, role: str, sync_standbys: tuple[str, ...] = (), conninfo: str = ""
        ) -> None:
            """Configure the server whose data is ``workdir / name``, start it and wait until
            it accepts connections."""
            data = workdir / name
            (data / "postgresql.auto.conf").write_text("")
            (data / "postgresql.conf").write_text(
                render_config(
                    name, role, ports[slot], str(workdir), sync_standbys, conninfo, hosts[slot]
                )
            )
            (data / "pg_hba.conf").write_text(
                templating.render(
                    __file__, "pg_hba.conf.j2", client_cidr=cluster.hosts.network(), auth=AUTH
                )
            )
            server = ManagedProcess(
                name=f"postgres {name}",
                cmd=[*prefix, server_binary("postgres"), "-D", str(data)],
                log_path=workdir / f"{name}.log",
                env=passfile,
                ready=lambda: port_open(hosts[slot], ports[slot]),
                data_dir=data,
            )
            cluster.add(server, slot=slot)
            _wait_accepting(server, _endpoints([hosts[slot]], [ports[slot]], credentials))

        self._initdb(workdir / "primary", credentials, workdir, prefix, owner)
        start_server(0, "primary", "primary", standbys)
        for slot, name in enumerate(standbys, start=1):
            run_checked(
                [
                    *prefix,
                    server_binary("pg_basebackup"),
                    "-h",
                    hosts[0],
                    "-p",
                    str(ports[0]),
                    "-U",
                    credentials.user,
                    "-w",
                    "-D",
                    str(workdir / name),
                    "-X",
                    "stream",
                    "-R",
                ],
                f"pg_basebackup for standby {name}",
                env={**os.environ, **passfile},
            )
            conninfo = (
                f"host={hosts[0]} port={ports[0]} user={credentials.user} application_name={name}"
            )
            start_server(slot, name, "standby", conninfo=conninfo)
        cluster.endpoints = _endpoints(hosts, ports, credentials)
        if standbys:
            _wait_for_sync_standbys(cluster.endpoints, len(standbys))

    def _initdb(
        self, data: Path, credentials: Credentials, workdir: Path, prefix: list[str], owner: str
    ) -> None:
        """A new data directory whose superuser is the run's user, with its password."""
        pwfile = write_private(workdir / "initdb-password", credentials.password + "\n", owner)
        try:
            run_checked(
                [
                    *prefix,
                    server_binary("initdb"),
                    "-D",
                    str(data),
                    "-U",
                    credentials.user,
                    f"--pwfile={pwfile}",
                    f"--auth={AUTH}",
                    "--no-instructions",
                    "-E",
                    "UTF8",
                ],
                "initdb of the primary",
            )
        finally:
            pwfile.unlink(missing_ok=True)


def _endpoints(hosts: list[str], ports: list[int], credentials: Credentials) -> Endpoints:
    """The servers at these addresses (the primary first), reached with the run's
    credentials."""
    return Endpoints(
        hosts=tuple(f"{h}:{p}" for h, p in zip(hosts, ports, strict=True)),
        extra=(("dbname", "postgres"), *credentials.extra()),
    )


def _wait_accepting(node: ManagedProcess, endpoints: Endpoints, timeout: float = 90) -> None:
    """Wait until the server accepts connections (an open port may still be starting up)."""
    from brokers.postgresql.adapter import _connect

    def ready() -> bool:
        try:
            with _connect(endpoints, connect_timeout=2):
                return True
        except BrokerConnectionError:
            return False

    wait_until(ready, f"{node.name} ({endpoints.hosts[0]})", timeout, node)


def _wait_for_sync_standbys(endpoints: Endpoints, count: int, timeout: float = 60) -> None:
    """Wait until the primary reports ``count`` streaming standbys."""
    from brokers.postgresql.adapter import _connect

    def ready() -> bool:
        with _connect(endpoints, autocommit=True) as conn:
            row = conn.execute(
                "SELECT count(*) FROM pg_stat_replication WHERE state = 'streaming'"
            ).fetchone()
        return bool(row and row[0] >= count)

    wait_until(ready, f"{count} PostgreSQL standbys", timeout)
