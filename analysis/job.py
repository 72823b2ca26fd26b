"""The analysis job: one run's raw tables in, the docs/measurement.md §3 table and per-window series out.

Runs in-process after a local run (``brokerbench run`` / ``brokerbench report``) and as a
Spark application (``python -m analysis.job RUN_DIR``, or spark-submit on EMR). It writes
``analysis/summary.csv`` and ``analysis/windows/`` (Parquet) under the run directory.

Before counting anything lost it takes stock (docs/measurement.md §5): every node process a sweep point
ran must have left its records (:class:`RunRecords`); a point missing some is
*incomplete* and no loss is claimed for it, and a point the run stopped early is *not
drained* (:class:`PointRecords`). The node statuses also give each point's largest clock
offset (:func:`clock_offsets`), which qualifies its processing latency.
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
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from analysis import capacity, faults, hdr, repeats, resources
from analysis import transforms as tf
from analysis.columns import RUN_QUANTILES, SUMMARY_COLUMNS, SummaryRow, run_column
from analysis.prices import cost_per_million, load_prices
from analysis.storage import RunLocation, cluster_mode, hadoop_aws_jars, s3a_settings
from workload.model.errors import RecordsNotWritten, one_line
from workload.model.faults import read_timelines
from workload.model.layout import LAYOUT
from workload.model.record import PointEntry, RunContext
from workload.model.results import (
    DELIVERY_TABLES,
    TABLES,
    TELEMETRY_SCHEMA,
    NodeStatus,
    PartKey,
    parse_status,
    raw_dir,
    read_statuses,
)

_ARROW_TO_SPARK: dict[pa.DataType, T.DataType] = {
    pa.string(): T.StringType(),
    pa.int32(): T.IntegerType(),
    pa.int64(): T.LongType(),
    pa.float64(): T.DoubleType(),
}


def spark_schema(schema: pa.Schema) -> T.StructType:
    """The Spark schema of a raw table, derived from its Arrow schema."""

    def convert(t: pa.DataType) -> T.DataType:
        if pa.types.is_map(t):
            return T.MapType(convert(t.key_type), convert(t.item_type))
        return _ARROW_TO_SPARK[t]

    return T.StructType([T.StructField(f.name, convert(f.type)) for f in schema])


def read_table(
    spark: SparkSession,
    run_dir: Path | str | RunLocation,
    table: str,
    paths: list[str] | None = None,
) -> DataFrame:
    """A raw table: its whole folder, or only ``paths`` (the files that can be read)."""
    schema = spark_schema(TABLES.get(table, TELEMETRY_SCHEMA))
    run = RunLocation.of(run_dir)
    relative = LAYOUT.raw_table(table)
    if paths is None and run.has_parquet(relative):
        paths = [run.spark_path(relative)]
    if not paths:
        return spark.createDataFrame([], schema)
    return spark.read.schema(schema).parquet(*paths)


@dataclass(frozen=True)
class RunRecords:
    """What a run directory holds: the node statuses and, per raw table, the node part
    files that can be read."""

    statuses: dict[PartKey, NodeStatus]
    present: set[tuple[str, PartKey]]
    #: (table, part) → why its file, though there, cannot be read.
    unreadable: dict[tuple[str, PartKey], str] = field(default_factory=dict)
    #: Per table, the files to read (None: the whole folder).
    paths: dict[str, list[str] | None] = field(default_factory=dict)

    def parts(self) -> set[PartKey]:
        """Every node part that left a trace: a status or a file."""
        return {*self.statuses, *(key for _, key in self.present), *(k for _, k in self.unreadable)}

    def gap(self, key: PartKey) -> str:
        """What is missing of one node part's records ("" when nothing is)."""
        for table in key.tables:
            if (table, key) in self.unreadable:
                return f"wrote an unreadable {table} file ({self.unreadable[table, key]})"
        absent = [table for table in key.tables if (table, key) not in self.present]
        if not absent:
            return ""
        status = self.statuses.get(key)
        what = (
            "wrote no results"
            if DELIVERY_TABLES[key.role] in absent
            else "wrote no per-second records"
        )
        if status is None:
            return f"{what} (and no status)"
        return f"{what} ({status.error})" if status.error else what


def expected_parts(point: PointEntry) -> set[PartKey]:
    """The node parts a sweep point of the context runs: every sender and receiver node,
    each spread over the point's processes per node."""
    nodes = {"sender": point.load.sender_nodes, "receiver": point.load.receivers}
    parts = point.processes
    return {
        PartKey(point.point, role, node, part)
        for role, count in nodes.items()
        for node in range(count)
        for part in range(parts)
    }


