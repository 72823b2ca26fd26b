"""KMQ: marker encoding without a server, then individual acknowledgements and redelivery
(with either client library) on a real 3-node KRaft cluster."""

from __future__ import annotations

import time
from collections import Counter

import pytest

from brokers import registry
from brokers.base import Destination, Endpoints
from brokers.kafka import SYSTEM as KAFKA
from brokers.kmq import SYSTEM, markers
from brokers.kmq.params import KmqParams
from tests.conftest import LocalBrokers

pytestmark = pytest.mark.kmq


def test_markers_round_trip() -> None:
    start = markers.parse(markers.key(3, 1234), markers.start(1_700_000_000_000))
    assert start == markers.Marker(3, 1234, True, 1_700_000_000_000)
    end = markers.parse(markers.key(0, 7), markers.end())
    assert end == markers.Marker(0, 7, False)
    assert markers.parse(None, b"E") is None
    assert markers.parse(b"x:y", b"E") is None
    assert markers.parse(b"1:2", b"something else") is None


class _Future:
    def get(self, timeout: float) -> None:
        return None


class _Producer:
    def __init__(self) -> None:
        self.sent: list[tuple[str, object]] = []

    def send(self, topic: str, value: object = None, **_: object) -> _Future:
        self.sent.append((topic, value))
        return _Future()


class _Record:
    def __init__(self, offset: int) -> None:
        self.offset = offset
        self.value = b"body-%d" % offset


class _Fetcher:
    """The queue partition as a fetch sees it: ``log`` offsets, or nothing in time."""

    def __init__(self, log: list[int] | None) -> None:
        self.log = log
        self.position = 0

    def assign(self, partitions: object) -> None:
        pass

    def seek(self, tp: object, offset: int) -> None:
        self.position = offset

    def poll(self, timeout_ms: int, max_records: int) -> dict[object, list[_Record]]:
        if self.log is None:
            return {}
        from kafka.structs import TopicPartition

        records = [_Record(o) for o in self.log if o >= self.position]
        return {TopicPartition("q", 0): records} if records else {}


def _tracker(monkeypatch: pytest.MonkeyPatch):
    from brokers.kmq import tracker

    monkeypatch.setattr(tracker, "FETCH_TIMEOUT", 0.2)
    t = tracker.RedeliveryTracker(Endpoints(hosts=("127.0.0.1:1",)), KmqParams(), "q")
    t.open[0] = {(0, 5): (0, 100), (0, 7): (0, 101)}
    return t


def test_a_fetch_that_times_out_keeps_the_markers_open(monkeypatch: pytest.MonkeyPatch) -> None:
    t = _tracker(monkeypatch)
    producer = _Producer()
    t._redeliver(producer, _Fetcher(None), 0, [(5, 0), (7, 0)])
    assert producer.sent == [] and set(t.open[0]) == {(0, 5), (0, 7)}  # retried next round


def test_only_messages_gone_from_the_log_are_given_up(monkeypatch: pytest.MonkeyPatch) -> None:
    t = _tracker(monkeypatch)
    producer = _Producer()
    t._redeliver(producer, _Fetcher([6, 7, 8]), 0, [(5, 0), (7, 0)])  # 5 was deleted
    assert ("q", b"body-7") in producer.sent and t.redelivered == 1
    assert t.open[0] == {}  # 7 re-sent, 5 gone: both markers ended


def test_defaults_and_reuse_of_kafka() -> None:
    params = KmqParams()
    assert params.redelivery_timeout == 15.0
    assert params.client == "confluent-kafka" and SYSTEM.client(params) == "confluent-kafka"
    assert SYSTEM.client(KmqParams(client="kafka-python")) == "kafka-python"
    assert SYSTEM.can_pipeline
    assert params.acks == "all" and params.commit_interval == 10.0
    system = registry.get("kmq")
    assert system.local is KAFKA.local and system.cloud is KAFKA.cloud
    assert system.reference_topology.roles == {"broker": 3}
    with pytest.raises(ValueError, match="redelivery"):
        KmqParams.model_validate({"redelivery": 3})


@pytest.fixture(scope="module")
def cluster(local_brokers: LocalBrokers) -> Endpoints:
    return local_brokers.get(SYSTEM, "cluster").endpoints


@pytest.mark.slow
@pytest.mark.parametrize("kafka_client", ["confluent-kafka", "kafka-python"])
def test_dropped_acks_are_redelivered(cluster: Endpoints, kafka_client: str) -> None:
    params = KmqParams(
        partitions=4, redelivery_timeout=3.0, commit_interval=1.0, client=kafka_client
    )
    destination = Destination(f"kmq_dropped_acks_{kafka_client.replace('-', '_')}")
    SYSTEM.prepare(cluster, params, destination)
    sender = SYSTEM.connect(cluster, params, destination)
    sent = [b"msg-%03d" % i for i in range(100)]
    for i in range(0, len(sent), 10):
        sender.send(sent[i : i + 10])
    sender.close()

    receiver = SYSTEM.connect(cluster, params, destination)
    deliveries: Counter[bytes] = Counter()
    redelivered: Counter[bytes] = Counter()
    acked: set[bytes] = set()
    dropped: set[bytes] = set()
    deadline = time.monotonic() + 90
    try:
        while acked != set(sent) and time.monotonic() < deadline:
            messages = receiver.receive(10)
            keep = []
            for m in messages:
                deliveries[m.body] += 1
                if m.redelivered:
                    redelivered[m.body] += 1
                # The first delivery of every fifth message is "lost" by the receiver.
                if int(m.body[4:]) % 5 == 0 and m.body not in dropped:
                    dropped.add(m.body)
                else:
                    keep.append(m.receipt)
                    acked.add(m.body)
            receiver.ack(keep)
    finally:
        receiver.close()

    assert acked == set(sent), f"{len(set(sent) - acked)} messages never arrived again"
    assert dropped == {b for b in sent if int(b[4:]) % 5 == 0}
    duplicates = sum(deliveries.values()) - len(sent)
    assert duplicates >= len(dropped)
    assert set(redelivered) >= dropped


@pytest.mark.slow
def test_describe_reads_back_both_topics(cluster: Endpoints) -> None:
    params = KmqParams(partitions=4)
    SYSTEM.prepare(cluster, params, Destination("kmq_described"))
    described = SYSTEM.describe(cluster, params)
    names = [t["name"] for t in described["topics"]]
    assert names == ["kmq_described", markers.markers_topic("kmq_described")]
    for topic in described["topics"]:
        assert topic["replication_factor"] == 3
        assert topic["configs"]["min.insync.replicas"] == "2"
    assert described["redelivery_timeout_s"] == 15.0


def test_a_rebalance_forgets_only_partitions_that_moved(monkeypatch: pytest.MonkeyPatch) -> None:
    import asyncio

    from kafka.structs import TopicPartition

    t = _tracker(monkeypatch)
    t.open[1] = {(1, 3): (0, 7)}
    t.read_to.update({0: 102, 1: 8})
    handover = t._listener()
    markers_tp = [TopicPartition(t.markers, p) for p in (0, 1)]
    asyncio.run(handover.on_partitions_revoked(markers_tp))
    assert set(t.open) == {0, 1}  # the consumer keeps its place in partitions it keeps
    asyncio.run(handover.on_partitions_assigned(markers_tp[:1]))
    assert set(t.open) == {0} and set(t.read_to) == {0}
