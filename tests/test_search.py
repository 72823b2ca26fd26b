"""Capacity search (``[search]``): the bisection, the rule a probe holds by, a probe's
figures from raw per-second records, the scenario checks, and a search on a real Redis."""

from __future__ import annotations

import json
import os
import signal
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tests.buckets import bucket_of
from tests.conftest import SCENARIOS
from workload.engine.search import (
    CapacitySearch,
    ProbeRecord,
    SearchRecord,
    between,
    measure_point,
    probe_line,
    probe_point,
)
from workload.model.errors import ScenarioError
from workload.model.results import SECONDS_SCHEMA, raw_dir, read_point
from workload.model.scenario import expand
from workload.model.scenario_file import load_scenario
from workload.model.sections import SearchSection
from workload.model.slo import Verdict, verdict
from workload.model.sweep import NotASweep
from workload.shell import cli

SEARCH = """
name = "s"
[broker]
system = "redis"
[load]
threads = 2
sender_nodes = 2
duration = "10s"
idle_timeout = "2s"
[search]
slo_p99 = "50ms"
low = 1000
high = 100000
"""


def spec(**values: object) -> SearchSection:
    return SearchSection.model_validate(
        {"slo_p99": 0.05, "low": 1000.0, "high": 100000.0, **values}
    )


def searched(spec: SearchSection, holds: Callable[[float], bool]) -> CapacitySearch:
    """A whole search against a system that holds exactly the rates ``holds`` says."""
    search = CapacitySearch(spec, sender_workers=4)
    point = 0
    while (rate := search.next_rate()) is not None:
        reason = "p99 1 ms ≤ SLO 50 ms" if holds(rate) else "p99 80 ms > SLO 50 ms"
        search.add(
            ProbeRecord(
                point=point, rate=rate, rate_per_worker=rate / 4, holds=holds(rate), reason=reason
            )
        )
        point += 1
        assert point <= 50, "the search does not end"
    return search


def rates(search: CapacitySearch) -> list[float]:
    return [p.rate for p in search.record.probes]


# -- the bisection -------------------------------------------------------------------------


def test_the_bracket_closes_around_the_capacity_geometrically() -> None:
    search = searched(spec(), lambda rate: rate <= 10_000)
    # low, high, then the geometric means of the bracket, at 3 significant digits.
    assert rates(search) == [1000, 100_000, 10_000, 31_600, 17_800, 13_300, 11_500, 10_700, 10_300]
    record = search.record
    assert (record.highest_holding, record.lowest_failing) == (10_000, 10_300)
    assert record.outcome == "within_precision" and record.complete
    assert record.result == "capacity at SLO p99 ≤ 50 ms: ≥ 10,000 and < 10,300 msgs/s"


def test_every_probe_lies_inside_the_bracket_before_it() -> None:
    search = searched(spec(low=10.0, high=1e7, precision=0.01, max_probes=50), lambda r: r < 4321)
    low, high = 10.0, 1e7
    for probe in search.record.probes[2:]:
        assert low < probe.rate < high
        low, high = (probe.rate, high) if probe.holds else (low, probe.rate)
    record = search.record
    assert record.highest_holding is not None and record.lowest_failing is not None
    assert record.highest_holding < 4321 <= record.lowest_failing
    assert (record.lowest_failing - record.highest_holding) / record.highest_holding <= 0.01
    assert len(record.probes) <= 14  # 2 + ⌈log2(log(10⁶) / log(1.01))⌉


def test_the_search_stops_at_max_probes() -> None:
    search = searched(spec(max_probes=4), lambda rate: rate <= 10_000)
    assert rates(search) == [1000, 100_000, 10_000, 31_600]
    record = search.record
    assert record.outcome == "max_probes" and record.complete
    assert record.result == (
        "capacity at SLO p99 ≤ 50 ms: ≥ 10,000 and < 31,600 msgs/s (stopped after 4 probes, "
        "before the bracket narrowed to the precision of 5 %)"
    )


