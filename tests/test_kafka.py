"""Kafka: configuration rendering, offset bookkeeping and partitioning without a server,
then the adapters of both client libraries against a real 3-node KRaft
cluster started from the Maven Central jars."""

from __future__ import annotations

import itertools
import re
import time
import xml.etree.ElementTree as ET
from collections import Counter, deque
from typing import Any

import pytest

from brokers import registry
from brokers.base import Destination, Endpoints
from brokers.errors import BrokerConnectionError
from brokers.kafka import SYSTEM, client
from brokers.kafka.base import KafkaAdapterBase
from brokers.kafka.cloud import KafkaCloud, cluster_id
from brokers.kafka.local import (
    KAFKA_VERSION,
    POM,
    ClusterSizes,
    NodeConfig,
    new_cluster_id,
    render_server_properties,
)
from brokers.kafka.offsets import AckTracker
from brokers.kafka.params import KafkaParams, min_insync_for, replication_for
from brokers.local import free_ports
from tests.conftest import LocalBrokers
from tests.support import properties, receive_bodies, sender_and_receiver

pytestmark = pytest.mark.kafka

CLIENTS = ["confluent-kafka", "kafka-python"]


# -- without a server -----------------------------------------------------------------------


def test_defaults_are_the_safe_settings() -> None:
    params = KafkaParams()
    assert params.client == "confluent-kafka"
    assert params.acks == "all"
    assert params.partitions == 64
    assert params.commit_interval == 10.0
    assert replication_for(params, brokers=3) == 3
    assert min_insync_for(params, 3) == 2
    assert (replication_for(params, brokers=1), min_insync_for(params, 1)) == (1, 1)


def test_unknown_params_are_rejected() -> None:
    with pytest.raises(ValueError, match="partitons"):
        KafkaParams.model_validate({"partitons": 8})


def test_pom_pins_the_version_the_code_uses() -> None:
    ns = {"m": "http://maven.apache.org/POM/4.0.0"}
    root = ET.parse(POM).getroot()
    assert root.findtext("m:properties/m:kafka.version", namespaces=ns) == KAFKA_VERSION
    assert re.fullmatch(r"3\.9\.\d+", KAFKA_VERSION)
    artifacts = {a.text for a in root.iterfind(".//m:dependency/m:artifactId", ns)}
    assert {"kafka_2.13", "slf4j-reload4j"} <= artifacts


def test_local_node_listens_on_loopback_with_safe_topic_defaults() -> None:
    node = NodeConfig(2, "127.0.0.1", "127.0.0.1", 19092, 19093, "/tmp/n2/data")
    text = render_server_properties(
        node, "1@127.0.0.1:1,2@127.0.0.1:19093,3@127.0.0.1:3", 3, 2, ClusterSizes()
    )
    conf = properties(text)
    assert conf["process.roles"] == "broker,controller"
    assert conf["node.id"] == "2"
    assert conf["listeners"] == "PLAINTEXT://127.0.0.1:19092,CONTROLLER://127.0.0.1:19093"
    assert conf["default.replication.factor"] == "3"
    assert conf["min.insync.replicas"] == "2"
    assert conf["unclean.leader.election.enable"] == "false"
    assert "log.flush.interval.messages" not in conf


def test_cloud_nodes_share_templates_and_cluster_id() -> None:
    recipe = SYSTEM.cloud
    assert isinstance(recipe, KafkaCloud)
    cluster = {"broker": ["10.0.0.5", "10.0.0.6", "10.0.0.7"]}
    files = recipe.node_files("broker", 2, cluster, KafkaParams(log_flush_interval_messages=1))
    conf = properties(files["/etc/kafka/server.properties"])
    assert conf["node.id"] == "3"
    assert conf["controller.quorum.voters"] == ("1@10.0.0.5:9093,2@10.0.0.6:9093,3@10.0.0.7:9093")
    assert conf["advertised.listeners"] == "PLAINTEXT://10.0.0.7:9092"
    assert conf["min.insync.replicas"] == "2"
    assert conf["log.flush.interval.messages"] == "1"
    assert "-Xmx6g" in files["/etc/systemd/system/kafka.service"]
    starts = " ".join(recipe.start_commands("broker", 0, cluster))
    assert cluster_id(cluster["broker"]) in starts
    assert cluster_id(cluster["broker"]) == cluster_id(list(cluster["broker"]))
    assert any(KAFKA_VERSION in c for c in recipe.install_commands())
    assert set(recipe.ports()) == {9092, 9093}
    assert conf["log.dirs"].startswith(recipe.data_dir + "/")
    assert recipe.endpoints(cluster).hosts == tuple(f"{a}:9092" for a in cluster["broker"])


