"""A backlog built and drained (``[backlog]``, docs/measurement.md §4, §5): per point, the
backlog over time and what the drain did, from the per-second counters and histograms and
the coordinator's phases (:class:`workload.model.backlog.BacklogPhases`).

Per second, **queued** is the messages confirmed up to the end of that second minus those
received up to then, redeliveries left out (every second of the point, also those without
records). From it and the phases:

- ``peak_backlog``: the most queued at the end of any second;
- ``catch_up_s``: from the drain's start to the end of the first second from it on by whose
  end every message confirmed before that second was received (with the senders stopped:
  the backlog is 0) — to the second, so a drain within one second reads as under a second;
  empty for a drain the limit cut off;
- ``drain_msgs_per_s``: messages received from the drain's start to the catch-up, per
  second of ``catch_up_s`` (to the point's last second when it did not catch up);
- ``backlog_left``: what was still queued when the point ended — its *not drained*
  messages, counted exactly by identity (0 when it drained; empty where its records are
  incomplete): the per-second counters alone would count a message the broker flags as
  redelivered on its first receipt (it was prefetched by a receiver that stopped before
  taking it) as still queued;
- the processing latency of the drain's seconds (from its start to the catch-up) apart
  from the steady seconds (the latency span's seconds before the backlog and after the
  catch-up), as p50 and p99.

The counters are per second — a few rows per second of a point, whatever the message
rate — so the arithmetic runs on the driver (:func:`point_series`, :func:`drain_figures`);
the latencies are one Spark aggregation over the histograms (:func:`latencies`). A drain
the limit cut off leaves its point *stopped*: what is still queued is not drained, never
lost (:func:`cut_off_records`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from analysis import transforms as tf
from analysis.records import PointRecords
from analysis.summary_row import Figures
from workload.model.backlog import BacklogPhases
from workload.model.layout import LAYOUT
from workload.model.results import write_table_file

NS = 1_000_000_000
LATENCY = "processing_latency"
DRAIN, STEADY = "drain", "steady"


@dataclass(frozen=True)
class BacklogSecond:
    """One second of a point's backlog: confirmed and received (first deliveries) in it,
    and up to its end; queued then."""

    point: int
    second: int
    confirmed: int
    received: int
    confirmed_total: int
    received_total: int
    queued: int


def backlog_series(point: int, counts: Mapping[int, tuple[int, int]]) -> list[BacklogSecond]:
    """A point's backlog from its per-second (confirmed, received first deliveries), every
    second from its first to its last."""
    if not counts:
        return []
    out = []
    confirmed_total = received_total = 0
    for second in range(min(counts), max(counts) + 1):
        confirmed, received = counts.get(second, (0, 0))
        confirmed_total += confirmed
        received_total += received
        out.append(
            BacklogSecond(
                point,
                second,
                confirmed,
                received,
                confirmed_total,
                received_total,
                max(0, confirmed_total - received_total),
            )
        )
    return out


@dataclass(frozen=True)
class Drain:
    """What one point's backlog came to; ``seconds``: the drain's seconds, and the steady
    seconds' bounds (before ``hold_first``, after ``drain_last``) for :func:`latencies`."""

    peak_backlog: int
    backlog_left: int
    catch_up_s: float | None
    drain_msgs_per_s: float | None
    drain_first: int | None
    drain_last: int | None
    hold_first: int | None


def drain_figures(series: list[BacklogSecond], phases: BacklogPhases) -> Drain:
    """The backlog's figures (see the module) from its series and phases."""
    peak = max((s.queued for s in series), default=0)
    left = series[-1].queued if series else 0
    hold_first = phases.hold_ns // NS if phases.hold_ns is not None else None
    if phases.drain_ns is None or not series:
        return Drain(peak, left, None, None, None, None, hold_first)
    drain_at = phases.drain_ns / NS
    drain_first = math.floor(drain_at)
    # A drain the limit cut off did not catch up: the point ended with messages queued. (By
    # whole seconds it could seem to: the drain's own second leaves out what was confirmed
    # in it, before the senders stopped.)
    caught = (
        None
        if phases.cut_off
        else next(
            (
                s.second
                for s in series
                if s.second >= drain_first and s.received_total >= s.confirmed_total - s.confirmed
            ),
            None,
        )
    )
    last = caught if caught is not None else series[-1].second
    drained_for = last + 1 - drain_at
    received = sum(s.received for s in series if drain_first <= s.second <= last)
    return Drain(
        peak,
        left,
        drained_for if caught is not None else None,
        received / drained_for if drained_for > 0 else None,
        drain_first,
        last,
        hold_first,
    )


def phase_seconds(
    drain: Drain, series: list[BacklogSecond], latency_span: tuple[int, int] | None
) -> list[tuple[int, str]]:
    """The point's seconds whose processing latencies are the drain's or the steady
    phase's: (second, phase)."""
    out: list[tuple[int, str]] = []
    if drain.drain_first is not None and drain.drain_last is not None:
        out += [(s, DRAIN) for s in range(drain.drain_first, drain.drain_last + 1)]
    if latency_span is not None:
        backlog_from = drain.hold_first if drain.hold_first is not None else drain.drain_first
        lo, hi = latency_span
        for s in range(lo, hi + 1):
            before = backlog_from is not None and s < backlog_from
            after = drain.drain_last is not None and s > drain.drain_last
            if before or after:
                out.append((s, STEADY))
    return out


