"""Each point over time (:mod:`workload.model.verdict_time`): its trends, each phase judged
and its stalls, from its per-second records and telemetry.

Per point the job's per-second counters give every second's messages — confirmed, first
received (redeliveries left out, as the backlog counts them) and received again — and the
telemetry rows of those seconds every node's sample; with the measurement period and the
backlog's phases they make a :class:`~workload.model.verdict_time.Timeline`. Both are a few
rows per second of a point, whatever the message rate, so they are collected to the driver
(as :mod:`analysis.backlog` does); the rules run there. A point's figures
(:class:`PointTime`): the two trends, the longest stall, the lines of its phases and stalls,
and the verdict's reason with a rising trend noted.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from analysis import transforms as tf
from analysis.backlog import BacklogSecond, drain_figures
from analysis.summary_row import Figures, SummaryRow
from workload.model.backlog import BacklogPhases
from workload.model.record import RunContext
from workload.model.telemetry import HOST, USAGE_MEANS
from workload.model.verdict import NodeUsage, pinned_cores
from workload.model.verdict_time import Span, Tick, Timeline, TimeVerdict, judge_time


@dataclass(frozen=True, eq=False)
class PointTime(Figures):
    """A point's figures over time (None: not measured)."""

    limited_reason: str | None
    broker_cpu_trend: float | None
    client_cpu_trend: float | None
    stall_s: int | None
    phase_verdicts: str


def point_ticks(counters: DataFrame) -> dict[int, list[Tick]]:
    """Per point: its seconds' messages, in order (seconds without records are missing)."""
    found: dict[int, list[Tick]] = {}
    rows = counters.select(
        "point",
        "second",
        "sent",
        (F.col("received") - F.col("redelivered")).alias("first"),
        "redelivered",
    ).collect()
    for r in sorted(rows, key=lambda r: (r["point"], r["second"])):
        tick = Tick(int(r["second"]), int(r["sent"]), int(r["first"]), int(r["redelivered"]))
        found.setdefault(int(r["point"]), []).append(tick)
    return found


def point_samples(
    counters: DataFrame, telemetry: DataFrame
) -> dict[int, dict[int, list[NodeUsage]]]:
    """Per point and second: every node's telemetry sample from the point's first second with
    records to its last (rows belong to a point by their second, as
    :func:`analysis.transforms.node_usage` places them)."""
    spans = counters.groupBy(*tf.KEY).agg(
        F.min("second").alias("first"), F.max("second").alias("last")
    )
    rows = (
        telemetry.drop("point")
        .join(F.broadcast(spans), on="run_id")
        .where((F.col("second") >= F.col("first")) & (F.col("second") <= F.col("last")))
        .select("point", "role", "node", "second", *USAGE_MEANS)
        .collect()
    )
    found: dict[int, dict[int, list[NodeUsage]]] = {}
    for r in rows:
        seconds = found.setdefault(int(r["point"]), {})
        seconds.setdefault(int(r["second"]), []).append(NodeUsage.of_row(r.asDict()))
    return found


def timelines(
    context: RunContext,
    ticks: Mapping[int, list[Tick]],
    samples: Mapping[int, dict[int, list[NodeUsage]]],
    periods: Mapping[int, tuple[Span, int]],
    backlogs: tuple[Mapping[int, BacklogPhases], Mapping[int, list[BacklogSecond]]],
) -> dict[int, Timeline]:
    """Per point with records: its :class:`Timeline` (``periods``: its measurement period
    and its charts' time 0, the end of its warm-up)."""
    phases, series = backlogs
    out = {}
    for entry in context.points:
        mine = ticks.get(entry.point)
        if not mine:
            continue
        seconds = samples.get(entry.point, {})
        hold, drain = None, None
        if entry.point in phases and entry.point in series:
            figures = drain_figures(series[entry.point], phases[entry.point])
            hold = figures.hold_first
            if figures.drain_first is not None and figures.drain_last is not None:
                drain = Span(figures.drain_first, figures.drain_last)
        period, zero = periods.get(entry.point, (None, None))
        out[entry.point] = Timeline(
            tuple(mine),
            {second: tuple(nodes) for second, nodes in seconds.items()},
            period,
            hold,
            drain,
            shared_host=any(
                n.role == HOST and n.node == HOST for ns in seconds.values() for n in ns
            ),
            max_in_flight=entry.load.max_in_flight or 1,
            broker=context.broker.name,
            zero=zero,
            pinned=pinned_cores(context.broker.given("cpus")),
        )
    return out


def time_columns(judged: TimeVerdict, row: SummaryRow) -> PointTime:
    """A point's figures over time, its verdict's reason with a rising trend noted."""
    reason = row.limited_reason
    if judged.note and reason:
        reason = f"{reason}; {judged.note}"
    return PointTime(
        reason,
        None if judged.broker_trend is None else judged.broker_trend.ratio,
        None if judged.client_trend is None else judged.client_trend.ratio,
        judged.stall_s,
        judged.cell,
    )


def over_time(
    context: RunContext,
    frames: tuple[DataFrame, DataFrame, DataFrame],
    backlogs: tuple[Mapping[int, BacklogPhases], Mapping[int, list[BacklogSecond]]],
    rows: Mapping[int, SummaryRow],
) -> dict[int, PointTime]:
    """Per point with records: its figures over time (see the module), from the job's
    per-second ``counters``, the run's ``telemetry`` and the measurement ``periods``."""
    counters, telemetry, periods = frames
    period = {
        int(r["point"]): (Span(int(r["start"]), int(r["end"])), int(r["latency_start"]))
        for r in periods.select("point", "start", "end", "latency_start").collect()
        if r["start"] is not None and r["end"] is not None and r["latency_start"] is not None
    }
    samples = point_samples(counters, telemetry)
    found = timelines(context, point_ticks(counters), samples, period, backlogs)
    return {p: time_columns(judge_time(t), rows[p]) for p, t in found.items()}
