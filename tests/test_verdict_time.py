"""The verdict over a point's time (workload/model/verdict_time.py, analysis/timeline.py):
trends inside the measurement period, each phase judged, stalls — each rule on synthetic
per-second telemetry and messages, its expectation worked out by hand."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from analysis.report import pace_block
from analysis.summary_row import SummaryRow
from analysis.summary_table import notes
from analysis.timeline import time_columns
from workload.model.verdict import BROKER_CPU, CLIENT_CPU, NONE, RULES, NodeUsage
from workload.model.verdict_time import (
    BUILD,
    DRAIN,
    TAIL,
    TIME_RULES,
    Span,
    Tick,
    Timeline,
    judge_time,
    lines_of,
    stalls,
    trend,
)

T0 = 1_000  # the point's first second


def sample(role: str, node: str, cpu: float, cores: float = 2.0) -> NodeUsage:
    return NodeUsage(role=role, node=node, cores=cores, processes=1.0, cpu_pct=cpu)


def seconds(
    n: int, cpu: Callable[[int], dict[tuple[str, str], float]]
) -> dict[int, tuple[NodeUsage, ...]]:
    """``n`` seconds of telemetry from T0: each second's CPU by (role, node), the machine as
    their sum plus 10 % of a core."""
    out = {}
    for i in range(n):
        nodes = [sample(role, node, value) for (role, node), value in cpu(i).items()]
        nodes.append(sample("host", "host", sum(n.cpu_pct for n in nodes) + 10.0))
        out[T0 + i] = tuple(nodes)
    return out


def steady(n: int, rate: int) -> tuple[Tick, ...]:
    return tuple(Tick(T0 + i, rate, rate) for i in range(n))


# -- trends ------------------------------------------------------------------------------


def test_a_broker_whose_cost_per_message_rises_is_named_with_its_figures() -> None:
    # 30 s measured: the first third at 3,400 msgs/s and 35 % of a core, the last at 1,500
    # msgs/s and 60 %: 103 µs then 400 µs per message, 3.9 times as much
    ticks = tuple(Tick(T0 + i, 3400 if i < 10 else 2400 if i < 20 else 1500) for i in range(30))
    cpu = {0: 35.0, 1: 50.0, 2: 60.0}
    samples = seconds(30, lambda i: {("broker", "b0"): cpu[i // 10], ("sender", "s0"): 40.0})
    timeline = Timeline(ticks, samples, period=Span(T0, T0 + 29))
    found = trend(timeline, "broker CPU", ("broker",))
    assert found is not None
    assert found.first_us == pytest.approx(0.35e6 / 3400)
    assert found.last_us == pytest.approx(0.60e6 / 1500)
    assert found.ratio == pytest.approx(3.886, abs=1e-3) and found.rising
    judged = judge_time(timeline)
    assert judged.note.startswith(
        "broker CPU per message rose 3.9× during the point: 103 µs in the first third of the "
        "measurement period, 400 µs in the last (3,400 → 1,500 msgs/s)"
    )
    # the clients used the same CPU for fewer messages: 2.27×, noted too
    assert judged.client_trend is not None and judged.client_trend.ratio == pytest.approx(
        3400 / 1500
    )
    assert "client CPU per message rose 2.3×" in judged.note


def test_a_steady_cost_or_a_short_period_is_no_trend() -> None:
    samples = seconds(30, lambda i: {("broker", "b0"): 50.0 + (i % 3)})
    timeline = Timeline(steady(30, 1000), samples, period=Span(T0 + 3, T0 + 26))
    found = trend(timeline, "broker CPU", ("broker",))
    assert found is not None and found.ratio == pytest.approx(1.0, abs=0.02)
    assert not found.rising and judge_time(timeline).note == ""
    # 8 s measured: thirds of 2 s say nothing yet
    short = Timeline(steady(30, 1000), samples, period=Span(T0, T0 + 7))
    assert trend(short, "broker CPU", ("broker",)) is None
    # no broker telemetry (a broker given by its endpoints): no trend
    clients = seconds(30, lambda i: {("sender", "s0"): 30.0})
    assert trend(Timeline(steady(30, 1000), clients, Span(T0, T0 + 29)), "b", ("broker",)) is None


def test_the_threshold_is_one_and_a_half() -> None:
    cpu = {0: 40.0, 1: 40.0, 2: 59.0}  # 1.475×: under; 61 %: 1.525×, over
    timeline = Timeline(
        steady(30, 1000), seconds(30, lambda i: {("broker", "b0"): cpu[i // 10]}), Span(T0, T0 + 29)
    )
    assert judge_time(timeline).note == ""
    cpu[2] = 61.0
    timeline = Timeline(
        steady(30, 1000), seconds(30, lambda i: {("broker", "b0"): cpu[i // 10]}), Span(T0, T0 + 29)
    )
    assert "rose 1.5×" in judge_time(timeline).note


def test_a_rising_trend_is_noted_in_the_verdicts_reason_and_its_columns() -> None:
    ticks = tuple(Tick(T0 + i, 1000 if i < 15 else 500, 1000 if i < 15 else 500) for i in range(30))
    samples = seconds(30, lambda i: {("broker", "b0"): 40.0, ("receiver", "r0"): 20.0})
    judged = judge_time(Timeline(ticks, samples, Span(T0, T0 + 29)))
    row = SummaryRow({"limited_by": NONE, "limited_reason": "no resource reached 90%"})
    cells = time_columns(judged, row)
    assert cells.broker_cpu_trend == pytest.approx(2.0)
    assert cells.client_cpu_trend == pytest.approx(2.0)
    assert cells.limited_reason == (
        "no resource reached 90%; broker CPU per message rose 2.0× during the point: 400 µs "
        "in the first third of the measurement period, 800 µs in the last (1,000 → 500 "
        "msgs/s); client CPU per message rose 2.0× during the point: 200 µs in the first "
        "third of the measurement period, 400 µs in the last (1,000 → 500 msgs/s)"
    )
    assert cells.stall_s == 0 and cells.phase_verdicts == ""


# -- every phase judged -------------------------------------------------------------------


def test_a_backlogs_build_and_drain_are_judged_over_their_own_seconds() -> None:
    # 10 s steady, receivers away 10 s (the broker idle), a drain of 10 s at 185 % of a core
    ticks = (
        *steady(10, 1000),
        *(Tick(T0 + 10 + i, 1000, 0) for i in range(10)),
        *(Tick(T0 + 20 + i, 0, 1000) for i in range(10)),
    )

    def cpu(i: int) -> dict[tuple[str, str], float]:
        broker = 185.0 if i >= 20 else 30.0
        return {("broker", "b0"): broker, ("sender", "s0"): 20.0, ("receiver", "r0"): 10.0}

    timeline = Timeline(
        ticks, seconds(30, cpu), Span(T0 + 1, T0 + 18), hold=T0 + 10, drain=Span(T0 + 20, T0 + 29)
    )
    judged = judge_time(timeline)
    build, drain = judged.phases
    assert (build.phase, build.span, build.received) == (BUILD, Span(T0 + 10, T0 + 19), 0)
    assert build.verdict.limit == NONE
    assert (drain.phase, drain.span, drain.received) == (DRAIN, Span(T0 + 20, T0 + 29), 10_000)
    assert drain.verdict.limit == BROKER_CPU and "185 %" in drain.verdict.reason
    # the drain's senders had stopped: no round trip of theirs set its pace
    assert "round trip" not in drain.verdict.reason
    assert judged.lines[1].startswith(
        "drain (20 to 30 s on the charts, 10 s, 10,000 received, 1,000 msgs/s): broker CPU — "
    )
    # receivers away on purpose: no stall
    assert judged.stalls == () and judged.stall_s == 0


def test_a_drain_that_ended_at_once_is_no_phase() -> None:
    """A drain whose last second comes before its first (a power cut lost the backlog, the
    drain ended at once) has no seconds to judge: it is left out, not divided by."""
    ticks = (*steady(10, 1000), *(Tick(T0 + 10 + i, 1000, 0) for i in range(10)))
    timeline = Timeline(
        ticks, seconds(20, lambda i: {("broker", "b0"): 30.0}), Span(T0 + 1, T0 + 8),
        hold=T0 + 10, drain=Span(T0 + 20, T0 + 19),
    )  # fmt: skip
    judged = judge_time(timeline)
    assert [p.phase for p in judged.phases] == [BUILD]
    assert all("drain" not in line for line in judged.lines)


def test_the_time_after_the_senders_stopped_is_judged_from_three_seconds() -> None:
    # senders stop after 10 s; receivers, a process at a whole core, need 4 s more
    ticks = (
        *(Tick(T0 + i, 1000, 700) for i in range(10)),
        *(Tick(T0 + 10 + i, 0, 750) for i in range(4)),
    )
    samples = seconds(14, lambda i: {("broker", "b0"): 30.0, ("receiver", "r0"): 100.0})
    samples = {
        s: tuple(
            NodeUsage(n.role, n.node, n.cores, 1.0, n.cpu_pct, process_max_pct=n.cpu_pct)
            for n in nodes
        )
        for s, nodes in samples.items()
    }
    judged = judge_time(Timeline(ticks, samples, Span(T0 + 1, T0 + 8), zero=T0 + 2))
    (tail,) = judged.phases
    assert (tail.phase, tail.span, tail.received) == (TAIL, Span(T0 + 10, T0 + 13), 3000)
    assert tail.verdict.limit == CLIENT_CPU
    assert judged.lines[0].startswith(
        "after the senders stopped (8 to 12 s on the charts, 4 s, 3,000 received, 750 msgs/s)"
    )
    # two seconds after the senders stopped: the last messages in flight, not a phase
    short = judge_time(Timeline(ticks[:12], samples, Span(T0 + 1, T0 + 8)))
    assert short.phases == ()


# -- stalls --------------------------------------------------------------------------------


def test_a_stall_is_named_with_what_was_busy_during_it() -> None:
    # a drain that stalled for 100 s with 41,230 outstanding: PostgreSQL at 125–185 % of a
    # core, the receivers at 0–2 %, the senders stopped
    ticks = (
        *(Tick(T0 + i, 4123, 0) for i in range(10)),
        *(Tick(T0 + 10 + i, 0, 0, 41 if i % 10 == 0 else 0) for i in range(100)),
        Tick(T0 + 110, 0, 41_230),
    )

    def cpu(i: int) -> dict[tuple[str, str], float]:
        if 10 <= i < 110:
            return {("broker", "pg"): 125.0 + 60 * (i % 2), ("receiver", "r0"): float(i % 3)}
        return {("broker", "pg"): 40.0, ("receiver", "r0"): 50.0}

    timeline = Timeline(
        ticks,
        seconds(111, cpu),
        Span(T0, T0 + 8),
        hold=T0,  # receivers held for the first 10 s: a build, no stall
        drain=Span(T0 + 10, T0 + 110),
        broker="PostgreSQL",
        zero=T0,
    )
    (stall,) = stalls(timeline)
    assert stall.span == Span(T0 + 10, T0 + 109) and stall.outstanding == 41_230
    assert stall.words(T0) == (
        "stall: no new message received (only 410 redeliveries) for 100 s with 41,230 "
        "outstanding (10 to 110 s on the charts); PostgreSQL at 125–185 % of a core, "
        "receivers at 0–2 %, others at 10 %"
    )
    judged = judge_time(timeline)
    assert judged.stall_s == 100 and judged.lines[-1] == stall.words(T0)
    row = SummaryRow({"limited_by": NONE, "limited_reason": "x"})
    assert time_columns(judged, row).stall_s == 100


def test_four_quiet_seconds_or_nothing_outstanding_is_no_stall() -> None:
    quiet = (
        Tick(T0, 100, 50),
        *(Tick(T0 + 1 + i) for i in range(4)),  # 50 outstanding, 4 s: under the 5 s
        Tick(T0 + 5, 0, 50),
        *(Tick(T0 + 6 + i) for i in range(10)),  # nothing outstanding: idle, not stalled
        Tick(T0 + 16, 10, 10),
    )
    assert stalls(Timeline(quiet, {})) == []
    # received in the second before its confirmation reached the sender: none outstanding
    early = (Tick(T0, 10, 19), Tick(T0 + 1, 9, 0), Tick(T0 + 9, 1, 1))
    assert stalls(Timeline(early, {})) == []
    # seconds without records count as seconds with nothing: 6 missing seconds stall
    gap = (Tick(T0, 100, 50), Tick(T0 + 7, 0, 50))
    (stall,) = stalls(Timeline(gap, {}))
    assert stall.span == Span(T0 + 1, T0 + 6) and stall.outstanding == 50
    assert stall.words(T0).endswith("; no telemetry during it")
    assert stall.words(T0).startswith("stall: nothing received for 6 s with 50 outstanding")


def test_the_phases_and_stalls_make_one_cell() -> None:
    ticks = (Tick(T0, 100, 50), Tick(T0 + 7, 0, 50), Tick(T0 + 8, 0, 0))
    judged = judge_time(Timeline(ticks, {}))
    cell = time_columns(judged, SummaryRow({"limited_reason": "r"})).phase_verdicts
    # receivers stalled 6 s after the senders stopped, then took the rest: both named
    tail, stall = lines_of(cell)
    assert tail.startswith("after the senders stopped (1 to 8 s on the charts, 7 s, 50 received")
    assert tail.endswith("unknown — no telemetry was recorded")
    assert stall.startswith("stall: nothing received for 6 s with 50 outstanding")


def test_the_report_prints_each_line_and_the_rules_and_the_table_notes_a_stall() -> None:
    row = SummaryRow(
        {
            "point": 0,
            "label": "threads=1",
            "limited_by": NONE,
            "limited_reason": "no resource reached 90%",
            "stall_s": 100,
            "phase_verdicts": "drain (…): broker CPU — b0 | stall: nothing received for 100 s",
        }
    )
    page = pace_block([row])
    assert "<li>drain (…): broker CPU — b0</li><li>stall: nothing received for 100 s</li>" in page
    assert RULES in page and TIME_RULES in page
    assert any(n.startswith("stalled 100 s: messages outstanding") for n in notes(row))
    assert not any("stalled" in n for n in notes(row.merged({"stall_s": 0})))
    rising = row.merged({"broker_cpu_trend": 3.9, "client_cpu_trend": 1.2})
    assert "broker CPU per message rose 3.9× during the point" in notes(rising)
    assert not any("client CPU" in n for n in notes(rising))