def test_a_failing_low_ends_the_search_below_it() -> None:
    search = searched(spec(), lambda rate: False)
    assert rates(search) == [1000]
    assert search.record.outcome == "below_low"
    assert search.record.result == "capacity at SLO p99 ≤ 50 ms: below 1,000 msgs/s"


def test_a_holding_high_ends_the_search_at_least_there() -> None:
    search = searched(spec(), lambda rate: True)
    assert rates(search) == [1000, 100_000]
    assert search.record.outcome == "at_least_high"
    assert search.record.result == "capacity at SLO p99 ≤ 50 ms: at least 100,000 msgs/s"


def test_a_stopped_run_keeps_the_bracket_and_says_the_search_is_incomplete() -> None:
    search = CapacitySearch(spec(), sender_workers=4)
    for point, (rate, holds) in enumerate([(1000.0, True), (100_000.0, False)]):
        search.add(
            ProbeRecord(point=point, rate=rate, rate_per_worker=rate / 4, holds=holds, reason="")
        )
    unjudged = ProbeRecord(
        point=2,
        rate=10_000.0,
        rate_per_worker=2500.0,
        holds=None,
        reason="the run was interrupted (SIGINT)",
    )
    search.add(unjudged)
    assert search.next_rate() == 10_000.0  # an unjudged probe decides nothing
    search.stop(unjudged.reason)
    record = search.record
    assert search.next_rate() is None
    assert (record.highest_holding, record.lowest_failing) == (1000.0, 100_000.0)
    assert record.outcome == "incomplete" and not record.complete
    assert record.result.endswith(
        "≥ 1,000 and < 100,000 msgs/s so far — incomplete: the run was interrupted (SIGINT)"
    )
    assert probe_line(unjudged) == (
        "probe 2: 10,000 msgs/s → not judged: the run was interrupted (SIGINT)"
    )
    # The record round-trips through the context's JSON (the analysis reads it back).
    again = SearchRecord.model_validate(json.loads(json.dumps(record.model_dump(mode="json"))))
    assert again == record


def test_between_rounds_to_a_rate_strictly_inside() -> None:
    assert between(1000, 100_000) == 10_000
    assert between(10_000, 100_000) == 31_600
    assert between(1000, 1001) == 1000.5  # 3 digits would land on an end
    assert 0.001 < between(0.001, 0.0011) < 0.0011


# -- whether a probe holds -----------------------------------------------------------------


def judged(**changes: Any) -> Verdict:
    figures: dict[str, Any] = {
        "target_msgs_per_s": 10_000.0,
        "send_msgs_per_s": 10_000.0,
        "receive_msgs_per_s": 10_000.0,
        "errors": 0,
        "processing_latency_p99_ms": 12.34,
        "slo_p99_ms": 50.0,
    }
    return verdict(**{**figures, **changes})


def test_a_probe_holds_its_rate_and_slo() -> None:
    assert judged() == (True, "p99 12.3 ms ≤ SLO 50 ms")
    # The boundaries hold: 95 % of the target sent, 95 % of the sends acknowledged, p99 = SLO.
    assert judged(send_msgs_per_s=9_500.0, receive_msgs_per_s=9_025.0)[0]
    assert judged(processing_latency_p99_ms=50.0)[0]


def test_each_reason_a_probe_fails_for() -> None:
    assert judged(processing_latency_p99_ms=73.1) == (False, "p99 73.1 ms > SLO 50 ms")
    assert judged(receive_msgs_per_s=9_490.0) == (
        False,
        "receivers did not keep up (94 % of the send rate acknowledged)",
    )
    assert judged(send_msgs_per_s=8_149.0, receive_msgs_per_s=8_149.0) == (
        False,
        "senders reached only 81 % of the target rate",
    )
    assert judged(send_msgs_per_s=9_499.0, receive_msgs_per_s=9_499.0)[1] == (
        "senders reached only 94 % of the target rate"  # not rounded up to 95 %
    )
    assert judged(errors=3) == (False, "3 failed call(s)")
    assert judged(send_msgs_per_s=None, receive_msgs_per_s=None)[1].startswith(
        "no message was confirmed sent"
    )
    assert judged(processing_latency_p99_ms=None) == (False, "no processing latency was recorded")
    both = judged(receive_msgs_per_s=5_000.0, processing_latency_p99_ms=1234.5)
    assert both == (
        False,
        "receivers did not keep up (50 % of the send rate acknowledged); p99 1,234 ms > SLO 50 ms",
    )


