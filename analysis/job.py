"""The analysis job: one run's raw tables in, the docs/measurement.md §3 table and per-window series out.

Runs in-process after a local run (``brokerbench run`` / ``brokerbench report``) and as a
Spark application (``python -m analysis.job RUN_DIR``, or spark-submit on EMR). It writes
``analysis/summary.csv`` and ``analysis/windows/`` (Parquet) under the run directory.

The job is a pipeline of typed steps. :func:`read_run` takes stock of the run's records
before anything is counted (:mod:`analysis.records`, docs/measurement.md §5) and reads its
raw tables into the frames every step reads (a :class:`Run`); each sweep point's summary row
starts from the context (:func:`point_rows`), and each of :data:`STEPS` adds its figures of
every point — :class:`~analysis.summary_row.Figures`, whose fields are columns — reading what
the steps before it found. Then the summary and the series are written.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import io
import itertools
import json
import math
import shutil
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession

from analysis import backlog, capacity, faults, hdr, power_loss, repeats, resources, timeline
from analysis import transforms as tf
from analysis.backlog import BacklogSecond
from analysis.column_model import METRICS, RUN_QUANTILES, run_column, window_column
from analysis.columns import SUMMARY_COLUMNS
from analysis.prices import cost_per_million, load_prices
from analysis.raw_tables import arrow_schema, read_table, read_telemetry
from analysis.records import (
    PointRecords,
    RunRecords,
    before_ends,
    clock_offsets,
    delivery_label,
    first_seconds,
    point_records,
    run_records,
)
from analysis.storage import RunLocation, cluster_mode, hadoop_aws_jars, s3a_settings
from analysis.summary_row import Figures, SummaryRow
from workload.model.backlog import BacklogPhases, read_phases
from workload.model.errors import RecordsNotWritten
from workload.model.faults import read_timelines
from workload.model.layout import LAYOUT
from workload.model.record import RunContext

F = TypeVar("F", bound=Figures)


@dataclass(frozen=True)
class Run:
    """A run as the steps read it: where it is, its context and records, how each point's
    records stand, its backlog phases and series, and its frames — per second (counters,
    merged histograms), per point (measurement periods), per window (the series), per
    point and metric (the whole run's histograms), per node (its telemetry's means), every
    node's telemetry, and the delivery tables."""

    spark: SparkSession
    location: RunLocation
    context: RunContext
    records: RunRecords
    points: list[PointRecords]
    phases: dict[int, BacklogPhases]
    backlogs: dict[int, list[BacklogSecond]]
    counters: DataFrame
    hist: DataFrame
    periods: DataFrame
    series: DataFrame
    histograms: DataFrame
    usage: DataFrame
    telemetry: DataFrame
    sent_ranges: DataFrame
    received: DataFrame


#: The raw tables a run's frames are made of.
RAW_TABLES = ("seconds", "sent_ranges", "received")


def read_run(spark: SparkSession, location: RunLocation) -> Run:
    """Take stock of a run's records and read them, each point's up to where they end."""
    context = RunContext.of(json.loads(location.read_text(LAYOUT.context)))
    records = run_records(spark, location, context)
    raw = {t: read_table(spark, location, t, records.paths.get(t)) for t in RAW_TABLES}
    starts = first_seconds(raw["seconds"]) if records.ends else {}  # a killed run's data ends
    phases = read_phases(location.local) if not location.s3 else {}  # backlogs run locally only
    points = backlog.cut_off_records(point_records(context, records, starts), phases)
    ends = {p.point: p.data_end for p in points if p.data_end is not None}
    seconds, *delivery = (before_ends(raw[t], ends) for t in RAW_TABLES)
    measurement = context.scenario.measurement
    counters = tf.counters_per_second(seconds).cache()
    hist = tf.histogram_per_second(seconds).cache()
    periods = tf.measurement_periods(seconds, math.ceil(_seconds(measurement.warmup)))
    window, step = (_whole(_seconds(d)) for d in (measurement.window, measurement.step))
    series = tf.window_series(counters, hist, tf.window_starts(periods, window, step)).cache()
    histograms = tf.run_histograms(hist, periods).cache()
    telemetry = read_telemetry(spark, location).cache()
    usage = tf.node_usage(telemetry, periods).cache()
    stock = (spark, location, context, records, points, phases)
    frames = (counters, hist, periods, series, histograms, usage, telemetry, *delivery)
    return Run(*stock, backlog.point_series(phases, counters), *frames)