def test_cluster_ids_look_like_kafka_uuids() -> None:
    ids = {new_cluster_id() for _ in range(50)}
    assert len(ids) == 50
    assert all(re.fullmatch(r"[A-Za-z0-9_][A-Za-z0-9_-]{21}", i) for i in ids)
    assert new_cluster_id("x") == new_cluster_id("x") != new_cluster_id("y")


def test_commit_point_stops_at_the_first_unacknowledged_offset() -> None:
    acks = AckTracker()
    for offset in range(10, 15):
        acks.handed_out(0, offset)
    acks.handed_out(1, 3)
    for offset in (10, 11, 13, 14):
        acks.acked(0, offset)
    assert acks.commit_points() == {0: 12, 1: 3}
    acks.committed({0: 12, 1: 3})
    assert acks.commit_points() == {}
    acks.acked(0, 12)
    acks.acked(1, 3)
    assert acks.commit_points() == {0: 15, 1: 4}
    assert acks.commit_points([1]) == {1: 4}
    acks.forget([0])
    assert acks.commit_points() == {1: 4}


def test_rewound_offsets_are_not_committed() -> None:
    acks = AckTracker()
    for offset in range(5):
        acks.handed_out(0, offset)
    acks.acked(0, 0)
    acks.rewind(0, 1)
    assert acks.unacked() == 0
    assert acks.commit_points() == {0: 1}


@pytest.mark.parametrize("kafka_client", CLIENTS)
def test_unreachable_broker_fails_fast_naming_host(
    monkeypatch: pytest.MonkeyPatch, kafka_client: str
) -> None:
    monkeypatch.setattr(client, "BOOTSTRAP_TIMEOUT", 2.0)
    (port,) = free_ports(1)
    endpoints = Endpoints(hosts=(f"127.0.0.1:{port}",))
    started = time.monotonic()
    with pytest.raises(BrokerConnectionError, match=f"127.0.0.1:{port}") as err:
        SYSTEM.connect(endpoints, KafkaParams(client=kafka_client), Destination("t"))
    assert time.monotonic() - started < 30
    assert "\n" not in str(err.value)


def test_each_client_has_its_adapter_and_is_named_in_the_run_context() -> None:
    for name in CLIENTS:
        assert SYSTEM.client(KafkaParams(client=name)) == name
    assert SYSTEM.can_pipeline and not SYSTEM.asyncio
    with pytest.raises(ValueError, match="client"):
        KafkaParams.model_validate({"client": "aiokafka"})


class _Cluster:
    """What kafka-python's partitioner sees of a topic's partitions."""

    def __init__(self, available: set[int]) -> None:
        self.available = available

    def topics(self) -> set[str]:
        return {"t"}

    def partitions_for_topic(self, topic: str) -> set[int]:
        return set(range(8))

    def available_partitions_for_topic(self, topic: str) -> set[int]:
        return self.available


def test_batch_partitioner_sticks_to_one_partition_per_batch() -> None:
    from brokers.kafka.partitioner import BatchPartitioner

    partitioner = BatchPartitioner()
    cluster = _Cluster(set(range(8)))
    chosen = []
    for _ in range(50):
        partitioner.next_batch()
        batch = {partitioner.partition("t", None, None, b"v", b"v", cluster) for _ in range(10)}
        assert len(batch) == 1
        chosen += batch
    assert all(a != b for a, b in itertools.pairwise(chosen))
    assert len(set(chosen)) > 4
    cluster.available = {3}  # the leader of the current partition went away
    assert partitioner.partition("t", None, None, b"v", b"v", cluster) == 3
    keyed = {partitioner.partition("t", b"k", b"k", b"v", b"v", cluster) for _ in range(5)}
    assert len(keyed) == 1


def test_registered_with_local_and_cloud() -> None:
    system = registry.get("kafka")
    assert system.local is not None and system.local.topologies == ("single", "cluster")
    assert system.reference_topology.roles == {"broker": 3}
    assert system.cloud is not None


# -- against a real cluster -------------------------------------------------------------------


@pytest.fixture(scope="module")
def cluster(local_brokers: LocalBrokers) -> Endpoints:
    return local_brokers.get(SYSTEM, "cluster").endpoints


@pytest.mark.slow
@pytest.mark.parametrize("kafka_client", ["kafka-python"])  # the default: conformance
def test_round_trip(cluster: Endpoints, kafka_client: str) -> None:
    params = KafkaParams(partitions=4, client=kafka_client)
    name = f"round_trip_{kafka_client.replace('-', '_')}"
    with sender_and_receiver(SYSTEM, cluster, params, name) as (sender, receiver):
        sent = [b"message-%d" % i for i in range(30)]
        for i in range(0, 30, 10):
            sender.send(sent[i : i + 10])
        assert sorted(receive_bodies(receiver, set(sent))) == sorted(sent)
        assert receiver.receive(10) == []


