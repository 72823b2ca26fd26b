"""Producers and consumers counted apart: ``sender_threads`` and ``receiver_threads``
(default ``threads``), swept like the other load keys, resolved in every point's record, and
what nodes, processes, the preflight, the summary, compare and the report make of them."""

from __future__ import annotations

from pathlib import Path

import pytest

from analysis.compare import _key, point_name
from analysis.context_tables import _from_load
from analysis.job import point_rows
from analysis.records import expected_parts
from analysis.summary_row import SummaryRow
from analysis.summary_table import TABLE
from brokers import registry
from tests.conftest import SCENARIOS
from tests.support import node_spec, small_scenario
from workload.engine.context import point_entry
from workload.engine.node import processes_for, split
from workload.engine.preflight import disk_estimate
from workload.model.errors import ScenarioError
from workload.model.record import PointEntry, RunContext
from workload.model.results import PartKey
from workload.model.scenario import Scenario, expand
from workload.model.scenario_file import load_scenario
from workload.model.sections import LoadSection


def scenario(tmp_path: Path, text: str) -> Scenario:
    return small_scenario(tmp_path, "redis", text)


def test_both_default_to_threads_and_are_resolved_in_every_point(tmp_path: Path) -> None:
    (point,) = expand(scenario(tmp_path, ""))
    assert (point.load.sender_threads, point.load.receiver_threads) == (2, 2)
    load = scenario(tmp_path, "sender_threads = 7\n").load
    assert (load.threads_of("sender"), load.threads_of("receiver")) == (7, 2)
    assert load.sender_workers == 7  # sender threads × one sender node
    (point,) = expand(scenario(tmp_path, "receiver_threads = 1\nsender_nodes = 3\n"))
    assert point.load.model_dump()["sender_threads"] == 2
    assert point.load.model_dump()["receiver_threads"] == 1
    assert point.load.sender_workers == 6


def test_a_sweep_varies_producers_with_consumers_fixed(tmp_path: Path) -> None:
    text = "receiver_threads = 2\n[sweep]\nsender_threads = [4, 40, 400]\n"
    points = expand(scenario(tmp_path, text))
    assert [p.load.threads_of("sender") for p in points] == [4, 40, 400]
    assert [p.load.threads_of("receiver") for p in points] == [2, 2, 2]
    assert [p.label for p in points] == [f"sender_threads={n}" for n in (4, 40, 400)]
    # threads swept alone: both sides follow it at every point.
    swept = expand(scenario(tmp_path, "[sweep]\nthreads = [1, 3]\n"))
    assert [(p.load.sender_threads, p.load.receiver_threads) for p in swept] == [(1, 1), (3, 3)]


def test_explicit_points_set_each_side(tmp_path: Path) -> None:
    text = (
        "[[sweep.points]]\nsender_threads = 8\nreceiver_threads = 1\n"
        "[[sweep.points]]\nreceiver_threads = 4\n"
    )
    first, second = expand(scenario(tmp_path, text))
    assert (first.load.sender_threads, first.load.receiver_threads) == (8, 1)
    assert (second.load.sender_threads, second.load.receiver_threads) == (2, 4)


@pytest.mark.parametrize(
    ("text", "key", "says"),
    [
        ("sender_threads = 0\n", "load.sender_threads", "greater than 0"),
        ("receiver_threads = 10001\n", "load.receiver_threads", "less than or equal to 10000"),
        ("receiver_threads = true\n", "load.receiver_threads", "(got a boolean)"),
        ("[sweep]\nsender_threads = [1, 0]\n", "sweep.sender_threads[1]", "greater than 0"),
        ("[sweep]\nreceiver_threads = [2, 2]\n", "sweep.receiver_threads[1]", "swept already"),
    ],
)
def test_bad_counts_are_one_line_naming_the_key(
    tmp_path: Path, text: str, key: str, says: str
) -> None:
    with pytest.raises(ScenarioError) as info:
        scenario(tmp_path, text)
    (line,) = info.value.lines
    assert f": {key}: " in line and says in line, line


def test_a_capacity_search_divides_its_rate_among_the_sender_workers(tmp_path: Path) -> None:
    text = "sender_threads = 4\nsender_nodes = 2\n[search]\nslo_p99 = '50ms'\nlow = 1\nhigh = 10\n"
    with pytest.raises(ScenarioError) as info:
        scenario(tmp_path, text.replace("low = 1", "low = 0.001"))
    assert "over 8 sender worker(s) (load.sender_threads × load.sender_nodes)" in str(info.value)
    assert scenario(tmp_path, text).load.sender_workers == 8


