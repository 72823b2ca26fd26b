"""Redis Streams: the adapter against a real master with two replicas."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from brokers import registry
from brokers.base import Destination
from brokers.errors import BrokerError
from tests.support import local_cluster, prepared, receive_count

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


def test_replies_are_parsed_by_hiredis(cluster) -> None:
    from redis._parsers.hiredis import _HiredisParser

    adapter = prepared(SYSTEM, cluster.endpoints, "bb_parser")
    adapter.send([b"x"])
    assert isinstance(adapter._sending.connection._parser, _HiredisParser)
    info = SYSTEM.describe(cluster.endpoints, SYSTEM.params_model())
    assert info["client_parser"] == "_HiredisParser"
    adapter.close()


def test_submitted_batches_stay_in_flight_and_arrive_once(cluster) -> None:
    adapter = prepared(SYSTEM, cluster.endpoints, "bb_in_flight", streams=3)
    assert adapter.pipelined and SYSTEM.pipelined
    batches = [[f"{b}-{i}".encode() for i in range(b % 7 + 1)] for b in range(40)]
    confirmations = [adapter.submit(batch) for batch in batches]
    assert len(adapter._sending.waiting) == len(batches), "no reply read while submitting"
    adapter.send([b"synchronous"])  # reads the replies of every batch before it
    times = [c.wait(0) for c in confirmations]
    assert all(t is not None for t in times) and times == sorted(times)
    wanted = [body for batch in batches for body in batch] + [b"synchronous"]
    got = receive_count(adapter, len(wanted), timeout=30)
    assert sorted(m.body for m in got) == sorted(wanted)
    assert adapter.receive(10) == []
    adapter.close()


def test_a_failed_batch_raises_and_the_next_ones_are_confirmed(cluster) -> None:
    import redis

    adapter = prepared(SYSTEM, cluster.endpoints, "bb_failed_batch", streams=2)
    # Single-message batches alternate between the keys; the second key is no stream.
    master = redis.Redis(*cluster.endpoints.first)
    master.delete(adapter.keys[1])
    master.set(adapter.keys[1], "not a stream")
    first, second, third = (adapter.submit([body]) for body in (b"one", b"two", b"three"))
    with pytest.raises(BrokerError, match="WRONGTYPE"):
        second.wait(5)
    assert first.wait(0) is not None and third.wait(5) is not None
    assert [fields[b"m"] for _, fields in master.xrange(adapter.keys[0])] == [b"one", b"three"]
    adapter.close()


def test_too_few_replicas_fail_the_batch(cluster) -> None:
    adapter = prepared(
        SYSTEM, cluster.endpoints, "bb_few_replicas", wait_replicas=3, wait_timeout_ms=50
    )
    with pytest.raises(BrokerError, match="only 2 of 3 replicas"):
        adapter.send([b"a"])
    confirmation = adapter.submit([b"b"])
    with pytest.raises(BrokerError, match="only 2 of 3 replicas"):
        while confirmation.wait(1) is None:
            pass
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