def latencies(
    spark: SparkSession, hist: DataFrame, run_id: str, seconds: Iterable[tuple[int, int, str]]
) -> dict[tuple[int, str], tuple[float, float]]:
    """Per point and phase: processing-latency p50 and p99 of its drain's and its steady
    seconds (``seconds``: point, second, phase), merged histograms, one Spark job."""
    rows = [(run_id, point, second, phase) for point, second, phase in seconds]
    if not rows:
        return {}
    labels = spark.createDataFrame(rows, "run_id string, point int, second long, phase string")
    merged = (
        hist.where(F.col("metric") == LATENCY)
        .join(F.broadcast(labels), on=[*tf.KEY, "second"])
        .select(*tf.KEY, "phase", "bucket", "count")
    )
    return {
        (int(r["point"]), r["phase"]): (r["p50_ms"], r["p99_ms"])
        for r in tf.percentiles(merged, [*tf.KEY, "phase"]).collect()
    }


@dataclass(frozen=True, eq=False)
class Backlog(Figures):
    """A point's backlog columns (see the module)."""

    peak_backlog: int
    catch_up_s: float | None
    drain_msgs_per_s: float | None
    backlog_left: int | None
    drain_cut_off: bool
    drain_processing_p50_ms: float | None = None
    drain_processing_p99_ms: float | None = None
    steady_processing_p50_ms: float | None = None
    steady_processing_p99_ms: float | None = None


def point_series(
    phases: Mapping[int, BacklogPhases], counters: DataFrame
) -> dict[int, list[BacklogSecond]]:
    """Per point with phases: its backlog series, from its per-second counters."""
    points = sorted(phases)
    counts: dict[int, dict[int, tuple[int, int]]] = {p: {} for p in points}
    if points:
        for row in (
            counters.where(F.col("point").isin(points))
            .select(
                "point", "second", "sent", (F.col("received") - F.col("redelivered")).alias("r")
            )
            .collect()
        ):
            counts[int(row["point"])][int(row["second"])] = (int(row["sent"]), int(row["r"]))
    return {point: backlog_series(point, counts[point]) for point in points}


def backlogs(
    spark: SparkSession,
    run_id: str,
    phases: Mapping[int, BacklogPhases],
    series: Mapping[int, list[BacklogSecond]],
    hist: DataFrame,
    periods: DataFrame,
    not_drained: Mapping[int, int | None],
) -> dict[int, Backlog]:
    """Per point with phases: its backlog columns, from its series (:func:`point_series`),
    its histograms and measurement period, and its exact not drained count."""
    if not phases:
        return {}
    spans = {
        int(r["point"]): (int(r["latency_start"]), int(r["latency_end"]))
        for r in periods.where(F.col("point").isin(sorted(phases))).collect()
        if r["latency_start"] is not None and r["latency_end"] is not None
    }
    drains = {point: drain_figures(series[point], phases[point]) for point in series}
    labelled = [
        (point, s, phase)
        for point, drain in drains.items()
        for s, phase in phase_seconds(drain, series[point], spans.get(point))
    ]
    found = latencies(spark, hist, run_id, labelled)
    return {
        point: Backlog(
            drain.peak_backlog,
            drain.catch_up_s,
            drain.drain_msgs_per_s,
            not_drained.get(point),
            phases[point].cut_off,
            *found.get((point, DRAIN), (None, None)),
            *found.get((point, STEADY), (None, None)),
        )
        for point, drain in drains.items()
    }


#: The backlog series' file (``analysis/backlog``), one row per point and second.
SERIES_SCHEMA = pa.schema(
    [
        ("point", pa.int32()),
        ("second", pa.int64()),
        ("confirmed", pa.int64()),
        ("received", pa.int64()),
        ("confirmed_total", pa.int64()),
        ("received_total", pa.int64()),
        ("queued", pa.int64()),
    ]
)


def write_series(run_dir: Path, series: list[BacklogSecond]) -> None:
    """Write the backlog series (a local run's: backlogs run locally) or raise
    :class:`~workload.model.errors.RecordsNotWritten`."""
    table = pa.Table.from_pylist([asdict(s) for s in series], SERIES_SCHEMA)
    write_table_file(run_dir / LAYOUT.backlog_series / "part-0.parquet", table)


def cut_off_records(
    points: list[PointRecords], phases: Mapping[int, BacklogPhases]
) -> list[PointRecords]:
    """The points whose drain the limit cut off are stopped early, not drained: what was
    still queued is *not drained*, never lost (docs/measurement.md §5)."""
    out = []
    for records in points:
        found = phases.get(records.point)
        if found is not None and found.cut_off and records.state == tf.DRAINED:
            records = PointRecords(
                records.point,
                tf.STOPPED,
                f"the drain limit ({found.drain_limit_s:g} s) ended the point before it "
                "drained (backlog_left: what was still queued)",
            )
        out.append(records)
    return out