def run_records(spark: SparkSession, run: RunLocation, context: RunContext) -> RunRecords:
    """Take stock of a run's records: locally every Parquet footer is read (a file that
    cannot be read is left out of the analysis and named); in S3, whose objects are
    whole or absent, the listing is Spark's and statuses are read by name."""
    if not run.s3:
        return local_records(run.local)
    present: set[tuple[str, PartKey]] = set()
    for table in TABLES:
        for path in read_table(spark, run, table).inputFiles():
            key = PartKey.of_file(path)
            if key is not None:
                present.add((table, key))
    candidates = {key for _, key in present}
    for point in context.points:
        candidates |= expected_parts(point)
    statuses = {}
    for key in candidates:
        try:
            text = run.read_text(key.status_file)
        except Exception:  # no such object: the part left no status
            continue
        status = parse_status(key.name, text)
        if status is not None:
            statuses[key] = status
    return RunRecords(statuses, present)


def telemetry_paths(run: RunLocation) -> list[str] | None:
    """The telemetry files to read: locally those whose footer reads (a sampler's file cut
    short leaves a gap, not a failed analysis); in S3 the whole folder."""
    if run.s3:
        return None
    readable = []
    for path in sorted((run.local / LAYOUT.raw_table(LAYOUT.telemetry)).glob("*.parquet")):
        with contextlib.suppress(OSError, ValueError, pa.ArrowException):
            pq.read_metadata(path)
            readable.append(str(path))
    return readable


def read_telemetry(spark: SparkSession, run: RunLocation) -> DataFrame:
    """Every node's telemetry: the Parquet files of client nodes and local runs, and the
    JSON-lines batches broker machines on AWS stream (:mod:`workload.aws.telemetry_agent`)."""
    telemetry = read_table(spark, run, LAYOUT.telemetry, telemetry_paths(run))
    if not run.has_files(LAYOUT.telemetry_stream, ".jsonl"):
        return telemetry
    stream = (
        spark.read.schema(telemetry.schema)
        .option("recursiveFileLookup", "true")
        .json(run.spark_path(LAYOUT.telemetry_stream))
    )
    return telemetry.unionByName(stream)


def local_records(run_dir: Path) -> RunRecords:
    """:func:`run_records` of a local run directory."""
    present: set[tuple[str, PartKey]] = set()
    unreadable: dict[tuple[str, PartKey], str] = {}
    paths: dict[str, list[str] | None] = {}
    for table in TABLES:
        readable = []
        for path in sorted(raw_dir(run_dir, table).glob("*.parquet")):
            key = PartKey.of_file(path.name)
            try:
                pq.read_metadata(path)
            except (OSError, ValueError, pa.ArrowException) as exc:
                if key is not None:
                    unreadable[table, key] = one_line(str(exc))
                continue
            readable.append(str(path))
            if key is not None:
                present.add((table, key))
        paths[table] = readable
    statuses = {status.key: status for status in read_statuses(run_dir)}
    return RunRecords(statuses, present, unreadable, paths)


@dataclass(frozen=True)
class PointRecords:
    """How one sweep point's records stand (a ``transforms`` state) and why."""

    point: int
    state: str
    reason: str = ""

    @property
    def delivery(self) -> str:
        """The summary's ``delivery`` column: docs/measurement.md §5's word for the point, and why."""
        if self.state == tf.STOPPED:
            return f"not drained: {self.reason}"
        if self.state == tf.INCOMPLETE:
            return f"incomplete: {self.reason}"
        return self.state


def point_records(context: RunContext, records: RunRecords) -> list[PointRecords]:
    """Per sweep point of the context: drained, stopped early, incomplete, or never run.

    A run ends at the first point that is interrupted or fails, so in a run that did
    not complete the last point that left records is the one stopped early, and later
    points never ran. A point missing a node part's records is incomplete, whatever else.
    """
    stopped_early = context.status in ("interrupted", "failed")
    left_records = records.parts()
    last = max((key.point for key in left_records), default=0)
    out = []
    for point in context.points:
        index = point.point
        if stopped_early and index > last:
            out.append(PointRecords(index, tf.NOT_RUN))
            continue
        parts = sorted(expected_parts(point) | {k for k in left_records if k.point == index})
        gaps = [f"{key.who} {gap}" for key in parts if (gap := records.gap(key))]
        failed = [
            records.statuses[key]
            for key in parts
            if key.role == "receiver" and key in records.statuses and not records.statuses[key].ok
        ]
        if gaps:
            more = f"; {len(gaps) - 1} more node process(es) likewise" if len(gaps) > 1 else ""
            out.append(PointRecords(index, tf.INCOMPLETE, gaps[0] + more))
        elif stopped_early and index == last:
            out.append(PointRecords(index, tf.STOPPED, _why_stopped(context)))
        elif failed:
            who, error = failed[0].key.who, failed[0].error
            out.append(PointRecords(index, tf.STOPPED, f"{who} stopped early ({error})"))
        else:
            out.append(PointRecords(index, tf.DRAINED))
    return out


