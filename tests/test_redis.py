"""Redis Streams: the adapter against a real master with two replicas."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from brokers import registry
from brokers.base import Destination
from tests.support import local_cluster

pytestmark = [pytest.mark.redis, pytest.mark.slow]


SYSTEM = registry.get("redis")


@pytest.fixture(scope="module")
def cluster():
    yield from local_cluster(SYSTEM, "cluster", SYSTEM.params_model())


def test_describe_reads_back_replicas_and_aof(cluster) -> None:
    info = SYSTEM.describe(cluster.endpoints, SYSTEM.params_model())
    assert info["role"] == "master" and info["connected_replicas"] == 2
    assert info["settings"] == {"appendonly": "yes", "appendfsync": "everysec"}


def test_wait_for_replicas_confirms_the_batch(cluster) -> None:
    params = SYSTEM.params_model(streams=3, wait_replicas=2)
    destination = Destination("bb_wait")
    SYSTEM.prepare(cluster.endpoints, params, destination)
    adapter = SYSTEM.connect(cluster.endpoints, params, destination)
    adapter.send([b"a", b"b", b"c", b"d"])
    got = []
    for _ in range(5):
        got += adapter.receive(10)
    assert sorted(m.body for m in got) == [b"a", b"b", b"c", b"d"]
    adapter.ack([m.receipt for m in got])
    adapter.close()


def test_messages_of_a_dead_consumer_are_claimed(cluster) -> None:
    params = SYSTEM.params_model(claim_after=0.4)
    destination = Destination("bb_claim")
    SYSTEM.prepare(cluster.endpoints, params, destination)
    dead = SYSTEM.connect(cluster.endpoints, params, destination)
    dead.send([b"orphan"])
    assert [m.body for m in dead.receive(10)] == [b"orphan"]  # never acked
    alive = SYSTEM.connect(cluster.endpoints, params, destination)
    time.sleep(0.5)
    again = alive.receive(10)
    assert [m.body for m in again] == [b"orphan"] and again[0].redelivered
    alive.ack([m.receipt for m in again])
    time.sleep(0.5)
    assert alive.receive(10) == []


def test_cluster_smoke_end_to_end(tmp_path: Path) -> None:
    from tests.conftest import SCENARIOS, brokerbench, read_summary

    done = brokerbench(
        "run", str(SCENARIOS / "redis-cluster-smoke.toml"), "--results", str(tmp_path)
    )
    assert done.returncode == 0, done.stderr[-2000:]
    (row,) = read_summary(tmp_path)
    assert int(row["sent"]) > 0 and int(row["received"]) == int(row["sent"])
    assert int(row["lost"]) == 0


def test_redis_cluster_sharded_end_to_end(tmp_path: Path) -> None:
    from tests.conftest import SCENARIOS, brokerbench, read_summary

    done = brokerbench(
        "run", str(SCENARIOS / "redis-sharded-smoke.toml"), "--results", str(tmp_path)
    )
    assert done.returncode == 0, done.stderr[-2000:]
    (row,) = read_summary(tmp_path)
    assert int(row["sent"]) > 0 and int(row["received"]) == int(row["sent"])
    assert int(row["lost"]) == 0
    (context,) = tmp_path.glob("*/context.json")
    import json

    assert json.loads(context.read_text())["broker"]["cluster_shards"] == 3
