"""Backlog phases (``[backlog]``, docs/measurement.md §4) without a broker: the scenario's
checks, the coordinator's clock, what workers do in each phase, the accounting of a drain
cut off by its limit and the report's reading of the backlog series."""

from __future__ import annotations

import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from analysis import transforms as tf
from analysis.backlog import backlog_series, cut_off_records, drain_figures, phase_seconds
from analysis.chart_data import read_backlog
from analysis.records import PointRecords
from workload.engine import backlog as clock_module
from workload.engine.backlog import COUNT_SETTLES, BacklogClock, initial_phase
from workload.engine.recording import WorkerRecorder
from workload.engine.worker import ReceiverLoop, SenderLoop, WorkerSettings
from workload.model.backlog import (
    DRAIN,
    HOLD,
    STEADY,
    BacklogPhases,
    BacklogSection,
    read_phases,
    write_phases,
)
from workload.model.errors import ScenarioError
from workload.model.layout import LAYOUT
from workload.model.scenario import Scenario
from workload.model.scenario_file import load_scenario
from workload.model.sections import LoadSection

GOOD = """
name = "t"
[broker]
system = "rabbitmq"
[load]
duration = "20s"
[backlog]
at = "5s"
build = "3s"
"""


def error_lines(tmp_path: Path, text: str) -> list[str]:
    path = tmp_path / "s.toml"
    path.write_text(text)
    with pytest.raises(ScenarioError) as info:
        load_scenario(path)
    return info.value.lines


def test_a_backlog_section_loads_with_its_defaults(tmp_path: Path) -> None:
    path = tmp_path / "s.toml"
    path.write_text(GOOD)
    backlog = load_scenario(path).backlog
    assert backlog is not None
    assert (backlog.at, backlog.build, backlog.senders, backlog.drain_limit) == (
        5.0,
        3.0,
        "stop",
        60.0,
    )
    assert backlog.drain_rate is None and backlog.build_target(100) is None


@pytest.mark.parametrize(
    ("change", "field", "words"),
    [
        ('build = "3s"', "backlog.build", "how long the backlog builds"),
        ('build = "3s"\nbuild_messages = 0', "backlog.build_messages", "greater than 0"),
        ('build = "3s"\nbuild_bytes = -5', "backlog.build_bytes", "greater than 0"),
        ('build = "3s"\ndrain_rate = 10', "backlog.drain_rate", "senders = 'continue'"),
        ('build = "3s"\nsenders = "pause"', "backlog.senders", "'stop' or 'continue'"),
        ('build = "3s"\ndrain_limit = 0', "backlog.drain_limit", "greater than 0"),
        ('build = "3s"\ndrain_limit = "forever"', "backlog.drain_limit", "not a duration"),
        ('build = "3s"\nbuidl = 1', "backlog.buidl", "unknown key"),
    ],
)
def test_a_wrong_backlog_key_is_one_line_naming_it(
    tmp_path: Path, change: str, field: str, words: str
) -> None:
    text = GOOD.replace('build = "3s"', "" if change == 'build = "3s"' else change)
    (line,) = error_lines(tmp_path, text)
    assert line.startswith(str(tmp_path / "s.toml")) and field in line and words in line
    assert "\n" not in line
    if change != 'build = "3s"':  # a key left out has no line to name
        assert "line " in line


def test_receivers_must_stop_while_senders_send(tmp_path: Path) -> None:
    (line,) = error_lines(tmp_path, GOOD.replace('at = "5s"', 'at = "20s"'))
    assert "backlog.at" in line and "load.duration 20 s" in line


def test_a_backlog_runs_neither_on_aws_nor_in_a_search(tmp_path: Path) -> None:
    text = GOOD + "[search]\nslo_p99 = 0.05\nlow = 10\nhigh = 100\n"
    lines = error_lines(tmp_path, text)
    assert any("backlog" in line and "capacity search" in line for line in lines)
    aws = GOOD.replace(
        'system = "rabbitmq"',
        'system = "rabbitmq"\ndeployment = "endpoints"\nendpoints = ["10.0.0.1:5672"]\n'
        "aws_topology = { broker = 1 }",
    )
    (line,) = error_lines(tmp_path, aws)
    assert "backlog" in line and "AWS" in line