def test_probe_lines() -> None:
    holding = ProbeRecord(
        point=2,
        rate=25_000.0,
        rate_per_worker=6250.0,
        holds=True,
        reason="p99 12.3 ms ≤ SLO 50 ms",
        processing_latency_p99_ms=12.31,
    )
    failing = holding.model_copy(update={"holds": False, "reason": "p99 73.1 ms > SLO 50 ms"})
    assert probe_line(holding) == "probe 2: 25,000 msgs/s → holds (p99 12.3 ms)"
    assert probe_line(failing) == "probe 2: 25,000 msgs/s → fails: p99 73.1 ms > SLO 50 ms"


# -- a probe's figures from its raw records ------------------------------------------------

MS = 1000.0  # µs


def row(role: str, worker: int, second: int, **values: object) -> dict[str, object]:
    out: dict[str, object] = {
        "run_id": "r",
        "point": 0,
        "role": role,
        "node": 0,
        "worker": worker,
        "second": second,
        "sent": 0,
        "received": 0,
        "acked": 0,
        "errors": 0,
        "redelivered": 0,
        "foreign": 0,
        "send_latency": [],
        "processing_latency": [],
        "send_delay": [],
    }
    out.update(values)
    return out


def write_seconds(run_dir: Path, name: str, rows: list[dict[str, object]]) -> None:
    directory = raw_dir(run_dir, "seconds")
    directory.mkdir(parents=True, exist_ok=True)
    pq.write_table(pa.Table.from_pylist(rows, SECONDS_SCHEMA), directory / f"{name}.parquet")


def test_a_probe_is_measured_after_the_warmup_over_whole_seconds(tmp_path: Path) -> None:
    slow, fast, warm = bucket_of(40 * MS), bucket_of(1 * MS), bucket_of(1000 * MS)
    # Two sender workers: worker 0 sends from second 100 (partial), worker 1 from 101; both
    # stop within second 109. With a 3 s warm-up the rates count seconds 103…108.
    senders = [row("sender", 0, 100, sent=5, errors=2)]
    senders += [row("sender", 0, s, sent=10) for s in range(101, 109)]
    senders += [row("sender", 1, s, sent=10) for s in range(101, 109)]
    senders += [row("sender", w, 109, sent=3) for w in (0, 1)]
    write_seconds(tmp_path, "p0-sender-0.0", senders)
    # Two receiver workers (two files): 1 s latencies in the warm-up (left out), 98 samples
    # of 1 ms after it, and two of 40 ms while draining after the last send.
    receivers = [
        row("receiver", 0, s, acked=19, received=19, processing_latency=[(warm, 50)])
        for s in range(100, 103)
    ]
    receivers += [
        row("receiver", 0, s, acked=19, received=19, processing_latency=[(fast, 7)])
        for s in range(103, 110)
    ]
    receivers += [row("receiver", 0, s, processing_latency=[(slow, 1)]) for s in (110, 111)]
    write_seconds(tmp_path, "p0-receiver-0.0", receivers)
    others = [row("receiver", 1, s, processing_latency=[(fast, 7)]) for s in range(103, 110)]
    write_seconds(tmp_path, "p0-receiver-1.0", others)
    write_seconds(tmp_path, "p1-sender-0.0", [row("sender", 0, 105, sent=10**6, errors=9)])

    measured = measure_point(tmp_path, 0, warmup_s=3)
    assert measured.measured_seconds == 6
    assert measured.send_msgs_per_s == 20.0 and measured.receive_msgs_per_s == 19.0
    assert measured.errors == 2
    # Rank ⌈0.99 × 100⌉ = 99 of 100 samples: one of the two at 40 ms.
    assert measured.processing_latency_p99_ms == pytest.approx(40.0, rel=0.01)
    # Without the warm-up's 1 s latencies left out the p99 would be 1 s.
    assert measure_point(tmp_path, 0, warmup_s=0).processing_latency_p99_ms == pytest.approx(
        1000.0, rel=0.01
    )


