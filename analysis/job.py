"""The analysis job: one run's raw tables in, the docs/measurement.md §3 table and per-window series out.

Runs in-process after a local run (``brokerbench run`` / ``brokerbench report``) and as a
Spark application (``python -m analysis.job RUN_DIR``, or spark-submit on EMR). It writes
``analysis/summary.csv`` and ``analysis/windows/`` (Parquet) under the run directory.

Before counting anything lost it takes stock of the run's records (:mod:`analysis.records`,
docs/measurement.md §5); it reads the raw tables through :mod:`analysis.raw_tables`.
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
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession

from analysis import backlog, capacity, faults, hdr, repeats, resources
from analysis import transforms as tf
from analysis.column_model import RUN_QUANTILES, run_column
from analysis.columns import SUMMARY_COLUMNS
from analysis.prices import cost_per_million, load_prices
from analysis.raw_tables import arrow_schema, read_table, read_telemetry
from analysis.records import (
    PointRecords,
    clock_offsets,
    delivery_label,
    point_records,
    run_records,
)
from analysis.storage import RunLocation, cluster_mode, hadoop_aws_jars, s3a_settings
from analysis.summary_row import SummaryRow
from workload.model.backlog import read_phases
from workload.model.errors import RecordsNotWritten
from workload.model.faults import read_timelines
from workload.model.layout import LAYOUT
from workload.model.record import RunContext


def _seconds(value: int | float | str | None) -> float:
    """A duration of the context's ``scenario.measurement`` (seconds; none: 0)."""
    return float(value or 0)


def analyse(spark: SparkSession, run_dir: Path | str) -> list[SummaryRow]:
    """Compute and write a run's summary and window series; return the summary rows.

    ``run_dir`` is a local directory or ``s3://bucket/prefix`` (see ``analysis.storage``).
    """
    run = RunLocation.of(run_dir)
    context = RunContext.of(json.loads(run.read_text(LAYOUT.context)))
    measurement = context.scenario.measurement
    records = run_records(spark, run, context)
    seconds = read_table(spark, run, "seconds", records.paths.get("seconds"))
    starts = {}
    if records.ends:  # a run killed midway: where each point's records end
        starts = {r["point"]: r["first"] for r in tf.first_seconds(seconds).collect()}
    phases = read_phases(run.local) if not run.s3 else {}  # backlogs run locally only
    points = backlog.cut_off_records(point_records(context, records, starts), phases)
    ends = {p.point: p.data_end for p in points if p.data_end is not None}
    seconds = tf.before_ends(seconds, ends)
    counters = tf.counters_per_second(seconds).cache()
    hist = tf.histogram_per_second(seconds).cache()
    periods = tf.measurement_periods(seconds, math.ceil(_seconds(measurement.warmup)))
    windows = tf.window_starts(
        periods,
        tf.seconds_of(_seconds(measurement.window)),
        tf.seconds_of(_seconds(measurement.step)),
    )
    series = tf.window_series(counters, hist, windows).cache()

    rows = _collect(tf.throughput(counters, periods))
    _merge(rows, _collect(tf.headline(series)))
    _merge(rows, clock_offsets(records.statuses.values()))
    states = spark.createDataFrame(
        [(context.run_id, p.point, p.state) for p in points],
        "run_id string, point int, state string",
    )
    received = tf.before_ends(
        read_table(spark, run, "received", records.paths.get("received")), ends
    )
    delivery = tf.delivery(
        tf.before_ends(
            read_table(spark, run, "sent_ranges", records.paths.get("sent_ranges")), ends
        ),
        received,
    )
    _merge(rows, _collect(tf.accounting(delivery, states)))
    _merge(rows, order_columns(context, points, received))
    _merge(rows, {p.point: {"delivery": delivery_label(p, rows.get(p.point, {}))} for p in points})
    histograms = tf.run_histograms(hist, periods).cache()
    _merge(rows, _collect(tf.out_of_range(histograms)))
    for row in (r.asDict() for r in tf.whole_run(histograms).collect()):
        target = rows.setdefault(row["point"], {"point": row["point"]})
        for q in RUN_QUANTILES:
            target[run_column(row["metric"], q)] = row[f"{q}_ms"]
    if not run.s3:  # faults are declared for local runs only
        _merge(rows, fault_columns(run.local, rows))
    backlogs, backlog_series = backlog.backlog_columns(
        spark, context.run_id or run.name, phases, counters, hist, periods
    )
    _merge(rows, backlog.exact_left(backlogs, rows))
    usage = tf.node_usage(read_telemetry(spark, run), periods).cache()
    usages = resources.node_usages(r.asDict() for r in usage.collect())
    _merge(rows, resources.resource_table(context, usages, rows))
    _merge(rows, capacity.probe_columns(context, rows))
    summary = _summary_rows(context, rows)
    try:
        run.write_text(LAYOUT.summary, summary_csv(summary))
    except OSError as exc:  # a full disk or a read-only directory: one line naming it
        if not run.s3:  # and no summary rather than a truncated one
            with contextlib.suppress(OSError):
                (run.local / LAYOUT.summary).unlink(missing_ok=True)
        raise RecordsNotWritten(run.spark_path(LAYOUT.summary), exc) from exc
    if repeats.repeated(summary):
        _write_text(run, LAYOUT.repeats, repeats.repeats_csv(repeats.summarise(summary)))
    write_parquet(series, run, LAYOUT.windows)
    write_parquet(histograms, run, LAYOUT.histograms)
    write_parquet(usage.orderBy("point", "role", "node"), run, LAYOUT.resources)
    if backlog_series:
        backlog.write_series(run.local, backlog_series)
    write_hgrm(histograms, run)
    for cached in (counters, hist, series, histograms, usage):
        cached.unpersist()
    return summary


