"""The analysis job: one run's raw tables in, the SPEC §3 table and per-window series out.

Runs in-process after a local run (``brokerbench run`` / ``brokerbench report``) and as a
Spark application (``python -m analysis.job RUN_DIR``, or spark-submit on EMR). It writes
``analysis/summary.csv`` and ``analysis/windows/`` (Parquet) under the run directory.
"""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from analysis import transforms as tf
from workload.results import TABLES, raw_dir

SUMMARY_COLUMNS = [
    "broker",
    "point",
    "label",
    "threads",
    "sender_nodes",
    "receiver_nodes",
    "message_size",
    "sent",
    "received",
    "send_msgs_per_s",
    "receive_msgs_per_s",
    "processing_latency_p95_ms",
    "send_latency_p95_ms",
    "lost",
    "duplicated",
    "redelivered",
    "unconfirmed_received",
    "errors",
    "receivers_kept_up",
    "measured_seconds",
    "processing_latency_p50_ms",
    "processing_latency_p99_ms",
    "processing_latency_p999_ms",
    "processing_latency_max_ms",
    "send_latency_p50_ms",
    "send_latency_p99_ms",
    "send_latency_max_ms",
    "send_delay_p95_ms",
]

_ARROW_TO_SPARK: dict[pa.DataType, T.DataType] = {
    pa.string(): T.StringType(),
    pa.int32(): T.IntegerType(),
    pa.int64(): T.LongType(),
}


def spark_schema(schema: pa.Schema) -> T.StructType:
    """The Spark schema of a raw table, derived from its Arrow schema."""

    def convert(t: pa.DataType) -> T.DataType:
        if pa.types.is_map(t):
            return T.MapType(convert(t.key_type), convert(t.item_type))
        return _ARROW_TO_SPARK[t]

    return T.StructType([T.StructField(f.name, convert(f.type)) for f in schema])


def read_table(spark: SparkSession, run_dir: Path, table: str) -> DataFrame:
    schema = spark_schema(TABLES[table])
    directory = raw_dir(run_dir, table)
    if not any(directory.glob("*.parquet")):
        return spark.createDataFrame([], schema)
    return spark.read.schema(schema).parquet(str(directory))


def analyse(spark: SparkSession, run_dir: Path) -> list[dict[str, Any]]:
    """Compute and write a run's summary and window series; return the summary rows."""
    context = json.loads((run_dir / "context.json").read_text())
    measurement = context["scenario"]["measurement"]
    seconds = read_table(spark, run_dir, "seconds")
    counters = tf.counters_per_second(seconds).cache()
    hist = tf.histogram_per_second(seconds).cache()
    periods = tf.measurement_periods(counters, int(measurement["warmup"]))
    windows = tf.window_starts(
        periods, tf.seconds_of(measurement["window"]), tf.seconds_of(measurement["step"])
    )
    series = tf.window_series(counters, hist, windows).cache()
    out = run_dir / "analysis"
    out.mkdir(parents=True, exist_ok=True)
    series.write.mode("overwrite").parquet(str(out / "windows"))

    rows = _collect(tf.throughput(counters, periods))
    _merge(rows, _collect(tf.headline(series)))
    _merge(
        rows,
        _collect(
            tf.delivery(
                read_table(spark, run_dir, "sent_ranges"), read_table(spark, run_dir, "received")
            )
        ),
    )
    for row in (r.asDict() for r in tf.whole_run(hist).collect()):
        target = rows.setdefault(row["point"], {"point": row["point"]})
        for q in ("p50", "p99", "p999", "max"):
            target[f"{row['metric']}_{q}_ms"] = row[f"{q}_ms"]
    summary = _summary_rows(context, rows)
    _write_csv(out / "summary.csv", summary)
    counters.unpersist()
    hist.unpersist()
    series.unpersist()
    return summary


def _collect(df: DataFrame) -> dict[int, dict[str, Any]]:
    """Small per-point results only (one row per sweep point)."""
    return {row["point"]: row.asDict() for row in df.collect()}


def _merge(into: dict[int, dict[str, Any]], more: dict[int, dict[str, Any]]) -> None:
    for point, values in more.items():
        into.setdefault(point, {"point": point}).update(values)


def _summary_rows(context: dict[str, Any], rows: dict[int, dict[str, Any]]) -> list[dict[str, Any]]:
    summary = []
    for point in context["points"]:
        r = rows.get(point["point"], {})
        load = point["load"]
        row = {
            "broker": context["broker"]["system"],
            "point": point["point"],
            "label": point["label"],
            "threads": load["threads"],
            "sender_nodes": load["sender_nodes"],
            "receiver_nodes": load["receiver_nodes"],
            "message_size": load["message_size"],
            "sent": r.get("confirmed", r.get("sent", 0)) or 0,
            "received": r.get("received", 0) or 0,
        }
        for column in SUMMARY_COLUMNS:
            if column not in row:
                row[column] = r.get(column)
        summary.append(row)
    return summary


def _write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=SUMMARY_COLUMNS)
        writer.writeheader()
        for row in rows:
            writer.writerow({k: _fmt(row.get(k)) for k in SUMMARY_COLUMNS})


def _fmt(value: Any) -> Any:
    if isinstance(value, float):
        return f"{value:.3f}"
    if value is None:
        return ""
    return value


def read_summary(run_dir: Path) -> list[dict[str, str]]:
    with (run_dir / "analysis" / "summary.csv").open() as f:
        return list(csv.DictReader(f))


def main(argv: list[str] | None = None) -> int:
    from analysis.session import spark_session

    parser = argparse.ArgumentParser(description="Analyse one brokerbench run directory.")
    parser.add_argument("run_dir", type=Path)
    args = parser.parse_args(argv)
    spark = spark_session()
    try:
        for row in analyse(spark, args.run_dir):
            print(json.dumps(row, default=str))
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