def test_the_json_schema_documents_every_backlog_key() -> None:
    schema = Scenario.model_json_schema()
    assert "backlog" in schema["properties"]
    fields = schema["$defs"]["BacklogSection"]["properties"]
    assert set(fields) == set(BacklogSection.model_fields)
    assert all(f.get("description") for f in fields.values())
    readme = (Path(__file__).resolve().parents[1] / "docs" / "backlog.md").read_text()
    assert all(f"`{name}`" in readme for name in fields), "docs/backlog.md documents every key"


def test_build_target_takes_the_smaller_of_messages_and_bytes() -> None:
    section = BacklogSection(build_messages=5_000, build_bytes=100_050)
    assert section.build_target(100) == 1_001  # 100,050 bytes: 1,001 messages of 100
    assert BacklogSection(build_bytes=10).build_target(100) == 1


class Shared:
    def __init__(self) -> None:
        self.value = -1


class Clock:
    """The wall clock of :mod:`workload.engine.backlog`, moved by hand."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.ns = 1_000 * 10**9
        monkeypatch.setattr(clock_module.time, "time_ns", lambda: self.ns)

    def at(self, seconds: float) -> None:
        self.ns = 1_000 * 10**9 + int(seconds * 1e9)


def test_receivers_that_start_late_hold_from_the_start_and_the_build_counts_from_sending(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    wall = Clock(monkeypatch)
    shared = Shared()
    section = BacklogSection(at=0, build=3, drain_limit=10)
    clock = BacklogClock(section, 0, 100, shared)
    assert initial_phase(section) == HOLD and shared.value == HOLD
    assert clock.phases.hold_ns == wall.ns
    sending = wall.ns + 2 * 10**9  # the first confirmed send, 2 s after the release
    wall.at(4.9)
    assert not clock.tick(sending, 400, False) and shared.value == HOLD
    wall.at(5.0)
    assert not clock.tick(sending, 500, False) and shared.value == DRAIN
    assert clock.phases.drain_reason == "build elapsed" and clock.phases.queued_at_drain == 500
    wall.at(14.9)
    assert not clock.tick(sending, 10, True)
    wall.at(15.0)
    assert clock.tick(sending, 7, True)  # the limit: stop the point
    assert clock.phases.cut_off and clock.phases.queued_at_cut_off == 7
    assert not clock.tick(sending, 7, True)  # said once


def test_a_pause_mid_run_ends_when_enough_is_queued_or_senders_finish(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    wall = Clock(monkeypatch)
    shared = Shared()
    clock = BacklogClock(BacklogSection(at=2, build_bytes=100_000), 3, 100, shared)
    assert shared.value == STEADY and clock.phases.hold_ns is None
    assert not clock.tick(None, 0, False) and shared.value == STEADY  # nothing sent yet
    sending = wall.ns
    wall.at(1.9)
    clock.tick(sending, 0, False)
    assert shared.value == STEADY
    wall.at(2.0)
    clock.tick(sending, 0, False)
    assert shared.value == HOLD and clock.phases.hold_ns == wall.ns
    # At the hold's start the count still lacks what receivers took since their last
    # report: it cannot end the build before every node has reported since.
    clock.tick(sending, 5_000, False)
    wall.at(2.0 + COUNT_SETTLES - 0.01)
    clock.tick(sending, 5_000, False)
    assert shared.value == HOLD
    wall.at(2.0 + COUNT_SETTLES)
    clock.tick(sending, 999, False)
    assert shared.value == HOLD
    clock.tick(sending, 1_000, False)
    assert shared.value == DRAIN and clock.phases.drain_reason == "build_bytes reached"

    other = BacklogClock(BacklogSection(at=0, build_messages=10**9), 4, 100, Shared())
    other.tick(sending, 5, True)
    assert other.phase == DRAIN and other.phases.drain_reason == "senders finished"


def settings(phase: list[int], **backlog: object) -> WorkerSettings:
    load = LoadSection(duration=60, idle_timeout=0.01, rate=100.0)
    return WorkerSettings(
        tag="bb",
        node=0,
        worker=0,
        load=load,
        pool=[b"x" * 100],
        stop_requested=lambda: False,
        backlog=BacklogSection(build=1, **backlog),  # type: ignore[arg-type]
        phase=lambda: phase[0],
    )


def test_a_holding_receiver_does_not_receive_and_does_not_idle_out() -> None:
    phase = [HOLD]
    loop = ReceiverLoop(settings(phase), WorkerRecorder("receiver", 0, 0))
    time.sleep(0.03)
    assert loop.holding() and not loop.finished()
    phase[0] = DRAIN
    time.sleep(0.03)
    assert not loop.holding()
    time.sleep(0.03)
    assert loop.finished()  # idle (nothing arrived) once it receives again


def test_the_drain_stops_senders_or_sets_their_rate() -> None:
    phase = [HOLD]
    stopping = SenderLoop(settings(phase), WorkerRecorder("sender", 0, 0))
    assert not stopping.finished()
    phase[0] = DRAIN
    time.sleep(0.03)
    assert stopping.finished()

    phase = [HOLD]
    going_on = SenderLoop(
        settings(phase, senders="continue", drain_rate=10.0), WorkerRecorder("sender", 0, 0)
    )
    going_on.seq = 500
    assert going_on.slot_ns == pytest.approx(1e7)
    phase[0] = DRAIN
    time.sleep(0.03)
    assert not going_on.finished()
    assert going_on.slot_ns == pytest.approx(1e8) and going_on.origin_seq == 500
    # The new schedule starts now: message 500 is due at once, 501 a tenth later.
    assert going_on.slot(501) - going_on.slot(500) == pytest.approx(1e8, abs=1)
    assert abs(going_on.slot(500) - time.monotonic_ns()) < 10**9


def test_phases_are_written_and_read_back(tmp_path: Path) -> None:
    phases = BacklogPhases(point=2, hold_ns=1, drain_ns=5, drain_reason="x", drain_limit_s=1.5)
    write_phases(tmp_path, phases)
    assert (tmp_path / LAYOUT.backlog_phases(2)).is_file()
    assert read_phases(tmp_path) == {2: phases}
    assert read_phases(tmp_path / "none") == {}


def test_a_drain_cut_off_by_its_limit_is_not_drained_never_lost() -> None:
    cut = BacklogPhases(
        point=0, drain_ns=1, drain_limit_s=2.0, cut_off_ns=3, queued_at_cut_off=1234
    )
    points = [
        PointRecords(0, tf.DRAINED),
        PointRecords(1, tf.DRAINED),
        PointRecords(2, tf.INCOMPLETE, "a node wrote nothing"),
    ]
    phases = {0: cut, 1: BacklogPhases(point=1, drain_ns=1), 2: cut.model_copy(update={"point": 2})}
    got = cut_off_records(points, phases)
    assert got[0].state == tf.STOPPED
    assert got[0].delivery == (
        "not drained: the drain limit (2 s) ended the point before it drained (backlog_left: "
        "what was still queued)"
    )
    assert got[1] == points[1]  # drained within its limit
    assert got[2] == points[2]  # incomplete stays incomplete: nothing is claimed


def test_the_report_reads_the_backlog_series_on_the_charts_time_axis(tmp_path: Path) -> None:
    rows = [
        # second, confirmed, received, confirmed_total, received_total, queued
        (100, 50, 0, 50, 0, 50),
        (101, 50, 0, 100, 0, 100),
        (102, 10, 80, 110, 80, 30),
        (103, 0, 30, 110, 110, 0),
    ]
    names = ["second", "confirmed", "received", "confirmed_total", "received_total", "queued"]
    columns = {name: [row[i] for row in rows] for i, name in enumerate(names)}
    table = pa.table({"run_id": ["r"] * 4, "point": [0] * 4} | columns)
    (tmp_path / LAYOUT.backlog_series).mkdir(parents=True)
    pq.write_table(table, tmp_path / LAYOUT.backlog_series / "part-0.parquet")
    write_phases(tmp_path, BacklogPhases(point=0, hold_ns=100 * 10**9, drain_ns=101_500_000_000))
    (series,) = read_backlog(tmp_path, {0: 99}).values()
    assert list(series.seconds) == [2, 3, 4, 5] and list(series.queued) == [50, 100, 30, 0]
    assert series.drain_start_s == pytest.approx(2.5)
    assert series.caught_up_s == 5  # second 103: everything confirmed before it received
    assert read_backlog(tmp_path / "none", {}) == {}


def test_the_backlog_and_its_drain_from_per_second_counts() -> None:
    """Receivers away for seconds 100–102 (100 confirmed per second), the drain from 103.5:
    295 received in 103 and 104, 35 in 105 while 20 more are confirmed, the last 10 in 106."""
    counts = {
        99: (10, 10),
        100: (100, 0),
        101: (100, 0),
        102: (100, 0),
        103: (20, 150),
        104: (0, 145),
        105: (20, 35),
        107: (0, 10),  # 106 has no records: the series has it all the same
    }
    series = backlog_series(0, counts)
    assert [s.second for s in series] == list(range(99, 108))
    assert [s.queued for s in series] == [0, 100, 200, 300, 170, 25, 10, 10, 0]
    phases = BacklogPhases(point=0, hold_ns=100 * 10**9, drain_ns=103_500_000_000)
    drain = drain_figures(series, phases)
    assert (drain.peak_backlog, drain.backlog_left) == (300, 0)
    # 105 is the first second by whose end (340 received) everything confirmed before it
    # (330) was received.
    assert drain.catch_up_s == pytest.approx(106 - 103.5)
    assert drain.drain_msgs_per_s == pytest.approx(330 / 2.5)
    assert (drain.drain_first, drain.drain_last, drain.hold_first) == (103, 105, 100)
    labelled = phase_seconds(drain, series, (99, 107))
    drains = [(s, "drain") for s in (103, 104, 105)]
    assert labelled == [*drains, (99, "steady"), (106, "steady"), (107, "steady")]

    # Cut off: never caught up; the rate runs to the last second, what is left is reported.
    cut = drain_figures(
        backlog_series(1, {199: (100, 0), 200: (0, 60)}),
        BacklogPhases(point=1, drain_ns=200 * 10**9, cut_off_ns=201 * 10**9),
    )
    assert (cut.peak_backlog, cut.backlog_left, cut.catch_up_s) == (100, 40, None)
    assert cut.drain_msgs_per_s == pytest.approx(60.0)
    # Cut off within its drain's second, whose own sends (before the senders stopped) the
    # whole-second rule leaves out: 50 confirmed before it were received, 70 are still queued
    # — not caught up.
    within = drain_figures(
        backlog_series(4, {299: (50, 0), 300: (100, 80)}),
        BacklogPhases(point=4, drain_ns=300_500_000_000, cut_off_ns=300_600_000_000),
    )
    assert (within.backlog_left, within.catch_up_s) == (70, None)
    # No drain (the point was stopped before it began): the peak and what is left only.
    held = drain_figures(backlog_series(2, {5: (30, 0)}), BacklogPhases(point=2, hold_ns=1))
    assert (held.peak_backlog, held.backlog_left, held.catch_up_s, held.drain_first) == (
        30,
        30,
        None,
        None,
    )
    assert backlog_series(3, {}) == []


def seconds_row(second, sent=0, received=0, redelivered=0, proc=None, point=0, role="sender"):
    counts = (sent, received, received, 0, redelivered, 0, 0)
    return (
        "r",
        point,
        role,
        0,
        0,
        second,
        *counts,
        {},
        proc or {},
        {},
        100 * sent,
        100 * received,
        100 * received,
    )


@pytest.mark.slow
@pytest.mark.spark
def test_the_backlog_and_its_drain_from_synthetic_records(spark) -> None:
    """Point 0: receivers away for seconds 100–102 (100 sent per second), the drain from
    103.5, 150 received in 103 and 104 (5 of them again: no progress), 35 in 105 while 20
    more are sent, the last 10 in 106. Point 1: cut off with 40 left by the counters, 37
    by the exact not drained count (three flagged redelivered on their first receipt):
    backlog_left is the exact count."""
    from analysis.backlog import backlogs, point_series
    from analysis.raw_tables import spark_schema
    from tests.buckets import bucket_of
    from workload.model.results import SECONDS_SCHEMA

    slow, fast = bucket_of(2_000_000), bucket_of(5_000)  # 2 s, 5 ms
    rows = [
        seconds_row(99, sent=10),
        seconds_row(99, received=10, proc={fast: 10}, role="receiver"),
        *(seconds_row(s, sent=100) for s in (100, 101, 102)),
        seconds_row(103, sent=20),
        seconds_row(103, received=150, proc={slow: 150}, role="receiver"),
        seconds_row(104, received=150, redelivered=5, proc={slow: 150}, role="receiver"),
        seconds_row(105, sent=20),
        seconds_row(105, received=35, proc={slow: 25, fast: 10}, role="receiver"),
        seconds_row(106, received=10, proc={fast: 10}, role="receiver"),
        # point 1: 100 sent, 60 received after the drain began at 200.0, then cut off
        seconds_row(199, sent=100, point=1),
        seconds_row(200, received=60, point=1, role="receiver"),
    ]
    seconds = spark.createDataFrame(rows, spark_schema(SECONDS_SCHEMA))
    counters = tf.counters_per_second(seconds)
    hist = tf.histogram_per_second(seconds)
    periods = tf.measurement_periods(seconds, 0)
    phases = {
        0: BacklogPhases(point=0, hold_ns=100 * 10**9, drain_ns=103_500_000_000),
        1: BacklogPhases(
            point=1, hold_ns=199 * 10**9, drain_ns=200 * 10**9, cut_off_ns=201 * 10**9
        ),
    }
    series = point_series(phases, counters)
    columns = backlogs(spark, "r", phases, series, hist, periods, {0: 0, 1: 37})
    queued = {(r.point, r.second): r.queued for s in series.values() for r in s}
    assert [queued[0, s] for s in range(99, 107)] == [0, 100, 200, 300, 170, 25, 10, 0]
    first = columns[0]
    assert first["peak_backlog"] == 300 and first["backlog_left"] == 0
    # Caught up in 105: by its end 340 received, more than the 330 confirmed before it.
    assert first["catch_up_s"] == pytest.approx(106 - 103.5)
    assert first["drain_msgs_per_s"] == pytest.approx((150 + 145 + 35) / 2.5)
    assert first["drain_processing_p50_ms"] == pytest.approx(2_000, rel=0.01)
    assert first["steady_processing_p99_ms"] == pytest.approx(5, rel=0.01)  # 99 and 106
    assert first["drain_cut_off"] is False
    cut = columns[1]
    assert cut["peak_backlog"] == 100 and cut["backlog_left"] == 37
    assert series[1][-1].queued == 40  # the counters' figure
    assert cut["catch_up_s"] is None and cut["drain_cut_off"] is True
    assert cut["drain_msgs_per_s"] == pytest.approx(60 / 1.0)


def test_the_terminal_and_the_report_say_what_the_backlog_came_to() -> None:
    from analysis.report import backlog_block
    from analysis.summary_row import SummaryRow
    from analysis.summary_table import backlog_lines

    assert backlog_lines(SummaryRow({"point": 0})) == [] and backlog_block(SummaryRow({})) == ""
    drained = SummaryRow(
        {
            "point": 0,
            "peak_backlog": "5043",
            "catch_up_s": "3.695",
            "drain_msgs_per_s": "1472.3",
            "backlog_left": "0",
            "drain_cut_off": "False",
            "drain_processing_p50_ms": "4641.1",
            "drain_processing_p99_ms": "7352.0",
            "steady_processing_p50_ms": "25.6",
            "steady_processing_p99_ms": "81.66",
        }
    )
    assert backlog_lines(drained) == [
        "peak backlog 5,043 messages; drain 1,472 msgs/s; caught up 3.7 s after the drain began",
        "processing latency during the drain p50 4,641.10 ms, p99 7,352.0 ms; in the steady "
        "seconds p50 25.60 ms, p99 81.7 ms",
    ]
    cut = SummaryRow({"point": 1, "peak_backlog": 900, "backlog_left": 870, "drain_cut_off": True})
    lines = backlog_lines(cut)
    assert "did not catch up" in lines[0] and "p99 – ms" in lines[1]
    assert lines[2] == (
        "the drain limit ended the point with 870 message(s) still queued: not drained, not lost"
    )
    assert "<p class=warn>the drain limit ended the point" in backlog_block(cut)


def test_receivers_may_idle_out_only_once_the_drain_has_nothing_queued() -> None:
    shared = Shared()
    clock = BacklogClock(BacklogSection(at=0, build=1), 0, 100, shared)
    assert not clock.drained(0)  # holding
    shared.value = DRAIN
    assert not clock.drained(5) and clock.drained(0)
    shared.value = STEADY  # the senders finished before the backlog began
    assert clock.drained(5)
