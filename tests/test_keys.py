"""Message keys and the per-key order check: the scenario's keys, the key a message carries
(the same at both ends), the receiver's late marks and the analysis's ``reordered``."""

from __future__ import annotations

import collections
import random
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest
from pydantic import ValidationError

from brokers import registry
from brokers.base import KeySupport
from brokers.batches import KeyedBatch, ReceivedBatch, keys_of
from workload.engine import message
from workload.engine.keys import KeyScheme, OrderTracker
from workload.engine.node_records import write_node
from workload.engine.recording import WorkerRecorder
from workload.engine.worker import ReceiverLoop, SenderLoop, WorkerSettings
from workload.model.errors import ScenarioError
from workload.model.record import BrokerRecord
from workload.model.scenario_file import load_scenario
from workload.model.sections import LoadSection

TAG = "k0000000.0"


# -- the scenario's keys ------------------------------------------------------------------


def test_keys_are_bounded_and_key_zipf_needs_keys() -> None:
    assert LoadSection().keys is None and LoadSection().key_zipf is None
    assert LoadSection(keys=1).keys == 1 and LoadSection(keys=1_000_000).keys == 1_000_000
    for bad in ({"keys": 0}, {"keys": 1_000_001}, {"keys": 10, "key_zipf": 0.0}):
        with pytest.raises(ValidationError):
            LoadSection(**bad)
    with pytest.raises(ValidationError, match="key_zipf shapes the distribution of keys"):
        LoadSection(key_zipf=1.2)
    with pytest.raises(ValidationError):
        LoadSection(keys=10, key_zipf=float("inf"))
    assert LoadSection(keys=10, key_zipf=10.0).key_zipf == 10.0


def write(tmp_path: Path, system: str, load: str) -> Path:
    path = tmp_path / "keys.toml"
    path.write_text(
        f'name = "k"\n[broker]\nsystem = "{system}"\ntopology = "single"\n'
        f'[load]\nduration = "5s"\n{load}\n'
    )
    return path


def test_keys_on_a_system_that_sends_none_is_an_error_naming_the_line(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError) as error:
        load_scenario(write(tmp_path, "rabbitmq", "keys = 8"))
    (line,) = error.value.lines
    assert line.startswith(f"{tmp_path / 'keys.toml'}: load.keys: RabbitMQ sends no message keys")
    assert line.endswith("(line 7)") and "kafka" in line and "nats" in line and "redis" in line
    assert load_scenario(write(tmp_path, "kafka", "keys = 8\nkey_zipf = 0.9")).load.keys == 8


def test_zipf_without_keys_names_the_key(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError) as error:
        load_scenario(write(tmp_path, "kafka", "key_zipf = 1.5"))
    assert any("load.key_zipf: key_zipf shapes" in line for line in error.value.lines)


def test_the_keys_fields_are_in_the_json_schema() -> None:
    schema = LoadSection.model_json_schema()["properties"]
    assert schema["keys"]["anyOf"][0] == {"maximum": 1_000_000, "minimum": 1, "type": "integer"}
    assert schema["key_zipf"]["anyOf"][0]["exclusiveMinimum"] == 0
    assert "Zipf" in schema["key_zipf"]["description"]


def test_systems_declare_how_they_send_keys() -> None:
    systems = registry.systems()
    assert systems["kafka"].keys == KeySupport("record key", ordered=True)
    assert systems["redpanda"].keys == systems["kmq"].keys == systems["kafka"].keys
    assert systems["nats"].keys == KeySupport("subject suffix", ordered=True)
    assert systems["pulsar"].keys == KeySupport("message key", ordered=False)
    assert systems["redis"].keys == KeySupport("stream by key", ordered=True)
    assert systems["rabbitmq"].keys is None and systems["sqs"].keys is None
    assert BrokerRecord(keys={"sent_as": "record key", "ordered": True}).key_order
    assert not BrokerRecord(keys={"sent_as": "x", "ordered": False}).key_order
    assert not BrokerRecord().key_order  # a run before keys, or a system without them


