"""Pulsar: parameters, configuration rendering and the AWS recipe without a server, then
the adapter and describe against a real ZooKeeper + 3 bookies + broker
cluster started from the Maven Central distribution."""

from __future__ import annotations

import re
import shutil
import time
import zlib
from pathlib import Path

import pytest

from brokers import registry
from brokers.base import Destination, Endpoints, Received
from brokers.batches import KeyedBatch
from brokers.errors import BrokerConnectionError, BrokerError, BrokerStartError
from brokers.local import ProcessCluster, free_ports
from brokers.pulsar import SYSTEM, admin, local
from brokers.pulsar.adapter import PulsarAdapter, _Confirmations, _runs_by_key
from brokers.pulsar.cloud import PulsarCloud
from brokers.pulsar.config import (
    REPLICATED,
    BrokerConf,
    Quorum,
    Sizes,
    ZooKeeperServer,
    render_bookie,
    render_broker,
    render_standalone,
    render_zookeeper,
    version,
)
from brokers.pulsar.params import PulsarParams
from tests.conftest import LocalBrokers
from tests.support import listening_addresses, properties, receive_count

pytestmark = pytest.mark.pulsar


def broker_conf(quorum: Quorum = REPLICATED) -> BrokerConf:
    return BrokerConf(
        "local", "zk:127.0.0.1:2181", 6650, 8080, "127.0.0.1", "127.0.0.1", quorum, False
    )


# -- without a server -----------------------------------------------------------------------