def test_a_point_without_sends_or_records_is_measured_as_such(tmp_path: Path) -> None:
    nothing = measure_point(tmp_path, 0, warmup_s=1)
    assert nothing.send_msgs_per_s is None and nothing.processing_latency_p99_ms is None
    write_seconds(tmp_path, "p0-sender-0.0", [row("sender", 0, 7, errors=4)])
    failed = measure_point(tmp_path, 0, warmup_s=1)
    assert (failed.send_msgs_per_s, failed.errors) == (None, 4)


def test_a_short_point_falls_back_to_its_latency_span(tmp_path: Path) -> None:
    # One worker sending in seconds 50 and 51 only: no whole second between its first and
    # its last, so the rate counts the latency span (51…51 after a 1 s warm-up).
    write_seconds(tmp_path, "p0-sender-0.0", [row("sender", 0, s, sent=8) for s in (50, 51)])
    measured = measure_point(tmp_path, 0, warmup_s=1)
    assert (measured.measured_seconds, measured.send_msgs_per_s) == (1, 8.0)


# -- the scenario --------------------------------------------------------------------------


def scenario_lines(tmp_path: Path, text: str) -> list[str]:
    path = tmp_path / "s.toml"
    path.write_text(text)
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    return info.value.lines


def test_defaults_and_probe_points(tmp_path: Path) -> None:
    path = tmp_path / "s.toml"
    path.write_text(SEARCH)
    scenario = load_scenario(path)
    assert scenario.search is not None
    assert (scenario.search.slo_p99, scenario.search.precision, scenario.search.max_probes) == (
        0.05,
        0.05,
        12,
    )
    point = probe_point(scenario, 3, 25_000.0)
    # 4 sender workers (2 threads × 2 sender nodes) share the total rate.
    assert (point.index, point.load.rate, point.receiver_nodes) == (3, 6250.0, 4)
    assert point.label == "rate=25000" and point.base == 3 and point.repeat == 0


@pytest.mark.parametrize(
    ("change", "where", "what"),
    [
        ("[load]\nrate = 100", "load.rate", "leave out load.rate"),
        ("[sweep]\nthreads = [1, 2]", "sweep", "leave out [sweep]"),
        ("[[sweep.points]]\nthreads = 1", "sweep", "leave out [sweep]"),
        ('[[faults]]\nat = 1\naction = "kill"\nnode = 0', "faults", "without faults"),
        ("repeat = 2", "repeat", "repeat is not available with [search]"),
        ("[search]\nlow = 100000", "search.low", "must be below high"),
        ("[search]\nlow = 0.002", "search.low", "0.0005 per worker"),
        ('[search]\nslo_p99 = "soon"', "search.slo_p99", "not a duration"),
        ("[search]\nslo_p99 = 0", "search.slo_p99", "greater than 0"),
        ("[search]\nmax_probes = 1", "search.max_probes", "greater than or equal to 2"),
        ("[search]\nmax_probes = 51", "search.max_probes", "less than or equal to 50"),
        ("[search]\nprecision = 0", "search.precision", "greater than or equal to 0.001"),
        ('[search]\nhigh = "lots"', "search.high", "got a string"),
        ("[search]\nlate = 1", "search.late", "unknown key"),
    ],
)
def test_what_a_search_refuses(tmp_path: Path, change: str, where: str, what: str) -> None:
    lines = SEARCH.splitlines()
    if change.startswith("repeat"):  # a top-level key goes before the tables
        text = SEARCH.replace('name = "s"', f'name = "s"\n{change}')
    elif change.startswith("[search]"):  # a key of [search] replaces or joins its own
        key, value = change.split("\n", 1)[1].split(" = ")
        kept = [line for line in lines if not line.startswith(f"{key} =")]
        text = "\n".join(kept) + f"\n{key} = {value}\n"
    elif change.startswith("[load]"):
        text = SEARCH.replace("[load]", change)
    else:
        text = SEARCH + change + "\n"
    if "faults" in change:
        text = text.replace('system = "redis"', 'system = "redis"\ntopology = "cluster"')
    found = [line for line in scenario_lines(tmp_path, text) if f": {where}: " in line]
    assert found and what in found[0], scenario_lines(tmp_path, text)


