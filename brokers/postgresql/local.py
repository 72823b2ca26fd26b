"""PostgreSQL on this machine: a private primary (``single``) or a primary with two
streaming standbys made by ``pg_basebackup`` (``cluster``), on free loopback ports.

The server refuses to run as root, so as root the processes run as the ``postgres``
user that Debian's package creates.
"""

from __future__ import annotations

import glob
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from brokers import templating
from brokers.base import Endpoints, LocalDeployment
from brokers.errors import BrokerUnavailable
from brokers.local import (
    LOOPBACK,
    ManagedProcess,
    ProcessCluster,
    find_binary,
    free_ports,
    run_checked,
    start_cluster,
    wait_until,
)

STANDBYS = ("s1", "s2")


def _bin_dirs() -> list[str]:
    return sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)


def _as_server_user() -> list[str]:
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
) -> str:
    """postgresql.conf of one node; used locally and (with other addresses) on AWS."""
    sync_names = f"ANY 1 ({', '.join(standbys)})" if standbys else ""
    return templating.render(
        __file__,
        "postgresql.conf.j2",
        role=role,
        name=name,
        listen_address=LOOPBACK,
        port=port,
        socket_dir=socket_dir,
        max_connections=300,
        shared_buffers="256MB",
        synchronous_commit="remote_write" if standbys else "on",
        synchronous_standby_names=sync_names,
        primary_conninfo=primary_conninfo,
    )


class PostgresLocal(LocalDeployment):
    topologies = ("single", "cluster")
    debian_packages = ("postgresql",)

    def missing(self) -> str | None:
        try:
            self._binary("postgres")
            _as_server_user()
        except BrokerUnavailable as exc:
            return str(exc)
        return None

    def _binary(self, name: str) -> str:
        return find_binary(name, "postgresql", _bin_dirs())

    def start(self, topology: str, params: Any, workdir: Path) -> ProcessCluster:
        cluster = ProcessCluster(topology, workdir)
        return start_cluster(cluster, lambda c: self._build(c, topology == "cluster"))

    def _build(self, cluster: ProcessCluster, replicated: bool) -> None:
        cluster.workdir.mkdir(parents=True, exist_ok=True)
        workdir = cluster.workdir
        prefix = _as_server_user()
        if prefix:
            # The server user must reach its data: a private directory it owns, outside
            # whatever root-only directory the caller chose.
            workdir = Path(tempfile.mkdtemp(prefix="brokerbench-postgres-"))
            cluster.cleanup.append(workdir)
            shutil.chown(workdir, "postgres", "postgres")
        standbys = STANDBYS if replicated else ()
        ports = free_ports(1 + len(standbys))
        primary_dir = workdir / "primary"
        run_checked(
            [
                *prefix,
                self._binary("initdb"),
                "-D",
                str(primary_dir),
                "-U",
                "postgres",
                "--auth=trust",
                "--no-instructions",
                "-E",
                "UTF8",
            ],
            "initdb of the primary",
        )
        self._configure(primary_dir, "primary", "primary", ports[0], workdir, standbys, "")
        primary = cluster.add(self._server("primary", primary_dir, workdir, prefix))
        _wait_accepting(primary, ports[0])
        for name, port in zip(standbys, ports[1:], strict=True):
            data = workdir / name
            run_checked(
                [
                    *prefix,
                    self._binary("pg_basebackup"),
                    "-h",
                    LOOPBACK,
                    "-p",
                    str(ports[0]),
                    "-U",
                    "postgres",
                    "-D",
                    str(data),
                    "-X",
                    "stream",
                    "-R",
                ],
                f"pg_basebackup for standby {name}",
            )
            conninfo = f"host={LOOPBACK} port={ports[0]} user=postgres application_name={name}"
            self._configure(data, name, "standby", port, workdir, (), conninfo)
            node = cluster.add(self._server(name, data, workdir, prefix))
            _wait_accepting(node, port)
        cluster.endpoints = Endpoints(
            hosts=tuple(f"{LOOPBACK}:{p}" for p in ports),
            extra=(("dbname", "postgres"), ("user", "postgres")),
        )
        if standbys:
            _wait_for_sync_standbys(cluster.endpoints, len(standbys))

    def _configure(
        self,
        data: Path,
        name: str,
        role: str,
        port: int,
        workdir: Path,
        standbys: tuple[str, ...],
        conninfo: str,
    ) -> None:
        (data / "postgresql.auto.conf").write_text("")
        (data / "postgresql.conf").write_text(
            render_config(name, role, port, str(workdir), standbys, conninfo)
        )
        (data / "pg_hba.conf").write_text(
            templating.render(__file__, "pg_hba.conf.j2", client_cidr="127.0.0.1/32")
        )

    def _server(self, name: str, data: Path, workdir: Path, prefix: list[str]) -> ManagedProcess:
        return ManagedProcess(
            name=f"postgres {name}",
            cmd=[*prefix, self._binary("postgres"), "-D", str(data)],
            log_path=workdir / f"{name}.log",
        )


def _wait_accepting(node: ManagedProcess, port: int, timeout: float = 90) -> None:
    """Wait until the server accepts connections (an open port may still be starting up)."""
    import psycopg

    def ready() -> bool:
        try:
            with psycopg.connect(
                host=LOOPBACK, port=port, user="postgres", dbname="postgres", connect_timeout=2
            ):
                return True
        except psycopg.OperationalError:
            return False

    wait_until(ready, f"{node.name} ({LOOPBACK}:{port})", timeout, node.log_path, node)


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
