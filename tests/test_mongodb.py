"""MongoDB: parameters and the AWS replica-set recipe, then the adapter against the local
stand-in (FerretDB on PostgreSQL).

The stand-in is not mongod: these tests show that the adapter's protocol works end to end
and that the stand-in is labelled; they say nothing about MongoDB's replication."""

from __future__ import annotations

import collections
import threading
import time
from pathlib import Path

import pytest
from pydantic import ValidationError

from brokers import registry
from brokers.base import Destination, Endpoints, LocalCluster
from brokers.errors import BrokerConnectionError, BrokerStartError
from brokers.local import free_ports
from brokers.mongodb import ferretdb
from brokers.mongodb.cloud import MongoCloud, render_node_config
from tests.conftest import LocalBrokers
from tests.support import drain, prepared

pytestmark = pytest.mark.mongodb

SYSTEM = registry.get("mongodb")
RS = {"mongod": ["10.42.1.10", "10.42.1.11", "10.42.1.12"]}


def params(**values: object):
    return SYSTEM.params_model.model_validate(values)


# -- without a server ----------------------------------------------------------------------


def test_write_concern_is_majority_unless_the_asynchronous_variant_is_asked_for() -> None:
    assert params().w == "majority" and params().journal is True
    assert params(w=1).w == 1
    for bad in (0, "all", "Majority"):
        with pytest.raises(ValidationError):
            params(w=bad)
    with pytest.raises(ValidationError):
        params(visibility=5)  # misspelt


def test_replica_set_members_share_one_set_and_listen_on_their_address() -> None:
    for index, address in enumerate(RS["mongod"]):
        config = render_node_config(index, RS)
        assert "replSetName: rs0" in config
        assert f"bindIp: {address},127.0.0.1" in config


def test_only_the_last_member_initiates_the_set_with_all_three() -> None:
    recipe = MongoCloud()
    first = recipe.start_commands("mongod", 0, RS)
    last = recipe.start_commands("mongod", 2, RS)
    assert not any("rs.initiate" in c for c in first)
    (initiate,) = [c for c in last if "rs.initiate" in c]
    assert all(f"{a}:27017" in initiate for a in RS["mongod"])
    waits = [i for i, c in enumerate(last) if "--host 10.42.1.1" in c]
    assert waits and max(waits) < last.index(initiate)
    assert any('w: "majority"' in c for c in last[last.index(initiate) :])
    endpoints = recipe.endpoints(RS)
    assert endpoints.get("replica_set") == "rs0" and len(endpoints.hosts) == 3


def test_the_stand_in_says_write_concern_is_not_enforced() -> None:
    assert SYSTEM.local is not None
    assert "write concern not enforced by the local stand-in" in SYSTEM.local.stand_in
    assert SYSTEM.reference_topology.roles == {"mongod": 3}


def test_a_ferretdb_source_that_does_not_match_stops_the_build(tmp_path: Path) -> None:
    handler = tmp_path / "internal" / "handler"
    handler.mkdir(parents=True)
    (handler / "msg_findandmodify.go").write_text("package handler\n")
    with pytest.raises(BrokerStartError, match="findAndModify patch"):
        ferretdb.apply_patches(tmp_path)


def test_unreachable_server_is_one_line_naming_the_host() -> None:
    (port,) = free_ports(1)
    endpoints = Endpoints(hosts=(f"127.0.0.1:{port}",))
    started = time.monotonic()
    with pytest.raises(BrokerConnectionError) as caught:
        SYSTEM.connect(endpoints, params(), Destination("q"))
    assert time.monotonic() - started < 30
    message = str(caught.value)
    assert f"127.0.0.1:{port}" in message and "\n" not in message


# -- against the stand-in ------------------------------------------------------------------


@pytest.fixture(scope="module")
def ferret(local_brokers: LocalBrokers) -> LocalCluster:
    return local_brokers.get(SYSTEM, "single")


@pytest.mark.slow
def test_round_trip_in_sending_order(ferret) -> None:
    adapter = prepared(SYSTEM, ferret.endpoints, "bb_round_trip")
    bodies = [b"bb1|round-trip|%02d" % i for i in range(25)]
    adapter.send(bodies[:10])
    adapter.send(bodies[10:])
    got = drain(adapter, 25)
    assert [m.body for m in got] == bodies
    assert not any(m.redelivered for m in got)
    adapter.ack([m.receipt for m in got])
    assert adapter.receive(10) == []
    adapter.close()


@pytest.mark.slow
def test_concurrent_receivers_never_get_the_same_message(ferret) -> None:
    sender = prepared(SYSTEM, ferret.endpoints, "bb_concurrent")
    for batch in range(20):
        sender.send([b"bb1|c|%d|%d" % (batch, i) for i in range(10)])
    sender.close()
    seen: collections.Counter[bytes] = collections.Counter()
    lock = threading.Lock()

    def receive_all() -> None:
        adapter = SYSTEM.connect(ferret.endpoints, params(), Destination("bb_concurrent"))
        while got := adapter.receive(10):
            with lock:
                seen.update(m.body for m in got)
            adapter.ack([m.receipt for m in got])
        adapter.close()

    workers = [threading.Thread(target=receive_all) for _ in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(timeout=60)
    assert len(seen) == 200 and max(seen.values()) == 1


@pytest.mark.slow
def test_the_asynchronous_variant_sends_with_w1(ferret) -> None:
    adapter = prepared(SYSTEM, ferret.endpoints, "bb_w1", w=1)
    assert adapter.collection.write_concern.document["w"] == 1
    adapter.send([b"bb1|w1"])
    (got,) = drain(adapter, 1)
    adapter.ack([got.receipt])
    adapter.close()


@pytest.mark.slow
def test_describe_reads_back_the_server_and_says_what_is_in_force(ferret) -> None:
    info = SYSTEM.describe(ferret.endpoints, params())
    assert info["version"].startswith(f"FerretDB {ferretdb.VERSION}")
    assert info["write_concern_requested"]["w"] == "majority"
    assert info["write_concern_in_force"].startswith("not enforced")
    assert info["replica_set"] == ""