@pytest.mark.slow
@pytest.mark.parametrize("kafka_client", ["kafka-python"])  # the default: conformance
def test_unacknowledged_messages_come_back(cluster: Endpoints, kafka_client: str) -> None:
    params = KafkaParams(partitions=2, commit_interval=0.1, client=kafka_client)
    destination = Destination(f"redelivery_{kafka_client.replace('-', '_')}")
    SYSTEM.prepare(cluster, params, destination)
    sender = SYSTEM.connect(cluster, params, destination)
    sender.send([b"m%d" % i for i in range(20)])
    sender.close()

    first = SYSTEM.connect(cluster, params, destination)
    got: list = []
    deadline = time.monotonic() + 60
    while len(got) < 20 and time.monotonic() < deadline:
        got += first.receive(10)
    assert len(got) == 20
    acked = [m for m in got if int(m.body[1:]) % 2 == 0]
    first.ack([m.receipt for m in acked])
    first.close()  # commits what was acknowledged, nothing past the first gap per partition

    second = SYSTEM.connect(cluster, params, destination)
    try:
        unacked = {m.body for m in got} - {m.body for m in acked}
        assert len(unacked) == 10
        again = receive_bodies(second, unacked)
        assert unacked <= set(again)
    finally:
        second.close()


@pytest.mark.slow
@pytest.mark.parametrize("kafka_client", CLIENTS)
def test_acknowledged_offsets_are_committed_before_partitions_move(
    cluster: Endpoints, kafka_client: str
) -> None:
    # No periodic commit during the test: only the commit on revocation can stop the
    # second receiver from getting the first one's acknowledged messages again.
    params = KafkaParams(partitions=4, commit_interval=300, client=kafka_client)
    destination = Destination(f"rebalance_{kafka_client.replace('-', '_')}")
    SYSTEM.prepare(cluster, params, destination)
    sender = SYSTEM.connect(cluster, params, destination)
    sent = [b"r%d" % i for i in range(40)]
    for i in range(0, len(sent), 10):
        sender.send(sent[i : i + 10])
    sender.close()

    first = SYSTEM.connect(cluster, params, destination)
    second = SYSTEM.connect(cluster, params, destination)
    try:
        assert sorted(receive_bodies(first, set(sent))) == sorted(sent)  # all acknowledged
        again: list[bytes] = []
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and not _owns_partitions(second):
            again += _receive_once(second)  # joins the group: the first must give way
            again += _receive_once(first)
        assert _owns_partitions(second), "the second receiver never got a partition"
        again += receive_bodies(second, {b"none"}, timeout=3)
        assert again == []
    finally:
        first.close()
        second.close()


def _receive_once(adapter: Any) -> list[bytes]:
    messages = adapter.receive(10)
    adapter.ack([m.receipt for m in messages])
    return [m.body for m in messages]


def _owns_partitions(adapter: Any) -> bool:
    consumer = adapter._consumer
    return consumer is not None and bool(consumer.assignment())


@pytest.mark.slow
@pytest.mark.parametrize("kafka_client", CLIENTS)
def test_a_consumer_has_joined_once_the_group_assigned_it_even_nothing(
    cluster: Endpoints, kafka_client: str
) -> None:
    # One partition, two consumers: one of them is assigned nothing, and has joined all
    # the same (the senders of a local point wait for every receiver to join).
    params = KafkaParams(partitions=1, client=kafka_client)
    destination = Destination(f"joined_{kafka_client.replace('-', '_')}")
    SYSTEM.prepare(cluster, params, destination)
    first = SYSTEM.connect(cluster, params, destination)
    second = SYSTEM.connect(cluster, params, destination)
    try:
        assert not first.joined() and not second.joined()  # receiving joins the group
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not (first.joined() and second.joined()):
            for adapter in (first, second):
                adapter.receive(10)
        assert first.joined() and second.joined()
        deadline = time.monotonic() + 10  # the last join's rebalance settles
        while time.monotonic() < deadline and _owns_partitions(first) == _owns_partitions(second):
            for adapter in (first, second):
                adapter.receive(10)
        assert sorted([_owns_partitions(first), _owns_partitions(second)]) == [False, True]
    finally:
        first.close()
        second.close()