#: The summary rows under way, by point.
Rows = Mapping[int, SummaryRow]
#: A step: each point's figures from the run and what the steps before it found.
Step = Callable[[Run, Rows], Mapping[int, Mapping[str, Any]]]


@dataclass(frozen=True, eq=False)
class PointFigures(Figures):
    """What ran at a point, as the context records it (no message yet)."""

    broker: str
    point: int
    label: str
    repeat: int
    base_point: int
    threads: int
    sender_threads: int
    receiver_threads: int
    sender_nodes: int
    receiver_nodes: int | None
    message_size: str
    sent: int = 0
    received: int = 0


def point_rows(context: RunContext) -> dict[int, SummaryRow]:
    """Each point of the context, its summary row begun with what ran."""
    rows = {}
    for p in context.points:
        load = p.load
        threads = (load.threads, load.threads_of("sender"), load.threads_of("receiver"))
        nodes = (load.sender_nodes, load.receiver_nodes, load.message_size.label)
        figures = PointFigures(
            context.broker.system, p.point, p.label, p.repeat, p.base, *threads, *nodes
        )
        rows[p.point] = SummaryRow(figures)
    return rows


def collect(df: DataFrame, figures: type[F]) -> dict[int, F]:
    """A small per-point frame's rows as typed figures (a column it lacks raises)."""
    return {row["point"]: figures(*(row[c] for c in figures.columns)) for row in df.collect()}


@dataclass(frozen=True, eq=False)
class Rates(Figures):
    """Rates over the measurement period, and totals (:func:`analysis.transforms.throughput`)."""

    received: int
    sent_bytes: int
    received_bytes: int
    send_msgs_per_s: float | None
    receive_msgs_per_s: float | None
    send_mb_per_s: float | None
    receive_mb_per_s: float | None
    redelivered: int
    errors: int
    receivers_kept_up: bool
    measured_seconds: int | None


def rates(run: Run, rows: Rows) -> dict[int, Rates]:
    return collect(tf.throughput(run.counters, run.periods), Rates)


def latencies(run: Run, rows: Rows) -> dict[int, dict[str, Any]]:
    """Every metric's worst window (p95) and whole-run percentiles, their columns named by
    :mod:`analysis.column_model`."""
    found: dict[int, dict[str, Any]] = {}
    for row in tf.headline(run.series).collect():
        found[row["point"]] = {window_column(m): row[window_column(m)] for m in METRICS}
    for row in tf.whole_run(run.histograms).collect():
        cells = found.setdefault(row["point"], {})
        cells.update({run_column(row["metric"], q): row[f"{q}_ms"] for q in RUN_QUANTILES})
    return found


@dataclass(frozen=True, eq=False)
class OutOfRange(Figures):
    """Latencies out of the histograms' range (:func:`analysis.transforms.out_of_range`)."""

    negative_latencies: int
    clipped_latencies: int


def out_of_range(run: Run, rows: Rows) -> dict[int, OutOfRange]:
    return collect(tf.out_of_range(run.histograms), OutOfRange)


def clocks(run: Run, rows: Rows) -> Mapping[int, Figures]:
    return clock_offsets(run.records.statuses.values())


@dataclass(frozen=True, eq=False)
class Accounting(Figures):
    """Messages accounted for (:func:`analysis.transforms.accounting`; sent: confirmed)."""

    sent: int
    lost: int | None
    not_drained: int | None
    duplicated: int
    unconfirmed_received: int | None


def accounting(run: Run, rows: Rows) -> dict[int, Accounting]:
    states = [(run.context.run_id, p.point, p.state) for p in run.points]
    frame = run.spark.createDataFrame(states, "run_id string, point int, state string")
    counts = tf.accounting(tf.delivery(run.sent_ranges, run.received), frame)
    return collect(counts.withColumnRenamed("confirmed", "sent"), Accounting)


def power_losses(run: Run, rows: Rows) -> Mapping[int, Figures]:
    """What a power cut lost, taken out of lost or not drained (:mod:`analysis.power_loss`)."""
    if run.location.s3:  # faults are declared for local runs only
        return {}
    timelines = read_timelines(run.location.local).values()
    states = {p.point: p.state for p in run.points}
    frames = (run.sent_ranges, run.received)
    return power_loss.power_losses(run.spark, frames, timelines, states, rows)


@dataclass(frozen=True, eq=False)
class Delivery(Figures):
    """How a point's records stand, in words (:func:`analysis.records.delivery_label`)."""

    delivery: str


def deliveries(run: Run, rows: Rows) -> dict[int, Delivery]:
    return {p.point: Delivery(delivery_label(p, rows[p.point].not_drained)) for p in run.points}


