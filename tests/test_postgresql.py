"""PostgreSQL: the adapter against a real primary with two synchronous standbys."""

from __future__ import annotations

import json
from pathlib import Path

import psycopg
import pytest

from brokers import registry
from brokers.base import Destination, Endpoints, LocalCluster
from brokers.errors import BrokerConnectionError
from tests.conftest import SCENARIOS, LocalBrokers
from tests.support import drain, files_holding, prepared, receive_count

pytestmark = [pytest.mark.postgresql, pytest.mark.slow]


SYSTEM = registry.get("postgresql")


@pytest.fixture(scope="module")
def cluster(local_brokers: LocalBrokers) -> LocalCluster:
    return local_brokers.get(SYSTEM, "cluster")


def login(endpoints: Endpoints) -> dict[str, str]:
    return {"user": endpoints.get("user"), "password": endpoints.get("password")}


def server_dir(cluster) -> Path:
    """Where the servers keep their sockets and pgpass: the work directory, or as root a
    directory of the server user's own."""
    return (cluster.cleanup or [cluster.workdir])[0]


def test_describe_reads_back_synchronous_replication(cluster) -> None:
    info = SYSTEM.describe(cluster.endpoints, SYSTEM.params_model())
    assert info["settings"]["synchronous_commit"] == "remote_write"
    assert info["settings"]["synchronous_standby_names"] == "ANY 1 (s1, s2)"
    assert sorted(s["name"] for s in info["standbys"]) == ["s1", "s2"]
    assert {s["sync_state"] for s in info["standbys"]} <= {"quorum", "sync", "async"}


def test_every_server_requires_the_runs_password(cluster) -> None:
    endpoints = cluster.endpoints
    user, password = endpoints.get("user"), endpoints.get("password")
    assert user.startswith("brokerbench") and len(password) == 32
    for host, port in endpoints.addresses():
        for where in (host, str(server_dir(cluster))):  # TCP, then the Unix socket
            for refused in (
                {"user": user},
                {"user": user, "password": "wrong"},
                {"user": "postgres"},
            ):
                with pytest.raises(psycopg.OperationalError, match="password"):
                    psycopg.connect(host=where, port=port, dbname="postgres", **refused)
            with psycopg.connect(host=where, port=port, dbname="postgres", **login(endpoints)):
                pass


def test_the_password_is_in_private_files_only_and_not_described(cluster) -> None:
    password = cluster.endpoints.get("password")
    assert files_holding(cluster, password) == {str(server_dir(cluster) / "pgpass"): 0o600}
    info = SYSTEM.describe(cluster.endpoints, SYSTEM.params_model())
    assert info["auth"] == "password" and password not in json.dumps(info)


def test_a_broker_the_user_runs_is_reached_with_the_scenarios_credentials(
    cluster, tmp_path: Path
) -> None:
    from tests.conftest import brokerbench

    def run(password: str):
        scenario = tmp_path / "byo.toml"
        scenario.write_text(
            'name = "byo"\n[broker]\nsystem = "postgresql"\ndeployment = "endpoints"\n'
            f'endpoints = ["{cluster.endpoints.hosts[0]}"]\n'
            f'options = {{ user = "{cluster.endpoints.get("user")}", password = "{password}" }}\n'
            '[load]\nthreads = 1\nduration = "2s"\nidle_timeout = "2s"\n'
            '[measurement]\nwindow = "1s"\nstep = "1s"\n'
        )
        return brokerbench(
            "run", str(scenario), "--results", str(tmp_path / password), "--no-analysis"
        )

    done = run(cluster.endpoints.get("password"))
    assert done.returncode == 0, done.stderr[-2000:]
    refused = run("wrong")
    assert refused.returncode == 1 and "password authentication failed" in refused.stderr


def test_a_confirmed_message_is_on_a_standby(cluster) -> None:
    params = SYSTEM.params_model()
    destination = Destination("bb_standby_check")
    SYSTEM.prepare(cluster.endpoints, params, destination)
    adapter = SYSTEM.connect(cluster.endpoints, params, destination)
    adapter.send([b"confirmed-1", b"confirmed-2"])
    adapter.close()
    found = 0
    for host in cluster.endpoints.hosts[1:]:
        standby = Endpoints(hosts=(host,), extra=cluster.endpoints.extra)
        h, p = standby.first
        # remote_write: the WAL is written on a standby; replay follows within moments.
        with psycopg.connect(host=h, port=p, dbname="postgres", **login(cluster.endpoints)) as conn:
            for _ in range(50):
                rows = conn.execute(
                    "SELECT count(*) FROM bb_standby_check WHERE content IN (%s, %s)",
                    (b"confirmed-1", b"confirmed-2"),
                ).fetchone()
                if rows and rows[0] == 2:
                    found += 1
                    break
                conn.rollback()
                import time

                time.sleep(0.1)
    assert found >= 1