@pytest.mark.slow
@pytest.mark.parametrize("kafka_client", CLIENTS)
def test_batches_in_flight_are_each_received_once(cluster: Endpoints, kafka_client: str) -> None:
    params = KafkaParams(partitions=4, client=kafka_client)
    name = f"in_flight_{kafka_client.replace('-', '_')}"
    with sender_and_receiver(SYSTEM, cluster, params, name) as (sender, receiver):
        assert isinstance(sender, KafkaAdapterBase) and sender.pipelined
        confirmed: list[bytes] = []
        in_flight: deque[tuple[list[bytes], Any]] = deque()
        most = 0
        for b in range(40):
            batch = [b"f%d-%d" % (b, i) for i in range(1 + b % 10)]
            in_flight.append((batch, sender.submit(batch)))
            most = max(most, len(in_flight))
            if len(in_flight) == 8:
                done, confirmation = in_flight.popleft()
                assert sender.confirm(confirmation) > 0
                confirmed += done
        while in_flight:
            done, confirmation = in_flight.popleft()
            sender.confirm(confirmation)
            confirmed += done
        assert most == 8 and len(confirmed) == sum(1 + b % 10 for b in range(40))
        received = Counter(receive_bodies(receiver, set(confirmed)))
        received.update(receive_bodies(receiver, {b"none"}, timeout=2))
        assert set(received) == set(confirmed)
        assert max(received.values()) == 1


@pytest.mark.slow
@pytest.mark.parametrize("kafka_client", CLIENTS)
def test_a_batch_lands_on_one_partition(cluster: Endpoints, kafka_client: str) -> None:
    params = KafkaParams(partitions=8, client=kafka_client)
    name = f"sticky_{kafka_client.replace('-', '_')}"
    with sender_and_receiver(SYSTEM, cluster, params, name) as (sender, receiver):
        batches = [[b"s%d-%d" % (b, i) for i in range(10)] for b in range(20)]
        for batch in batches:
            sender.send(batch)
        partitions: dict[bytes, set[int]] = {}
        wanted = {body for batch in batches for body in batch}
        deadline = time.monotonic() + 60
        while wanted and time.monotonic() < deadline:
            messages = receiver.receive(10)
            for m in messages:
                partitions.setdefault(m.body.split(b"-")[0], set()).add(m.receipt[0])
                wanted.discard(m.body)
            receiver.ack([m.receipt for m in messages])
        assert not wanted
        assert all(len(p) == 1 for p in partitions.values()), partitions
        if kafka_client == "kafka-python":  # each batch picks another partition
            assert len(set().union(*partitions.values())) > 1


@pytest.mark.slow
def test_describe_reads_back_the_safe_configuration(cluster: Endpoints) -> None:
    params = KafkaParams(partitions=8)
    SYSTEM.prepare(cluster, params, Destination("described"))
    described = SYSTEM.describe(cluster, params)
    assert described["version"] == ".".join(KAFKA_VERSION.split(".")[:2])
    assert described["brokers"] == 3
    assert described["replication_factor"] == 3
    assert described["min_insync_replicas"] == "2"
    (topic,) = described["topics"]
    assert topic["partitions"] == 8
    assert topic["in_sync_replicas_min"] >= 2  # the ISR is dynamic; a write needs 2
    for broker in described["broker_configs"].values():
        assert broker["default.replication.factor"] == "3"
        assert broker["unclean.leader.election.enable"] == "false"


@pytest.mark.slow
def test_flush_every_message_variant_is_set_on_the_topic(cluster: Endpoints) -> None:
    params = KafkaParams(partitions=2, log_flush_interval_messages=1)
    SYSTEM.prepare(cluster, params, Destination("flushed"))
    described = SYSTEM.describe(cluster, params)
    (topic,) = described["topics"]
    assert topic["name"] == "flushed"
    assert topic["configs"]["flush.messages"] == "1"
    assert topic["replication_factor"] == 3


# -- keys and the per-key order check (tests/keyed.py) ---------------------------------------


@pytest.mark.slow
@pytest.mark.integration
def test_a_keyed_run_counts_no_reordering(cluster: Endpoints, spark, tmp_path) -> None:
    from tests.conftest import SCENARIOS
    from tests.keyed import analysed, keyed_run

    # The whole analysis job: the summary's reordered is a checked 0, not an empty cell.
    row = analysed(keyed_run(SCENARIOS / "kafka-keys.toml", cluster, tmp_path, keys=50), spark)
    assert int(row["sent"]) > 0 and row["lost"] == "0"
    assert row["reordered"] == "0"


@pytest.mark.slow
@pytest.mark.integration
def test_an_injected_reordering_is_counted_once(cluster: Endpoints, spark, tmp_path) -> None:
    from tests.keyed import inject_reordering

    assert (
        inject_reordering(
            SYSTEM, cluster, KafkaParams(partitions=4), "keys_inject", spark, tmp_path
        )
        == 1
    )