@dataclass(frozen=True, eq=False)
class Reordering(Figures):
    """Late messages of a key (docs/measurement.md §5; None: not counted)."""

    reordered: int | None


def order_columns(
    context: RunContext, points: Sequence[PointRecords], received: DataFrame
) -> dict[int, Reordering]:
    """``reordered`` of the points whose messages had keys, where the system promises
    per-key order (docs/measurement.md §5): counted where the point's records are whole
    (drained or stopped early), empty where they are not; no column elsewhere (empty)."""
    if not context.broker.key_order:
        return {}
    keyed = {p.point for p in context.points if p.load.keys is not None}
    claimed = [p for p in points if p.point in keyed]
    if not claimed:
        return {}
    counts = collect(tf.reordered(received), Reordering)
    whole = (tf.DRAINED, tf.STOPPED)
    return {
        p.point: counts.get(p.point, Reordering(0)) if p.state in whole else Reordering(None)
        for p in claimed
    }


def reorderings(run: Run, rows: Rows) -> dict[int, Reordering]:
    return order_columns(run.context, run.points, run.received)


def fault_effects(run: Run, rows: Rows) -> Mapping[int, Figures]:
    if run.location.s3:  # faults are declared for local runs only
        return {}
    found = faults.fault_columns(run.location.local, {p: r.lost for p, r in rows.items()})
    # Stopped early: what it did not receive is not drained (counted so alone), not unavailable.
    return {p: replace(f, unavailable=None) if rows[p].not_drained else f for p, f in found.items()}


def backlogs(run: Run, rows: Rows) -> Mapping[int, Figures]:
    """The backlogs built and drained, with each point's exact not drained count."""
    run_id = run.context.run_id or run.location.name
    frames = (run.hist, run.periods)
    left = {p: r.not_drained for p, r in rows.items()}
    return backlog.backlogs(run.spark, run_id, run.phases, run.backlogs, *frames, left)


def usages(run: Run, rows: Rows) -> Mapping[int, Figures]:
    found = resources.node_usages(r.asDict() for r in run.usage.collect())
    return resources.resource_table(run.context, found, rows)


def over_time(run: Run, rows: Rows) -> Mapping[int, Figures]:
    """Trends, each phase judged and stalls; a rising trend noted in the verdict's reason."""
    frames = (run.counters, run.telemetry, run.periods)
    return timeline.over_time(run.context, frames, (run.phases, run.backlogs), rows)


def probes(run: Run, rows: Rows) -> Mapping[int, Figures]:
    return capacity.probe_columns(run.context, rows)


@dataclass(frozen=True, eq=False)
class Cost(Figures):
    """What a million messages cost (runs on AWS)."""

    cost_per_million_usd: float | None


def costs(run: Run, rows: Rows) -> dict[int, Cost]:
    return {p: Cost(point_cost(run.context, r.receive_msgs_per_s)) for p, r in rows.items()}


#: The steps, in order: each reads what those before it found.
STEPS: tuple[Step, ...] = (
    rates,
    latencies,
    out_of_range,
    clocks,
    accounting,
    power_losses,
    deliveries,
    reorderings,
    fault_effects,
    backlogs,
    usages,
    over_time,
    probes,
    costs,
)


def analyse(spark: SparkSession, run_dir: Path | str) -> list[SummaryRow]:
    """Compute and write a run's summary and window series; return the summary rows.

    ``run_dir`` is a local directory or ``s3://bucket/prefix`` (see ``analysis.storage``).
    """
    run = read_run(spark, RunLocation.of(run_dir))
    rows = point_rows(run.context)
    for step in STEPS:
        found = step(run, rows)
        rows = {p: row.merged(found[p]) if p in found else row for p, row in rows.items()}
    summary = list(rows.values())
    write_results(run, summary)
    for cached in (run.counters, run.hist, run.series, run.histograms, run.usage, run.telemetry):
        cached.unpersist()
    return summary


