"""The analysis job: one run's raw tables in, the SPEC §3 table and per-window series out.

Runs in-process after a local run (``brokerbench run`` / ``brokerbench report``) and as a
Spark application (``python -m analysis.job RUN_DIR``, or spark-submit on EMR). It writes
``analysis/summary.csv`` and ``analysis/windows/`` (Parquet) under the run directory.
"""

from __future__ import annotations

import argparse
import csv
import io
import json
import math
from pathlib import Path
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from analysis import transforms as tf
from analysis.prices import cost_per_million, load_prices
from analysis.storage import RunLocation, cluster_mode, hadoop_aws_jars, s3a_settings
from workload.results import TABLES

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
    "cost_per_million_usd",
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


def read_table(spark: SparkSession, run_dir: Path | str | RunLocation, table: str) -> DataFrame:
    schema = spark_schema(TABLES[table])
    run = RunLocation.of(run_dir)
    relative = f"raw/{table}"
    if not run.has_parquet(relative):
        return spark.createDataFrame([], schema)
    return spark.read.schema(schema).parquet(run.spark_path(relative))


def analyse(spark: SparkSession, run_dir: Path | str) -> list[dict[str, Any]]:
    """Compute and write a run's summary and window series; return the summary rows.

    ``run_dir`` is a local directory or ``s3://bucket/prefix`` (see ``analysis.storage``).
    """
    run = RunLocation.of(run_dir)
    context = json.loads(run.read_text("context.json"))
    measurement = context["scenario"]["measurement"]
    seconds = read_table(spark, run, "seconds")
    counters = tf.counters_per_second(seconds).cache()
    hist = tf.histogram_per_second(seconds).cache()
    periods = tf.measurement_periods(counters, math.ceil(measurement["warmup"] or 0))
    windows = tf.window_starts(
        periods, tf.seconds_of(measurement["window"]), tf.seconds_of(measurement["step"])
    )
    series = tf.window_series(counters, hist, windows).cache()
    series.write.mode("overwrite").parquet(run.spark_path("analysis/windows"))

    rows = _collect(tf.throughput(counters, periods))
    _merge(rows, _collect(tf.headline(series)))
    _merge(
        rows,
        _collect(
            tf.delivery(read_table(spark, run, "sent_ranges"), read_table(spark, run, "received"))
        ),
    )
    for row in (r.asDict() for r in tf.whole_run(hist, periods).collect()):
        target = rows.setdefault(row["point"], {"point": row["point"]})
        for q in ("p50", "p99", "p999", "max"):
            target[f"{row['metric']}_{q}_ms"] = row[f"{q}_ms"]
    summary = _summary_rows(context, rows)
    run.write_text("analysis/summary.csv", summary_csv(summary))
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
        row["cost_per_million_usd"] = _cost_per_million(context, row["receive_msgs_per_s"])
        summary.append(row)
    return summary


def _cost_per_million(context: dict[str, Any], msgs_per_s: float | None) -> float | None:
    """What a million messages cost at this point's receive rate, on the run's fleet at
    on-demand prices — only for runs whose context names the fleet (runs on AWS)."""
    cost = context.get("cost")
    if not cost or not msgs_per_s:
        return None
    prices = load_prices(cost.get("prices"))
    try:
        return cost_per_million(
            prices, cost["region"], cost["instances"], 1.0, round(msgs_per_s * 3600)
        )
    except KeyError:  # no price for that region or instance type in the table
        return None


def summary_csv(rows: list[dict[str, Any]]) -> str:
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


def read_summary(run_dir: Path) -> list[dict[str, str]]:
    with (run_dir / "analysis" / "summary.csv").open() as f:
        return list(csv.DictReader(f))


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
            print(json.dumps(row, default=str))
    finally:
        spark.stop()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