def test_defaults_are_the_safe_settings() -> None:
    params = PulsarParams()
    assert params.quorum is None  # the cluster default: 3/3/2 with three bookies
    assert params.partitions == 0 and params.batching
    assert params.ack_timeout == 30.0
    assert PulsarParams(ensemble_size=3, write_quorum=3, ack_quorum=2).quorum == Quorum(3, 3, 2)


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"ensemble_size": 3}, "together"),
        ({"ensemble_size": 2, "write_quorum": 3, "ack_quorum": 2}, "ack_quorum <= write_quorum"),
        ({"ensemble_size": 3, "write_quorum": 3, "ack_quorum": 3, "partitons": 4}, "partitons"),
        ({"ack_timeout": 5}, "ack_timeout"),
    ],
)
def test_invalid_params_are_rejected(values: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        PulsarParams.model_validate(values)


def test_pom_pins_a_3x_release() -> None:
    assert re.fullmatch(r"3\.\d+\.\d+", version())
    assert local.home().name == f"apache-pulsar-{version()}"


def test_bookies_fsync_their_journal_and_bind_to_loopback() -> None:
    conf = properties(
        render_bookie(2, 3182, "127.0.0.1", ["127.0.0.1:2181"], "/tmp/b2", Sizes(), "lo")
    )
    assert conf["journalSyncData"] == "true" and conf["journalWriteData"] == "true"
    assert conf["listeningInterface"] == "lo"
    assert conf["metadataServiceUri"] == "zk+null://127.0.0.1:2181/ledgers"
    assert conf["journalDirectory"] == "/tmp/b2/journal"
    aws = properties(render_bookie(1, 3181, "10.0.0.4", ["a:2181", "b:2181"], "/data", Sizes()))
    assert "listeningInterface" not in aws
    assert aws["metadataServiceUri"] == "zk+null://a:2181;b:2181/ledgers"


def test_broker_and_standalone_configuration() -> None:
    conf = properties(render_broker(broker_conf()))
    assert conf["managedLedgerDefaultEnsembleSize"] == "3"
    assert conf["managedLedgerDefaultWriteQuorum"] == "3"
    assert conf["managedLedgerDefaultAckQuorum"] == "2"
    assert conf["bindAddress"] == "127.0.0.1"
    assert conf["brokerDeleteInactiveTopicsEnabled"] == "false"
    assert "journalSyncData" not in conf
    standalone = properties(render_standalone(broker_conf(Quorum(1, 1, 1))))
    assert standalone["managedLedgerDefaultEnsembleSize"] == "1"
    # Pulsar's own standalone.conf sets journalSyncData=false; ours fsyncs.
    assert standalone["journalSyncData"] == "true"
    assert standalone["listeningInterface"] == "lo"


def test_zookeeper_quorum_lines() -> None:
    servers = [ZooKeeperServer(i + 1, f"10.0.0.{i + 1}") for i in range(3)]
    conf = properties(render_zookeeper("/data/zk", 2181, "10.0.0.2", servers))
    assert conf["server.2"] == "10.0.0.2:2888:3888"
    assert conf["forceSync"] == "yes" and conf["admin.enableServer"] == "false"
    assert "server.1" not in properties(render_zookeeper("/z", 2181, "127.0.0.1", []))


def test_cloud_recipe_uses_the_same_templates() -> None:
    recipe = SYSTEM.cloud
    assert isinstance(recipe, PulsarCloud)
    assert SYSTEM.reference_topology.roles == {"zookeeper": 3, "bookie": 3, "broker": 2}
    cluster = {
        "zookeeper": ["10.0.0.1", "10.0.0.2", "10.0.0.3"],
        "bookie": ["10.0.0.4", "10.0.0.5", "10.0.0.6"],
        "broker": ["10.0.0.7", "10.0.0.8"],
    }
    zk = recipe.node_files("zookeeper", 1, cluster, PulsarParams())
    assert zk["/data/zookeeper/myid"] == "2\n"
    assert properties(zk["/etc/pulsar/zookeeper.conf"])["server.3"] == "10.0.0.3:2888:3888"
    bookie = recipe.node_files("bookie", 2, cluster, PulsarParams())
    bk = properties(bookie["/etc/pulsar/bookkeeper.conf"])
    assert bk["advertisedAddress"] == "10.0.0.6" and bk["journalSyncData"] == "true"
    assert "-Xmx4g" in bookie["/etc/systemd/system/pulsar-bookie.service"]
    broker = recipe.node_files("broker", 1, cluster, PulsarParams())
    conf = properties(broker["/etc/pulsar/broker.conf"])
    assert conf["advertisedAddress"] == "10.0.0.8"
    assert conf["metadataStoreUrl"] == "zk:10.0.0.1:2181,10.0.0.2:2181,10.0.0.3:2181"
    assert conf["managedLedgerDefaultAckQuorum"] == "2"
    last_zk = " ".join(recipe.start_commands("zookeeper", 2, cluster))
    assert "PulsarClusterMetadataSetup" in last_zk and "10.0.0.7:8080,10.0.0.8:8080" in last_zk
    assert "PulsarClusterMetadataSetup" not in " ".join(
        recipe.start_commands("zookeeper", 0, cluster)
    )
    assert any(version() in c for c in recipe.install_commands())
    endpoints = recipe.endpoints(cluster)
    assert endpoints.hosts == ("10.0.0.7:6650", "10.0.0.8:6650")
    assert endpoints.get("admin") == "http://10.0.0.7:8080"
    assert {6650, 8080, 3181, 2181} <= set(recipe.ports())


def test_ledger_quorum_is_read_from_ledger_metadata() -> None:
    stats = {
        "ledgers": [
            {
                "ledgerId": 4,
                "metadata": "LedgerMetadata{formatVersion=3, ensembleSize=3, writeQuorumSize=3, "
                "ackQuorumSize=2, state=OPEN, ensembles={0=[127.0.0.1:1, 127.0.0.1:2, "
                "127.0.0.1:3]}, customMetadata={}}",
            }
        ]
    }
    assert admin.ledger_quorum(stats) == {
        "ensemble_size": 3,
        "write_quorum": 3,
        "ack_quorum": 2,
        "ledger_bookies": ["127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"],
    }


def test_a_batch_is_confirmed_only_when_every_callback_is_ok() -> None:
    confirmations = _Confirmations(30, "Ok")
    confirmations.expect(3)
    confirmations.callback("Ok", None)
    confirmations.callback("Timeout", None)
    assert not confirmations.done.is_set() and confirmations.wait(0) is None
    confirmations.callback("Ok", None)
    assert confirmations.done.is_set() and confirmations.failures == ["Timeout"]
    with pytest.raises(BrokerError, match="a batch of 30 messages failed: Timeout"):
        confirmations.wait(0)
    ok = _Confirmations(5, "Ok")
    ok.expect(1)
    ok.callback("Ok", None)
    assert ok.wait(0) == ok.done_ns > 0


def test_a_keyed_batch_is_split_by_partition_in_order() -> None:
    keys = [b"k%d" % (i % 7) for i in range(40)]
    bodies = [b"m%d" % i for i in range(40)]
    runs = _runs_by_key(["p0", "p1", "p2"], KeyedBatch(bodies, keys), keys)
    assert sorted(b for _, run, _ in runs for b in run) == sorted(bodies)
    for producer, run, run_keys in runs:
        assert run == sorted(run, key=bodies.index)  # the batch's order within a run
        assert {f"p{zlib.crc32(k.encode()) % 3}" for k in run_keys} == {producer}


def test_single_bookie_refuses_a_replicated_quorum(tmp_path: Path) -> None:
    deployment = local.PulsarLocal()
    if not local.fetched():
        pytest.skip("Pulsar is not fetched")
    params = PulsarParams(ensemble_size=3, write_quorum=3, ack_quorum=2)
    with pytest.raises(BrokerStartError, match="1 bookie"):
        deployment.start("single", params, tmp_path / "w")


def test_unreachable_broker_fails_fast_naming_host() -> None:
    (port,) = free_ports(1)
    endpoints = Endpoints(hosts=(f"127.0.0.1:{port}",))
    started = time.monotonic()
    with pytest.raises(BrokerConnectionError, match=f"127.0.0.1:{port}") as err:
        SYSTEM.connect(endpoints, PulsarParams(), Destination("t"))
    assert time.monotonic() - started < 30 and "\n" not in str(err.value)
    with pytest.raises(BrokerConnectionError, match=f"127.0.0.1:{port}"):
        SYSTEM.describe(
            Endpoints(hosts=("127.0.0.1:1",), extra=(("admin", f"http://127.0.0.1:{port}"),)),
            PulsarParams(),
        )


def test_registered_with_local_and_cloud() -> None:
    system = registry.get("pulsar")
    assert system.local is not None and system.local.topologies == ("single", "cluster")
    assert system.cloud is not None and system.client_package == "pulsar-client"


# -- against a real cluster -------------------------------------------------------------------


@pytest.fixture(scope="module")
def cluster(local_brokers: LocalBrokers) -> ProcessCluster:
    started = local_brokers.get(SYSTEM, "cluster")
    assert isinstance(started, ProcessCluster)
    return started


@pytest.mark.slow
def test_start_failure_names_the_component(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    deployment = SYSTEM.local
    assert deployment is not None
    if deployment.missing():
        pytest.skip(deployment.missing() or "")
    monkeypatch.setattr(local, "render_zookeeper", lambda *a, **k: "clientPort=notaport\n")
    with pytest.raises(BrokerStartError, match=r"^zookeeper .*zookeeper\.log") as err:
        deployment.start("cluster", PulsarParams(), tmp_path / "broken")
    assert "\n" not in str(err.value)
    assert not (tmp_path / "broken").exists()


def hold(adapter, count: int, timeout: float = 30) -> list[Received]:
    """Receive ``count`` messages without acknowledging them."""
    held: list[Received] = []
    deadline = time.monotonic() + timeout
    while len(held) < count and time.monotonic() < deadline:
        held += adapter.receive(count - len(held))
    return held


@pytest.mark.slow
def test_negatively_acknowledged_messages_come_back_marked(cluster: ProcessCluster) -> None:
    params = PulsarParams(negative_ack_delay=0.5)
    destination = Destination("negative")
    SYSTEM.prepare(cluster.endpoints, params, destination)
    adapter = SYSTEM.connect(cluster.endpoints, params, destination)
    assert isinstance(adapter, PulsarAdapter)
    try:
        adapter.send([b"n%d" % i for i in range(5)])
        held = hold(adapter, 5)
        adapter.ack([held[0].receipt])
        adapter.negative_ack([m.receipt for m in held[1:]])
        again = receive_count(adapter, 4, timeout=30)
        assert {m.body for m in again} == {m.body for m in held[1:]}
        assert all(m.redelivered for m in again)
    finally:
        adapter.close()


@pytest.mark.slow
def test_batches_in_flight_on_a_partitioned_topic_are_each_confirmed_and_received(
    cluster: ProcessCluster,
) -> None:
    """Several batches submitted before the first is awaited, keyless and keyed, over four
    partitions (a producer each, one callback per producer's run): every batch confirmed,
    every message received once."""
    params = PulsarParams(partitions=4)
    destination = Destination("in-flight")
    SYSTEM.prepare(cluster.endpoints, params, destination)
    sender = SYSTEM.connect(cluster.endpoints, params, destination)
    receiver = SYSTEM.connect(cluster.endpoints, params, destination)
    assert isinstance(sender, PulsarAdapter) and sender.pipelined
    try:
        batches: list[list[bytes]] = [[b"b%d-%d" % (b, i) for i in range(50)] for b in range(6)]
        keyed = KeyedBatch(
            [b"k-%d" % i for i in range(50)], [b"key%d" % (i % 9) for i in range(50)]
        )
        pending = [sender.submit(batch) for batch in [*batches, keyed]]
        assert all(c.wait(60) for c in pending)
        expected = {m for batch in [*batches, keyed] for m in batch}
        got = receive_count(receiver, len(expected), timeout=60)
        assert sorted(m.body for m in got) == sorted(expected)
        receiver.ack([m.receipt for m in got])
    finally:
        sender.close()
        receiver.close()


@pytest.mark.slow
def test_describe_reads_back_three_copies_on_three_bookies(cluster: ProcessCluster) -> None:
    described = SYSTEM.describe(cluster.endpoints, PulsarParams())
    assert described["version"] == version()
    assert described["bookies"] == 3 and described["brokers"] == 1
    assert (described["ensemble_size"], described["write_quorum"], described["ack_quorum"]) == (
        3,
        3,
        2,
    )
    assert len(set(described["ledger_bookies"])) == 3
    assert described["broker_default_quorum"] == "3/3/2"
    narrower = PulsarParams(
        namespace="public/narrow", ensemble_size=2, write_quorum=2, ack_quorum=2
    )
    described = SYSTEM.describe(cluster.endpoints, narrower)
    assert described["quorum_source"] == "namespace policy"
    assert (described["ensemble_size"], described["write_quorum"], described["ack_quorum"]) == (
        2,
        2,
        2,
    )


@pytest.mark.slow
def test_every_process_listens_on_loopback_only(cluster: ProcessCluster) -> None:
    if shutil.which("ss") is None:
        pytest.skip("ss (iproute2) is not installed")
    addresses = listening_addresses(cluster)
    assert addresses and addresses <= {"127.0.0.1"}, addresses
