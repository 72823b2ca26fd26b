"""The AWS recipes of PostgreSQL and Redis: the configuration rendered for a cloud node is
the local one apart from addresses, paths and sizes; nodes start in the right order."""

from __future__ import annotations

import re

from brokers.cloud import BROKER_PASSWORD
from brokers.postgresql import local as pg_local
from brokers.postgresql.cloud import PostgresCloud, render_node_config
from brokers.redis import local as redis_local
from brokers.redis.cloud import RedisCloud
from brokers.redis.cloud import render_node_config as redis_node_config
from brokers.redis.params import RedisParams

PG = {"primary": ["10.42.1.10"], "standby": ["10.42.1.11", "10.42.1.12"]}
REDIS = {"master": ["10.42.1.10"], "replica": ["10.42.1.11", "10.42.1.12"]}
REDIS_SHARDED = {"master": [f"10.42.1.{i}" for i in (10, 11, 12)],
                 "replica": [f"10.42.1.{i}" for i in range(13, 19)]}  # fmt: skip


def settings(text: str, separator: str) -> dict[str, str]:
    """``key = value`` / ``key value`` lines; comments kept as their text (wherever they are:
    a blank line more or less moves them)."""
    found = {}
    for line in text.splitlines():
        key, _, value = line.partition(separator)
        if not line.strip():
            continue
        if line.startswith("#"):
            found[line] = line
        else:
            found[key.strip()] = value.strip()
    return found


def differing(local: dict[str, str], cloud: dict[str, str]) -> set[str]:
    return {k for k in local.keys() | cloud.keys() if local.get(k) != cloud.get(k)}


def test_postgres_primary_config_differs_only_in_addresses_paths_sizes() -> None:
    local = pg_local.render_config("primary", "primary", 54321, "/tmp/bb", ("s1", "s2"), "")
    cloud = render_node_config("primary", 0, PG)
    local_s, cloud_s = settings(local, "="), settings(cloud, "=")
    assert differing(local_s, cloud_s) == {
        "listen_addresses", "port", "unix_socket_directories", "shared_buffers",
    }  # fmt: skip
    assert cloud_s["listen_addresses"] == "'10.42.1.10,127.0.0.1'"
    assert cloud_s["synchronous_standby_names"] == "'ANY 1 (s1, s2)'"
    assert cloud_s["synchronous_commit"] == "remote_write"


def test_postgres_standby_config_names_its_primary_and_itself() -> None:
    conninfo = "host=127.0.0.1 port=54321 user=postgres application_name=s2"
    local = pg_local.render_config("s2", "standby", 54323, "/tmp/bb", (), conninfo)
    cloud = render_node_config("standby", 1, PG)
    local_s, cloud_s = settings(local, "="), settings(cloud, "=")
    assert differing(local_s, cloud_s) == {
        "listen_addresses", "port", "unix_socket_directories", "shared_buffers", "primary_conninfo",
    }  # fmt: skip
    assert cloud_s["primary_conninfo"] == (
        "'host=10.42.1.10 port=5432 user=postgres application_name=s2"
        " passfile=/var/lib/postgresql/.pgpass'"
    )

    def unaddressed(conninfo: str) -> str:  # the password file is where the password is on AWS
        return re.sub(r"host=\S+ port=\d+| passfile=[^' ]+", "", conninfo)

    assert unaddressed(local_s["primary_conninfo"]) == unaddressed(cloud_s["primary_conninfo"])


def test_postgres_nodes_admit_only_the_benchmark_subnet_with_the_stack_password() -> None:
    files = PostgresCloud().node_files("primary", 0, PG, params=None)
    hba = files["/etc/postgresql/15/main/pg_hba.conf"]
    assert "10.42.1.0/24" in hba and "0.0.0.0" not in hba
    rules = [line.split() for line in hba.splitlines() if line and not line.startswith("#")]
    assert rules and {rule[-1] for rule in rules} == {"scram-sha-256"}
    assert files["/var/lib/postgresql/.pgpass"].endswith(
        f":postgres:{BROKER_PASSWORD.placeholder}\n"
    )
    commands = PostgresCloud().start_commands("primary", 0, PG)
    (set_password,) = [c for c in commands if "ALTER ROLE postgres PASSWORD" in c]
    assert BROKER_PASSWORD.shell in set_password and "--single" in set_password
    assert commands.index(set_password) < commands.index("systemctl start postgresql@15-main")


def test_postgres_standby_clones_the_primary_after_it_is_up() -> None:
    commands = PostgresCloud().start_commands("standby", 0, PG)
    wait = next(i for i, c in enumerate(commands) if "pg_isready -q -h 10.42.1.10" in c)
    clone = next(i for i, c in enumerate(commands) if "pg_basebackup -h 10.42.1.10" in c)
    start = commands.index("systemctl start postgresql@15-main")
    assert wait < clone < start
    assert PostgresCloud().endpoints(PG).hosts == (
        "10.42.1.10:5432",
        "10.42.1.11:5432",
        "10.42.1.12:5432",
    )


def test_redis_config_differs_only_in_addresses_and_paths() -> None:
    params = RedisParams(appendfsync="always")
    local = redis_local.render_config(
        "master", "127.0.0.1", 6390, "/tmp/bb/master", "always", password="run-password"
    )
    cloud = RedisCloud().node_files("master", 0, REDIS, params)["/etc/redis/redis.conf"]
    assert differing(settings(local, " "), settings(cloud, " ")) == {
        "bind",
        "port",
        "dir",
        "requirepass",  # the run's password here, the stack's (filled in at boot) on AWS
        "masterauth",
    }
    assert f"requirepass {BROKER_PASSWORD.placeholder}" in cloud
    assert "appendfsync always" in cloud and "appendonly yes" in cloud

    replica_local = redis_local.render_config(
        "replica2",
        "127.0.0.1",
        6392,
        "/tmp/bb/replica2",
        "everysec",
        "127.0.0.1 6390",
        password=BROKER_PASSWORD.placeholder,
    )
    replica = redis_node_config("replica", 1, REDIS, "everysec")
    assert differing(settings(replica_local, " "), settings(replica, " ")) == {
        "bind", "port", "dir", "replicaof",
    }  # fmt: skip
    assert "replicaof 10.42.1.10 6379" in replica


def test_redis_with_several_masters_becomes_a_cluster_created_by_the_last_node() -> None:
    recipe = RedisCloud()
    conf = recipe.node_files("replica", 0, REDIS_SHARDED, RedisParams())["/etc/redis/redis.conf"]
    assert "cluster-enabled yes" in conf and "replicaof" not in conf
    assert not any(
        "--cluster create" in c for c in recipe.start_commands("master", 2, REDIS_SHARDED)
    )
    create = recipe.start_commands("replica", 5, REDIS_SHARDED)[-1]
    assert create.startswith(
        "redis-cli --cluster create 10.42.1.10:6379 10.42.1.11:6379 10.42.1.12:6379"
    )
    assert create.endswith("--cluster-replicas 2 --cluster-yes")
    assert recipe.endpoints(REDIS_SHARDED).get("mode") == "cluster"
    assert not any("--cluster" in c for c in recipe.start_commands("replica", 1, REDIS))