def test_each_operation_is_one_prepared_statement(cluster) -> None:
    adapter = prepared(SYSTEM, cluster.endpoints, "bb_prepared")
    bodies = [f"m{i}".encode() for i in range(10)]
    adapter.send(bodies)
    got = adapter.receive(10)
    assert sorted(m.body for m in got) == bodies and all(type(m.body) is bytes for m in got)
    adapter.ack([m.receipt for m in got])
    statements = [
        row[0].split()[0]
        for row in adapter.conn.execute(
            "SELECT statement FROM pg_prepared_statements ORDER BY prepare_time"
        )
    ]
    assert statements == ["INSERT", "UPDATE", "DELETE"]
    assert adapter.conn.execute("SELECT count(*) FROM bb_prepared").fetchone() == (0,)
    assert adapter.conn.execute("SHOW synchronous_commit").fetchone() == ("remote_write",)
    adapter.close()


def test_the_queue_finds_due_rows_by_its_key_and_vacuums_within_seconds(cluster) -> None:
    """The claim walks the primary key from the oldest row (no index on next_delivery, so
    a claim is a HOT update and the scan never reads the whole heap), and the rows the
    acknowledgements delete are vacuumed within seconds, inside a point."""
    import time

    adapter = prepared(SYSTEM, cluster.endpoints, "bb_layout")
    conn = adapter.conn
    for _ in range(10):
        adapter.send([b"x" * 100] * 1000)
    plan = "\n".join(
        row[0]
        for row in conn.execute(
            "EXPLAIN SELECT id FROM bb_layout WHERE next_delivery <= now() ORDER BY id "
            "LIMIT 10 FOR UPDATE SKIP LOCKED"
        )
    )
    assert "Index Scan using bb_layout_pkey" in plan and "Seq Scan" not in plan, plan
    indexes = conn.execute("SELECT indexdef FROM pg_indexes WHERE tablename = 'bb_layout'")
    assert [row[0].split(" USING ")[1] for row in indexes] == ["btree (id)"]
    received = receive_count(adapter, 10_000, 60, ack=True)
    assert len(received) == 10_000
    deadline = time.monotonic() + 15  # a backend's statistics reach the view within seconds
    while time.monotonic() < deadline:
        hot, updated = conn.execute(
            "SELECT n_tup_hot_upd, n_tup_upd FROM pg_stat_user_tables WHERE relname = 'bb_layout'"
        ).fetchone()
        if updated:
            break
        time.sleep(0.5)
    assert updated and hot >= updated // 2, (hot, updated)  # most updates are HOT
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        (vacuumed,) = conn.execute(
            "SELECT autovacuum_count FROM pg_stat_user_tables WHERE relname = 'bb_layout'"
        ).fetchone()
        if vacuumed:
            break
        time.sleep(0.5)
    assert vacuumed, "autovacuum did not vacuum the queue table within 30 s of 10,000 deletes"
    adapter.close()


def test_a_lost_connection_fails_one_operation_and_the_next_connects_again(cluster) -> None:
    adapter = prepared(SYSTEM, cluster.endpoints, "bb_reconnect")
    adapter.send([b"before"])
    backend = adapter.conn.info.backend_pid
    host, port = cluster.endpoints.first
    with psycopg.connect(
        host=host, port=port, dbname="postgres", autocommit=True, **login(cluster.endpoints)
    ) as admin:
        admin.execute("SELECT pg_terminate_backend(%s)", (backend,))
    with pytest.raises(BrokerConnectionError, match="connection lost"):
        adapter.send([b"lost with its connection"])
    adapter.send([b"after"])  # a new connection
    assert adapter.conn.info.backend_pid != backend
    got = drain(adapter, 2)
    assert sorted(m.body for m in got) == [b"after", b"before"]
    adapter.close()


def test_asynchronous_replication_commits_locally(cluster) -> None:
    adapter = prepared(SYSTEM, cluster.endpoints, "bb_async", replication="asynchronous")
    assert adapter.conn.execute("SHOW synchronous_commit").fetchone() == ("local",)
    adapter.send([b"local"])
    assert [m.body for m in adapter.receive(10)] == [b"local"]
    adapter.close()


@pytest.mark.integration
def test_a_fixed_message_size_gives_bytes_of_exactly_size_times_messages(
    cluster, spark, tmp_path: Path
) -> None:
    """300-byte messages: bytes sent and received are 300 × the messages, to the byte, and
    the MB/s columns 300 × the msgs/s beside them."""
    import math

    from tests.support import run_against
    from tests.test_sizes import sized_run

    short = {
        "load": {"duration": "3s", "idle_timeout": "1s", "message_size": 300},
        "measurement": {"window": "2s"},
    }
    scenario = SCENARIOS / "postgresql-cluster-smoke.toml"
    run = sized_run(run_against(scenario, cluster.endpoints, tmp_path, short), spark)
    run.check_exact()
    row = run.row
    assert row["sent_bytes"] == 300 * row["sent"] and row["received_bytes"] == 300 * row["received"]
    assert set(run.received_sizes) == {300}
    for side in ("send", "receive"):
        mb = row[f"{side}_mb_per_s"] * 1e6
        assert math.isclose(mb, 300 * row[f"{side}_msgs_per_s"], rel_tol=1e-9), side
    print(
        f"postgresql 300 B: {row['sent']} msgs, {row['sent_bytes']} B; send "
        f"{row['send_msgs_per_s']:.0f} msgs/s {row['send_mb_per_s']:.3f} MB/s, receive "
        f"{row['receive_msgs_per_s']:.0f} msgs/s {row['receive_mb_per_s']:.3f} MB/s"
    )