def order_columns(
    context: RunContext, points: Sequence[PointRecords], received: DataFrame
) -> dict[int, dict[str, Any]]:
    """``reordered`` of the points whose messages had keys, where the system promises
    per-key order (docs/measurement.md §5): counted where the point's records are whole
    (drained or stopped early), empty where they are not; no column elsewhere (empty)."""
    if not context.broker.key_order:
        return {}
    keyed = {p.point for p in context.points if p.load.keys is not None}
    claimed = [p for p in points if p.point in keyed]
    if not claimed:
        return {}
    counts = _collect(tf.reordered(received))
    return {
        p.point: {
            "reordered": counts.get(p.point, {}).get("reordered", 0)
            if p.state in (tf.DRAINED, tf.STOPPED)
            else None
        }
        for p in claimed
    }


def fault_columns(run_dir: Path, rows: dict[int, dict[str, Any]]) -> dict[int, dict[str, Any]]:
    """Per point with declared faults: what they did (from its ``seconds`` and ``received``
    rows, read with pyarrow: gaps, and the errors, duplicates and redeliveries within the
    faults' windows; the totals are Spark's, above), and its confirmed messages that were
    not received split into lost and unavailable (a drained point only: elsewhere lost is
    not known)."""
    columns: dict[int, dict[str, Any]] = {}
    for point, timeline in read_timelines(run_dir).items():
        columns[point] = faults.effect_columns(faults.point_effects(run_dir, timeline))
        missing = rows.get(point, {}).get("lost")
        if isinstance(missing, int):
            lost, unavailable = faults.split_missing(missing, timeline)
            columns[point].update(lost=lost, unavailable=unavailable)
        else:
            columns[point]["unavailable"] = None
    return columns


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


def _collect(df: DataFrame) -> dict[int, dict[str, Any]]:
    """Small per-point results only (one row per sweep point)."""
    return {row["point"]: row.asDict() for row in df.collect()}


def _merge(into: dict[int, dict[str, Any]], more: dict[int, dict[str, Any]]) -> None:
    for point, values in more.items():
        into.setdefault(point, {"point": point}).update(values)


def _summary_rows(context: RunContext, rows: dict[int, dict[str, Any]]) -> list[SummaryRow]:
    summary = []
    for point in context.points:
        r = rows.get(point.point, {})
        load = point.load
        row: dict[str, Any] = {
            "broker": context.broker.system,
            "point": point.point,
            "label": point.label,
            "repeat": point.repeat,
            "base_point": point.base,
            "threads": load.threads,
            "sender_threads": load.threads_of("sender"),
            "receiver_threads": load.threads_of("receiver"),
            "sender_nodes": load.sender_nodes,
            "receiver_nodes": load.receiver_nodes,
            "message_size": load.message_size.label,
            "sent": r.get("confirmed", r.get("sent", 0)) or 0,
            "received": r.get("received", 0) or 0,
        }
        for column in SUMMARY_COLUMNS:
            if column not in row:
                row[column] = r.get(column)
        row["cost_per_million_usd"] = _cost_per_million(context, row["receive_msgs_per_s"])
        summary.append(SummaryRow(row))
    return summary


def _cost_per_million(context: RunContext, msgs_per_s: float | None) -> float | None:
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
