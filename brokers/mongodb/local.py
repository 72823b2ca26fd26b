"""The local stand-in for MongoDB: FerretDB v1 (built by :mod:`brokers.mongodb.ferretdb`)
over a private PostgreSQL server, both on free loopback ports.

PostgreSQL rather than SQLite as FerretDB's backend: FerretDB's SQLite backend cannot use
its ``_id`` index for updates (every claim scans the table) and SQLite serialises all
writers, while PostgreSQL flushes every commit to disk with group commit across
connections. PostgreSQL refuses to run as root, so as root it runs as the ``postgres``
user of Debian's package, in a data directory of its own outside the work directory
(which may not be readable by that user); it is removed with the cluster.

What the stand-in does not do: replicate (one server) or enforce write concerns —
``w = "majority"`` is accepted and acknowledged once PostgreSQL has committed.
"""

from __future__ import annotations

import importlib.util
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from brokers import templating
from brokers.base import Endpoints, LocalDeployment
from brokers.errors import BrokerStartError
from brokers.local import (
    LOOPBACK,
    ManagedProcess,
    NodeHosts,
    ProcessCluster,
    free_ports,
    port_open,
    run_checked,
    start_cluster,
    unavailable,
    wait_for_port,
    wait_until,
)
from brokers.mongodb import ferretdb
from brokers.postgresql.local import as_server_user, server_binary

if TYPE_CHECKING:
    from brokers.mongodb.params import MongoParams

PG_USER = "postgres"
PG_DATABASE = "ferretdb"
START_TIMEOUT = 120


class FerretDBLocal(LocalDeployment["MongoParams"]):
    topologies = ("single",)
    debian_packages = ("postgresql",)
    stand_in = (
        f"FerretDB {ferretdb.VERSION} on PostgreSQL (write concern not enforced by the "
        "local stand-in)"
    )

    def missing(self) -> str | None:
        if importlib.util.find_spec("pymongo") is None:
            return "the MongoDB client pymongo is not installed: pip install pymongo"
        problem = unavailable(lambda: server_binary("postgres"), as_server_user)
        if problem:
            return problem
        if not ferretdb.built():
            if ferretdb.go_binary() is None:
                return "FerretDB not built and go not found: install Go ≥ 1.22 (https://go.dev/dl)"
            return f"FerretDB {ferretdb.VERSION} not built yet: run 'brokerbench setup'"
        return None

    def install(self, log: Callable[[str], None]) -> None:
        ferretdb.build(log)

    def start(
        self, topology: str, params: MongoParams, workdir: Path, hosts: NodeHosts | None = None
    ) -> ProcessCluster:
        if not ferretdb.built():
            raise BrokerStartError(
                f"FerretDB is missing from {ferretdb.build_dir()}: run 'brokerbench setup'"
            )
        cluster = ProcessCluster(topology, workdir)
        return start_cluster(cluster, self._build)

    def _build(self, cluster: ProcessCluster) -> None:
        """PostgreSQL (as ``postgres`` when root) with FerretDB's database, then FerretDB."""
        cluster.workdir.mkdir(parents=True, exist_ok=True)
        pg_port, port = free_ports(2)
        _start_postgres(cluster, pg_port)
        run_checked(
            [
                server_binary("createdb"),
                "-h",
                LOOPBACK,
                "-p",
                str(pg_port),
                "-U",
                PG_USER,
                PG_DATABASE,
            ],
            "createdb for FerretDB",
        )
        _start_ferretdb(cluster, pg_port, port)


def _start_postgres(cluster: ProcessCluster, pg_port: int) -> None:
    """A private PostgreSQL server for FerretDB, until it accepts connections. As root
    it runs as ``postgres``, its data in a directory of its own outside the work directory."""
    workdir = cluster.workdir
    prefix = as_server_user()
    pg_root = workdir / "postgres"
    if prefix:
        pg_root = cluster.private_dir("brokerbench-mongodb-pg-")
        shutil.chown(pg_root, PG_USER, PG_USER)
    pg_root.mkdir(parents=True, exist_ok=True)
    data = pg_root / "data"
    run_checked(
        [
            *prefix,
            server_binary("initdb"),
            "-D",
            str(data),
            "-U",
            PG_USER,
            "--auth=trust",
            "--no-instructions",
            "-E",
            "UTF8",
        ],
        "initdb for FerretDB's PostgreSQL",
    )
    (data / "postgresql.conf").write_text(
        templating.render(
            __file__,
            "postgresql.conf.j2",
            host=LOOPBACK,
            port=pg_port,
            socket_dir=str(pg_root),
            max_connections=100,
            shared_buffers="128MB",
        )
    )
    postgres = cluster.add(
        ManagedProcess(
            name="postgres (FerretDB backend)",
            cmd=[*prefix, server_binary("postgres"), "-D", str(data)],
            log_path=workdir / "postgres.log",
        )
    )
    wait_for_port(postgres, LOOPBACK, pg_port, timeout=START_TIMEOUT)
    wait_until(
        lambda: _pg_ready(pg_port),
        f"postgres for FerretDB ({LOOPBACK}:{pg_port})",
        START_TIMEOUT,
        process=postgres,
    )


def _start_ferretdb(cluster: ProcessCluster, pg_port: int, port: int) -> None:
    """FerretDB on ``port`` over the PostgreSQL server, until it answers a ping."""
    workdir = cluster.workdir
    state = workdir / "ferretdb"
    state.mkdir(exist_ok=True)
    env_text = templating.render(
        __file__,
        "ferretdb.env.j2",
        pg_user=PG_USER,
        pg_host=LOOPBACK,
        pg_port=pg_port,
        pg_database=PG_DATABASE,
        pg_pool=50,
        host=LOOPBACK,
        port=port,
        state_dir=str(state),
        log_level="warn",
    )
    (workdir / "ferretdb.env").write_text(env_text)
    node = cluster.add(
        ManagedProcess(
            name="ferretdb",
            cmd=[str(ferretdb.binary())],
            log_path=workdir / "ferretdb.log",
            env=_env_file(env_text),
            cwd=state,
        )
    )
    cluster.endpoints = Endpoints(
        hosts=(f"{LOOPBACK}:{port}",), extra=(("database", "brokerbench"),)
    )
    wait_until(
        lambda: port_open(LOOPBACK, port) and _answers(cluster.endpoints),
        f"ferretdb ({LOOPBACK}:{port})",
        START_TIMEOUT,
        process=node,
        interval=0.5,
    )


def _pg_ready(port: int) -> bool:
    """True once PostgreSQL accepts connections (not only its port: it may be starting up)."""
    done = subprocess.run(
        [server_binary("pg_isready"), "-q", "-h", LOOPBACK, "-p", str(port), "-U", PG_USER],
        capture_output=True,
        check=False,
        timeout=30,
    )
    return done.returncode == 0


def _env_file(text: str) -> dict[str, str]:
    pairs = (line.split("=", 1) for line in text.splitlines() if "=" in line)
    return {key.strip(): value.strip() for key, value in pairs}


def _answers(endpoints: Endpoints) -> bool:
    from brokers.mongodb.adapter import mongo_client

    try:
        with mongo_client(endpoints) as client:
            client.admin.command("ping")
    except Exception:
        return False
    return True