def delivery_label(records: PointRecords, counts: dict[str, Any]) -> str:
    """The point's ``delivery``, from its counts where they settle it: a point the run
    stopped early whose every confirmed message was received (nothing not drained) was
    drained, whatever stopped the run after it."""
    if records.state == tf.STOPPED and counts.get("not_drained") == 0:
        return tf.DRAINED
    return records.delivery


def clock_offsets(statuses: Iterable[NodeStatus]) -> dict[int, dict[str, Any]]:
    """Per sweep point, from its nodes' statuses: the largest clock offset from the
    reference time (ms, ahead or behind) among the nodes that know theirs, and where the
    offsets come from. A status written for a node by someone else (no clock source) says
    nothing about its clock."""
    offsets: dict[int, list[float]] = {}
    sources: dict[int, set[str]] = {}
    for status in statuses:
        if not status.clock_source:
            continue
        sources.setdefault(status.point, set()).add(status.clock_source)
        known = offsets.setdefault(status.point, [])
        if status.clock_offset_s is not None:
            known.append(abs(status.clock_offset_s) * 1000.0)
    return {
        point: {
            "clock_offset_max_ms": max(offsets[point], default=None),
            "clock_source": "; ".join(sorted(found)),
        }
        for point, found in sources.items()
    }


def _why_stopped(context: RunContext) -> str:
    if context.status == "interrupted":
        return "the run was interrupted before receivers drained the queue"
    errors = context.errors
    return f"the run failed ({errors[0]})" if errors else "the run failed"


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
    points = point_records(context, records)
    seconds = read_table(spark, run, "seconds", records.paths.get("seconds"))
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
    _merge(rows, _collect(tf.out_of_range(hist)))
    _merge(rows, clock_offsets(records.statuses.values()))
    states = spark.createDataFrame(
        [(context.run_id, p.point, p.state) for p in points],
        "run_id string, point int, state string",
    )
    delivery = tf.delivery(
        read_table(spark, run, "sent_ranges", records.paths.get("sent_ranges")),
        read_table(spark, run, "received", records.paths.get("received")),
    )
    _merge(rows, _collect(tf.accounting(delivery, states)))
    _merge(rows, {p.point: {"delivery": delivery_label(p, rows.get(p.point, {}))} for p in points})
    histograms = tf.run_histograms(hist, periods).cache()
    for row in (r.asDict() for r in tf.whole_run(histograms).collect()):
        target = rows.setdefault(row["point"], {"point": row["point"]})
        for q in RUN_QUANTILES:
            target[run_column(row["metric"], q)] = row[f"{q}_ms"]
    if not run.s3:  # faults are declared for local runs only
        _merge(rows, fault_columns(run.local, rows))
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
    write_hgrm(histograms, run)
    for cached in (counters, hist, series, histograms, usage):
        cached.unpersist()
    return summary


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


def arrow_schema(schema: T.StructType) -> pa.Schema:
    """The Arrow schema of a (flat) Spark result."""
    to_arrow = {spark: arrow for arrow, spark in _ARROW_TO_SPARK.items()}
    to_arrow[T.DoubleType()] = pa.float64()
    return pa.schema([(f.name, to_arrow[f.dataType]) for f in schema.fields])


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
            "sender_nodes": load.sender_nodes,
            "receiver_nodes": load.receiver_nodes,
            "message_size": load.message_size,
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
    from analysis.session import spark_session

    parser = argparse.ArgumentParser(description="Analyse one brokerbench run directory.")
    parser.add_argument("run_dir", help="a run directory, or s3://bucket/prefix of one")
    args = parser.parse_args(argv)
    settings: dict[str, str] = {}
    if RunLocation.of(args.run_dir).s3 and not cluster_mode():
        settings = s3a_settings(hadoop_aws_jars())
    spark = spark_session(settings=settings)
    try:
        for row in analyse(spark, args.run_dir):
            print(json.dumps(dict(row), default=str))
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