def write_results(run: Run, summary: list[SummaryRow]) -> None:
    """Write ``summary.csv`` (and ``repeats.csv``), then the series and histograms."""
    location = run.location
    try:
        location.write_text(LAYOUT.summary, summary_csv(summary))
    except OSError as exc:  # a full disk or a read-only directory: one line naming it
        if not location.s3:  # and no summary rather than a truncated one
            with contextlib.suppress(OSError):
                (location.local / LAYOUT.summary).unlink(missing_ok=True)
        raise RecordsNotWritten(location.spark_path(LAYOUT.summary), exc) from exc
    if repeats.repeated(summary):
        _write_text(location, LAYOUT.repeats, repeats.repeats_csv(repeats.summarise(summary)))
    write_parquet(run.series, location, LAYOUT.windows)
    write_parquet(run.histograms, location, LAYOUT.histograms)
    write_parquet(run.usage.orderBy("point", "role", "node"), location, LAYOUT.resources)
    if run.backlogs:
        backlog.write_series(location.local, [s for ss in run.backlogs.values() for s in ss])
    write_hgrm(run.histograms, location)


def write_parquet(df: DataFrame, run: RunLocation, relative: str) -> None:
    """Write a small result (a few rows per sweep point) as Parquet: by Spark into S3;
    locally through Arrow, so that a full disk or a read-only directory is one line naming
    the file rather than a page of Spark's errors."""
    if run.s3:
        df.write.mode("overwrite").parquet(run.spark_path(relative))
        return
    directory = run.local / relative
    path = directory / "part-0.parquet"
    schema = arrow_schema(df.schema)
    shutil.rmtree(directory, ignore_errors=True)
    try:
        directory.mkdir(parents=True)
        with pq.ParquetWriter(path, schema, compression="zstd") as writer:
            rows = (row.asDict() for row in df.toLocalIterator())
            while batch := list(itertools.islice(rows, 10_000)):
                writer.write_table(pa.Table.from_pylist(batch, schema))
    except OSError as exc:
        shutil.rmtree(directory, ignore_errors=True)
        raise RecordsNotWritten(path, exc) from exc


def write_hgrm(histograms: DataFrame, run: RunLocation) -> None:
    """Each point's whole-run histogram of each metric as an HdrHistogram percentile
    distribution (``analysis/hdr/point-<n>-<metric>.hgrm``; see :mod:`analysis.hdr`)."""
    by_series: dict[tuple[int, str], list[hdr.Bucket]] = {}
    for row in histograms.toLocalIterator():
        by_series.setdefault((row["point"], row["metric"]), []).append(
            hdr.Bucket(row["bucket"], row["count"], row["value_ms"])
        )
    for (point, metric), buckets in sorted(by_series.items()):
        _write_text(run, LAYOUT.hdr(point, metric), hdr.hgrm(buckets))


def _write_text(run: RunLocation, relative: str, text: str) -> None:
    """Write one small result file; a full disk or a read-only directory is one line."""
    try:
        run.write_text(relative, text)
    except OSError as exc:
        raise RecordsNotWritten(run.spark_path(relative), exc) from exc


def _seconds(value: int | float | str | None) -> float:
    """A duration of the context's ``scenario.measurement`` (seconds; none: 0)."""
    return float(value or 0)


def _whole(duration: float) -> int:
    """Window lengths and steps are whole seconds (records are per second)."""
    return max(1, math.ceil(duration))


def point_cost(context: RunContext, msgs_per_s: float | None) -> float | None:
    """What a million messages cost at this point's receive rate, on the run's fleet at
    on-demand prices — only for runs whose context names the fleet (runs on AWS)."""
    cost = context.cost
    if cost is None or not msgs_per_s:
        return None
    prices = load_prices(cost.prices)
    try:
        return cost_per_million(prices, cost.region, cost.instances, 1.0, round(msgs_per_s * 3600))
    except KeyError:  # no price for that region or instance type in the table
        return None


def summary_csv(rows: Sequence[SummaryRow]) -> str:
    out = io.StringIO(newline="")
    writer = csv.DictWriter(out, fieldnames=SUMMARY_COLUMNS)
    writer.writeheader()
    for row in rows:
        writer.writerow({k: _fmt(row.get(k)) for k in SUMMARY_COLUMNS})
    return out.getvalue()


def _fmt(value: Any) -> Any:
    if isinstance(value, float):
        return f"{value:.3f}"
    if value is None:
        return ""
    return value


def main(argv: list[str] | None = None) -> int:
    from analysis.session import owned_session

    parser = argparse.ArgumentParser(description="Analyse one brokerbench run directory.")
    parser.add_argument("run_dir", help="a run directory, or s3://bucket/prefix of one")
    args = parser.parse_args(argv)
    settings: dict[str, str] = {}
    if RunLocation.of(args.run_dir).s3 and not cluster_mode():
        settings = s3a_settings(hadoop_aws_jars())
    with owned_session(settings=settings) as spark:
        for row in analyse(spark, args.run_dir):
            print(json.dumps(dict(row), default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