def test_a_search_needs_its_slo_and_bounds(tmp_path: Path) -> None:
    text = "\n".join(
        line for line in SEARCH.splitlines() if not line.startswith(("slo_p99", "low", "high"))
    )
    lines = scenario_lines(tmp_path, text)
    for key in ("slo_p99", "low", "high"):
        assert any(f"search.{key}: required key is missing" in line for line in lines), lines


def test_a_search_has_no_fixed_sweep_points(tmp_path: Path) -> None:
    scenario = load_scenario(SCENARIOS / "redis-capacity.toml")
    with pytest.raises(NotASweep, match=r"brokerbench run"):
        expand(scenario)


def test_validate_shows_the_search_plan(capsys: pytest.CaptureFixture[str]) -> None:
    path = SCENARIOS / "redis-capacity.toml"
    assert cli.main(["validate", str(path)]) == 0
    out = capsys.readouterr().out
    assert (
        "capacity search: 500 to 200,000 msgs/s in total over 2 sender worker(s), SLO "
        "processing p99 ≤ 20 ms, precision 10 %, at most 6 probes; estimated run time up to "
        "48 s: max_probes × (duration + idle_timeout)"
    ) in out


# -- a search on a real Redis --------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.redis
def test_a_capacity_search_on_redis(tmp_path: Path) -> None:
    from workload.engine.runner import run_scenario

    # The shipped scenario with fewer probes (CI time): low, high and one bisection.
    scenario = tmp_path / "redis-capacity.toml"
    text = (SCENARIOS / "redis-capacity.toml").read_text()
    scenario.write_text(text.replace("max_probes = 6", "max_probes = 3"))
    lines: list[str] = []
    outcome = run_scenario(scenario, tmp_path / "results", console=lines.append)
    assert outcome.ok, outcome.errors
    context = json.loads((outcome.run_dir / "context.json").read_text())
    assert context["status"] == "complete"
    record = SearchRecord.model_validate(context["search"])
    assert record.complete and record.outcome != "incomplete"
    assert record.slo_p99_ms == 20.0 and record.sender_workers == 2
    probes, points = record.probes, context["points"]
    assert 1 <= len(probes) <= 3
    # Every probe is a sweep point of the run, in order, at its rate shared by the workers.
    assert [p.point for p in probes] == [p["point"] for p in points] == list(range(len(probes)))
    for probe, point in zip(probes, points, strict=True):
        assert point["varied"] == {"rate": int(probe.rate)}
        assert point["load"]["rate"] * 2 == pytest.approx(probe.rate)
        assert probe.holds is not None and probe.reason
        assert probe.send_msgs_per_s and probe.processing_latency_p99_ms
        assert list((outcome.run_dir / "raw" / "seconds").glob(f"p{probe.point}-*.parquet"))
    assert probes[0].rate == 500
    holding = [p.rate for p in probes if p.holds]
    failing = [p.rate for p in probes if not p.holds]
    assert record.highest_holding == max(holding, default=None)
    assert record.lowest_failing == min(failing, default=None)
    if holding and failing:
        assert max(holding) < min(failing)
    # One line per probe, and the result at the end.
    for probe in probes:
        assert f"probe {probe.point}: " in "\n".join(lines)
    assert lines[-1] == record.result and lines[-1].startswith("capacity at SLO p99 ≤ 20 ms: ")