# -- the key of a message ------------------------------------------------------------------


@pytest.mark.parametrize("zipf", [None, 0.8, 1.1])
def test_both_ends_derive_the_same_key(zipf: float | None) -> None:
    scheme = KeyScheme(1000, zipf)
    for node, worker in [(0, 0), (3, 7), (999, 9999)]:
        small = [k for lo in range(0, 4998, 7) for k in scheme.keys(node, worker, lo, 7)]
        large = scheme.keys(node, worker, 0, 5000 // 7 * 7)
        received = scheme.of_columns([node] * len(large), [worker] * len(large), range(len(large)))
        assert small == large == received.tolist()
        assert [scheme.key_of(node, worker, s) for s in range(100)] == large[:100]
        assert all(0 <= k < 1000 for k in large)
    # Another worker's messages get other keys (the identity is hashed whole).
    assert scheme.keys(0, 0, 0, 100) != scheme.keys(0, 1, 0, 100)


def test_keys_follow_their_distribution() -> None:
    n = 200_000
    uniform = collections.Counter(KeyScheme(10).keys(1, 2, 0, n))
    assert set(uniform) == set(range(10))
    assert all(abs(c - n / 10) < 0.03 * n / 10 for c in uniform.values()), uniform
    zipf = collections.Counter(KeyScheme(100, 1.0).keys(1, 2, 0, n))
    weights = 1 / np.arange(1, 101)
    expected = n * weights / weights.sum()
    for k in (0, 1, 9, 99):
        assert abs(zipf[k] - expected[k]) < 0.1 * expected[k] + 30, (k, zipf[k], expected[k])
    assert zipf[0] > zipf[1] > zipf[9]


def test_a_keyed_load_sends_keyed_batches() -> None:
    load = LoadSection(keys=50, key_zipf=1.0, max_send_batch=40)
    pool = message.message_pool(10, 100, seed=1)
    sender = SenderLoop(
        WorkerSettings(TAG, 2, 5, load, pool, lambda: False), WorkerRecorder("sender", 2, 5)
    )
    scheme = KeyScheme(50, 1.0)
    for _ in range(20):
        batch = sender.next_batch()
        keys = keys_of(batch.messages)
        assert isinstance(batch.messages, KeyedBatch) and keys is not None
        assert len(keys) == len(batch.messages) == batch.hi - batch.lo + 1
        ids = message.Reader(TAG).read(batch.messages)
        assert list(ids.seqs) == list(range(batch.lo, batch.hi + 1))
        assert list(keys) == [b"k%d" % scheme.key_of(2, 5, s) for s in ids.seqs]
    keyless = SenderLoop(
        WorkerSettings(TAG, 0, 0, LoadSection(), pool, lambda: False),
        WorkerRecorder("sender", 0, 0),
    )
    batch = keyless.next_batch().messages
    assert keys_of(batch) is None and not isinstance(batch, KeyedBatch)


# -- late marks at the receiver ---------------------------------------------------------------


def reference_late(
    scheme: KeyScheme, ids: list[tuple[int, int, int]], again: set[int] = frozenset()
) -> list[int]:
    """Late positions worked out message by message, for the tracker to match."""
    highest: dict[tuple[int, int, int], int] = {}
    late = []
    for i, (n, w, s) in enumerate(ids):
        if i in again:
            continue
        group = (n, w, scheme.key_of(n, w, s))
        if s < highest.get(group, -1):
            late.append(i)
        highest[group] = max(highest.get(group, -1), s)
    return late


@pytest.mark.parametrize("size", [5, 31, 32, 500])
def test_the_tracker_marks_exactly_the_late_messages(size: int) -> None:
    rng = random.Random(size)
    scheme = KeyScheme(4, 1.0)
    for _ in range(30):
        ids = [(rng.randrange(2), rng.randrange(3), rng.randrange(60)) for _ in range(size)]
        again = set(rng.sample(range(size), size // 10))
        tracker = OrderTracker(scheme)
        got: list[int] = []
        # In two batches, the second remembering the first; numpy columns for large ones.
        half = size // 2
        for lo, hi in ((0, half), (half, size)):
            part = ids[lo:hi]
            cols = (
                [np.array(c) for c in zip(*part, strict=True)]
                if len(part) >= 32
                else [list(c) for c in zip(*part, strict=True)]
            )
            marked = tracker.late(*cols, again=sorted(i - lo for i in again if lo <= i < hi))
            got += [lo + i for i in marked]
        assert got == reference_late(scheme, ids, again)


def test_a_displaced_message_makes_the_ones_it_overtook_late() -> None:
    tracker = OrderTracker(KeyScheme(1))
    assert tracker.late([0] * 6, [0] * 6, [0, 1, 2, 4, 3, 5]) == [4]  # seq 3, after 4
    assert tracker.late([0] * 3, [0] * 3, [9, 6, 7]) == [1, 2]
    assert tracker.late([0] * 2, [1] * 2, [0, 1]) == []  # another sender worker: its own order
    assert tracker.late([0], [0], [5], again=[0]) == []  # a redelivery is not late


def receive(loop: ReceiverLoop, bodies: list[bytes], redelivered: list[int] | None = None) -> None:
    loop.handle(ReceivedBatch(bodies, list(range(len(bodies))), redelivered or []))


def test_receiver_records_late_messages_in_the_received_table(tmp_path: Path) -> None:
    load = LoadSection(keys=1)
    stamper = message.Stamper(TAG, 0, 0)
    pool = message.message_pool(1, 100, seed=2)
    stamped = {s: stamper.stamp_batch(pool, s, 1, 1)[0] for s in range(40)}
    recorders = []
    for worker, batches in enumerate(
        (
            [[0, 1, 2, 4, 3, 5]],  # 3 arrives after 4
            [[*range(6, 40), 7], [1]],  # a numpy batch; then copies of 7 and 1
        )
    ):
        recorder = WorkerRecorder("receiver", 0, worker)
        loop = ReceiverLoop(WorkerSettings(TAG, 0, worker, load, [], lambda: False), recorder)
        for seqs in batches:
            bodies = [stamped[s] for s in seqs]
            receive(loop, [b"not ours", *bodies], [1] if len(seqs) == 1 else [])
        recorders.append(recorder)
    write_node(tmp_path, "r", 0, "receiver", 0, recorders)
    (path,) = (tmp_path / "raw" / "received").glob("*.parquet")
    table = pq.read_table(path).to_pydict()
    late = [
        (w, s)
        for s, flag, w in zip(table["seq"], table["late"], [0] * 6 + [1] * 36, strict=True)
        if flag
    ]
    assert late == [(0, 3), (1, 7)]  # the copy of 1 was flagged redelivered: not late


def test_a_keyless_receiver_marks_nothing(tmp_path: Path) -> None:
    stamper = message.Stamper(TAG, 0, 0)
    pool = message.message_pool(1, 100, seed=2)
    recorder = WorkerRecorder("receiver", 0, 0)
    loop = ReceiverLoop(WorkerSettings(TAG, 0, 0, LoadSection(), [], lambda: False), recorder)
    receive(loop, [stamper.stamp_batch(pool, s, 1, 1)[0] for s in (5, 3)])
    assert loop.order is None and not recorder.rx_late
    write_node(tmp_path, "r", 0, "receiver", 0, [recorder])
    (path,) = (tmp_path / "raw" / "received").glob("*.parquet")
    assert pq.read_table(path).column("late").to_pylist() == [False, False]


# -- reordered, in the analysis -------------------------------------------------------------


def point_entry(point: int, keys: int | None) -> dict[str, Any]:
    return {"point": point, "load": {"keys": keys}}


def test_reordered_is_empty_without_keys_or_without_the_promise() -> None:
    from analysis import transforms as tf
    from analysis.job import order_columns
    from analysis.records import PointRecords
    from workload.model.record import RunContext

    points = [PointRecords(0, tf.DRAINED), PointRecords(1, tf.DRAINED)]
    unkeyed = RunContext.of(
        {
            "broker": {"keys": {"sent_as": "record key", "ordered": True}},
            "points": [point_entry(0, None), point_entry(1, None)],
        }
    )
    assert order_columns(unkeyed, points, None) == {}  # type: ignore[arg-type]
    no_promise = RunContext.of(
        {"broker": {"keys": {"sent_as": "k", "ordered": False}}, "points": [point_entry(0, 5)]}
    )
    assert order_columns(no_promise, points, None) == {}  # type: ignore[arg-type]


def received_rows(rows: list[tuple[int, int, int, bool]], point: int = 0) -> list[tuple[Any, ...]]:
    """Received rows (sender worker, seq, receiver node, late) of sender node 0."""
    return [("r", point, 0, w, s, rn, 1, late, 100) for w, s, rn, late in rows]


@pytest.mark.spark
@pytest.mark.slow
def test_reordered_counts_late_messages_received_once(spark) -> None:
    from analysis import transforms as tf
    from analysis.raw_tables import spark_schema
    from workload.model.results import RECEIVED_SCHEMA

    rows = received_rows(
        [
            *((0, s, 0, False) for s in (0, 1, 2, 4)),
            (0, 3, 0, True),  # an injected out-of-order pair: 3 after 4 — counted
            (0, 5, 0, False),
            (0, 7, 0, False),
            (0, 6, 0, True),  # late, but a copy of 6 came to another receiver: a redelivery
            (0, 6, 1, False),
            (1, 2, 1, False),
            (1, 1, 1, True),  # late, and received twice at the same receiver: a duplicate
            (1, 1, 1, True),
        ]
    ) + received_rows([(0, 9, 0, False), (0, 8, 0, True), (0, 1, 0, None)], point=1)
    received = spark.createDataFrame(rows, spark_schema(RECEIVED_SCHEMA))
    got = {r["point"]: r["reordered"] for r in tf.reordered(received).collect()}
    assert got == {0: 1, 1: 1}
    none_late = spark.createDataFrame(
        received_rows([(0, 1, 0, False)]), spark_schema(RECEIVED_SCHEMA)
    )
    assert tf.reordered(none_late).collect() == []


@pytest.mark.spark
@pytest.mark.slow
def test_order_columns_claim_only_whole_records(spark) -> None:
    from analysis import transforms as tf
    from analysis.job import order_columns
    from analysis.raw_tables import spark_schema
    from analysis.records import PointRecords
    from workload.model.record import RunContext
    from workload.model.results import RECEIVED_SCHEMA

    context = RunContext.of(
        {
            "broker": {"keys": {"sent_as": "record key", "ordered": True}},
            "points": [
                point_entry(0, 4),
                point_entry(1, 4),
                point_entry(2, 4),
                point_entry(3, None),
            ],
        }
    )
    rows = received_rows([(0, 2, 0, False), (0, 1, 0, True)], point=1)
    received = spark.createDataFrame(rows, spark_schema(RECEIVED_SCHEMA))
    points = [
        PointRecords(0, tf.DRAINED),
        PointRecords(1, tf.STOPPED),
        PointRecords(2, tf.INCOMPLETE),
        PointRecords(3, tf.DRAINED),
    ]
    assert order_columns(context, points, received) == {
        0: {"reordered": 0},  # checked, none found: a 0 that was checked
        1: {"reordered": 1},
        2: {"reordered": None},  # a node's records are missing: nothing claimed
    }