def test_each_node_runs_the_workers_of_its_role(tmp_path: Path) -> None:
    load = LoadSection(threads=9, sender_threads=5, receiver_threads=2, processes=None)
    sender, receiver = (
        node_spec(tmp_path, load, role, system="redis") for role in ("sender", "receiver")
    )
    assert (sender.worker_ids, receiver.worker_ids) == (range(5), range(2))
    assert [p.worker_ids for p in split(sender, cpus=2)] == [range(0, 2), range(2, 5)]
    assert [p.worker_ids for p in split(receiver, cpus=8)] == [range(0, 1), range(1, 2)]
    assert (processes_for(load, "sender", 8), processes_for(load, "receiver", 8)) == (5, 2)


def test_the_record_holds_processes_per_node_of_each_role(tmp_path: Path) -> None:
    (point,) = expand(scenario(tmp_path, "sender_threads = 1\nreceiver_threads = 64\n"))
    entry = point_entry(registry.get("redis"), point)
    assert entry.processes_of("sender") == 1
    assert entry.processes_of("receiver") == processes_for(point.load, "receiver") > 1
    parts = expected_parts(entry)
    senders = {p for p in parts if p.role == "sender"}
    assert senders == {PartKey(0, "sender", 0, 0)}
    assert len(parts - senders) == 2 * entry.processes_of("receiver")  # two receiver nodes
    # A record of before: one figure for both roles.
    old = PointEntry.model_validate({"point": 0, "processes_per_node": 3})
    assert (old.processes_of("sender"), old.processes_of("receiver")) == (3, 3)


def test_the_receivers_workers_make_the_disk_estimate(tmp_path: Path) -> None:
    few = expand(scenario(tmp_path, "receiver_threads = 1\nrate = 10\nidle_timeout = 5\n"))
    many = expand(scenario(tmp_path, "receiver_threads = 11\nrate = 10\nidle_timeout = 5\n"))
    # 2 sender workers + receiver threads × 2 receiver nodes, for 60 + 5 s each.
    assert disk_estimate(few).worker_seconds == (2 + 2) * 65
    assert disk_estimate(many).worker_seconds == (2 + 22) * 65


def _context(load: dict[str, object]) -> RunContext:
    return RunContext.model_validate(
        {"broker": {"system": "redis"}, "points": [{"point": 0, "label": "x", "load": load}]}
    )


def test_the_summary_shows_both_counts() -> None:
    load = {"threads": 2, "sender_threads": 6, "receiver_threads": 1, "receiver_nodes": 2}
    (row,) = point_rows(_context(load)).values()
    assert (row.threads, row.sender_threads, row.receiver_threads) == (2, 6, 1)
    titles = [title for _, title, _ in TABLE]
    assert titles[:2] == ["send threads", "recv threads"] and "threads" not in titles
    # A record written before the counts were apart: both are its threads.
    (old,) = point_rows(_context({"threads": 3, "receiver_nodes": 2})).values()
    assert (old.sender_threads, old.receiver_threads) == (3, 3)
    assert _from_load("sender_threads")({"load": {"threads": 3}}) == 3
    assert _from_load("receiver_threads")({"load": {"threads": 3, "receiver_threads": 1}}) == 1


def _row(**cells: object) -> SummaryRow:
    base = {"point": 0, "label": "", "sender_nodes": 1, "receiver_nodes": 2, "message_size": 100}
    return SummaryRow({**base, **cells})


def test_compare_matches_a_summary_of_before_by_its_threads() -> None:
    old = _row(threads=4)
    new = _row(threads=4, sender_threads=4, receiver_threads=4)
    assert _key(old) == _key(new)
    assert point_name(old) == "threads=4 senders=1 receivers=2 size=100"
    apart = _row(threads=4, sender_threads=8, receiver_threads=2)
    assert _key(apart) != _key(new)
    assert point_name(apart).startswith("sender_threads=8 receiver_threads=2 ")


def test_the_shipped_kafka_scenario_counts_producers_and_consumers_apart() -> None:
    shipped = load_scenario(SCENARIOS / "kafka-kreps.toml")
    points = expand(shipped)
    assert [p.params["acks"] for p in points] == ["1", "all"]
    for p in points:
        assert (p.load.sender_threads, p.load.receiver_threads) == (3, 1)
        assert p.load.max_in_flight > 1 and p.load.message_size.fixed == 100
        assert (p.params["partitions"], p.params["replication_factor"]) == (6, 3)
    assert shipped.broker.topology == "cluster"