@pytest.mark.slow
@pytest.mark.redis
def test_an_interrupted_search_keeps_its_probe_and_says_it_is_incomplete(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from workload.engine.progress import ProgressView
    from workload.engine.runner import run_scenario

    lines: list[str] = []
    timers: list[threading.Timer] = []
    update = ProgressView.update

    def update_and_interrupt(view: ProgressView, item: Any) -> None:
        """Ctrl-C once probe 0 has confirmed messages: an event, not a guess of when."""
        update(view, item)
        if view.totals()[0] > 0 and not timers:
            timers.append(threading.Timer(0.5, os.kill, (os.getpid(), signal.SIGINT)))
            timers[0].start()

    monkeypatch.setattr(ProgressView, "update", update_and_interrupt)
    # Ctrl-C raises here even where the suite was started with SIGINT ignored (a background
    # job of a non-interactive shell, nohup), which Python then keeps.
    handler = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        outcome = run_scenario(SCENARIOS / "redis-capacity.toml", tmp_path, console=lines.append)
    finally:
        signal.signal(signal.SIGINT, handler)
        for timer in timers:
            timer.cancel()
    assert outcome.interrupted and not outcome.errors
    context = json.loads((outcome.run_dir / "context.json").read_text())
    assert context["status"] == "interrupted"
    record = SearchRecord.model_validate(context["search"])
    (probe,) = record.probes
    assert (probe.point, probe.rate, probe.holds) == (0, 500, None)
    assert probe.reason == "the run was interrupted (SIGINT)"
    assert [p["point"] for p in context["points"]] == [0]
    assert record.outcome == "incomplete" and not record.complete
    assert (record.highest_holding, record.lowest_failing) == (None, None)
    assert "probe 0: 500 msgs/s → not judged: the run was interrupted (SIGINT)" in lines
    assert lines[-1] == (
        "capacity at SLO p99 ≤ 20 ms: not known — incomplete: the run was interrupted (SIGINT)"
    )


@pytest.mark.slow
@pytest.mark.spark
def test_the_probe_measure_agrees_with_the_spark_analysis(spark, tmp_path: Path) -> None:
    """The runner judges a probe with pyarrow, the analysis with Spark: on the same records
    both must give the same period, rates and p99 (the verdicts would differ otherwise)."""
    from analysis import transforms as tf
    from analysis.raw_tables import spark_schema

    fast, slow = bucket_of(1 * MS), bucket_of(40 * MS)
    rows = [row("sender", w, s, sent=10 + w) for w in (0, 1, 2) for s in range(100 + w, 112)]
    rows += [
        row("receiver", w, s, acked=14, processing_latency=[(fast, 9), (slow, int(s % 3 == 0))])
        for w in (0, 1)
        for s in range(100, 114)
    ]
    write_seconds(tmp_path, "p0-mixed-0.0", rows)
    for warmup in (0, 2, 5):
        measured = measure_point(tmp_path, 0, warmup_s=warmup)
        records = read_point(tmp_path, "seconds", 0).to_pylist()
        histograms = ("send_latency", "processing_latency", "send_delay")
        for record in records:  # Spark takes a map as a dict, Arrow gives (key, value) pairs
            record.update({h: dict(record[h]) for h in histograms})
        seconds = spark.createDataFrame(records, spark_schema(SECONDS_SCHEMA))
        periods = tf.measurement_periods(seconds, warmup)
        (rates,) = tf.throughput(tf.counters_per_second(seconds), periods).collect()
        whole = tf.whole_run(tf.run_histograms(tf.histogram_per_second(seconds), periods))
        (processing,) = [r for r in whole.collect() if r["metric"] == "processing_latency"]
        assert measured.measured_seconds == rates["measured_seconds"]
        assert measured.send_msgs_per_s == pytest.approx(rates["send_msgs_per_s"])
        assert measured.receive_msgs_per_s == pytest.approx(rates["receive_msgs_per_s"])
        assert measured.processing_latency_p99_ms == pytest.approx(processing["p99_ms"])
