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
- ``drain_msgs_per_s``: messages received from the drain's start to the catch-up, per
  second of ``catch_up_s`` (to the point's last second when it did not catch up);
- ``backlog_left``: what was still queued at the end of the point's last second (0 when
  it drained);
- the processing latency of the drain's seconds (from its start to the catch-up) apart
  from the steady seconds (the latency span's seconds before the backlog and after the
  catch-up), as p50 and p99.

A drain the limit cut off leaves its point *stopped*: what is still queued is not drained,
never lost (:func:`cut_off_records`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from analysis import transforms as tf
from analysis.records import PointRecords
from workload.model.backlog import BacklogPhases

KEY = tf.KEY
NS = 1_000_000_000
LATENCY = "processing_latency"


def phases_frame(
    spark: SparkSession, run_id: str, phases: Mapping[int, BacklogPhases]
) -> DataFrame:
    """The phases of a run's points as rows: when the backlog began and the drain began
    (seconds, wall clock) and whether the limit cut the drain off."""
    rows = [
        (
            run_id,
            p.point,
            p.hold_ns / NS if p.hold_ns is not None else None,
            p.drain_ns / NS if p.drain_ns is not None else None,
            p.cut_off,
        )
        for p in phases.values()
    ]
    return spark.createDataFrame(
        rows, "run_id string, point int, hold_at double, drain_at double, cut_off boolean"
    )


def series(counters: DataFrame, phases: DataFrame) -> DataFrame:
    """Per point with phases and second (every second from its first to its last record):
    confirmed and received (first deliveries) in the second and up to its end, and queued.

    Columns: run_id, point, second, confirmed, received, confirmed_total, received_total,
    queued."""
    points = counters.join(phases.select(*KEY), on=KEY)
    span = points.groupBy(*KEY).agg(F.min("second").alias("first"), F.max("second").alias("last"))
    grid = span.select(*KEY, F.explode(F.sequence("first", "last")).alias("second"))
    per_second = points.select(
        *KEY,
        "second",
        F.col("sent").alias("confirmed"),
        (F.col("received") - F.col("redelivered")).alias("received"),
    )
    upto = (
        Window.partitionBy(*KEY)
        .orderBy("second")
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    return (
        grid.join(per_second, on=[*KEY, "second"], how="left")
        .fillna(0, ["confirmed", "received"])
        .withColumn("confirmed_total", F.sum("confirmed").over(upto))
        .withColumn("received_total", F.sum("received").over(upto))
        .withColumn(
            "queued", F.greatest(F.lit(0), F.col("confirmed_total") - F.col("received_total"))
        )
    )


def drain_figures(backlog: DataFrame, phases: DataFrame) -> DataFrame:
    """Per point: peak_backlog, backlog_left, catch_up_s, drain_msgs_per_s, and the seconds
    the drain and the steady phase span (``drain_first``, ``drain_last``, ``hold_first``)
    for :func:`latencies`."""
    order = Window.partitionBy(*KEY).orderBy("second")
    marked = backlog.join(phases, on=KEY).withColumn(
        "before", F.lag("confirmed_total", 1, 0).over(order)
    )
    drain_second = F.floor(F.col("drain_at")).cast("long")
    caught = (F.col("second") >= drain_second) & (F.col("received_total") >= F.col("before"))
    per_point = marked.groupBy(*KEY).agg(
        F.max("queued").alias("peak_backlog"),
        F.max_by("queued", "second").alias("backlog_left"),
        F.max("second").alias("last_second"),
        F.min(F.when(caught, F.col("second"))).alias("caught_up"),
        F.first("drain_at").alias("drain_at"),
        F.first("hold_at").alias("hold_at"),
    )
    drain_first = F.floor(F.col("drain_at")).cast("long")
    drain_last = F.coalesce(F.col("caught_up"), F.col("last_second"))
    drained_for = drain_last + 1 - F.col("drain_at")
    received = (
        marked.join(per_point.select(*KEY, drain_last.alias("drain_last")), on=KEY)
        .where(F.col("second").between(drain_second, F.col("drain_last")))
        .groupBy(*KEY)
        .agg(F.sum("received").alias("drain_received"))
    )
    return per_point.join(received, on=KEY, how="left").select(
        *KEY,
        "peak_backlog",
        "backlog_left",
        F.when(F.col("caught_up").isNotNull(), drained_for).alias("catch_up_s"),
        F.when(drained_for > 0, F.col("drain_received") / drained_for).alias("drain_msgs_per_s"),
        drain_first.alias("drain_first"),
        F.when(F.col("drain_at").isNotNull(), drain_last).alias("drain_last"),
        F.floor(F.col("hold_at")).cast("long").alias("hold_first"),
    )


def latencies(hist: DataFrame, figures: DataFrame, periods: DataFrame) -> DataFrame:
    """Per point: processing-latency p50 and p99 of the drain's seconds
    (``drain_processing_p50_ms``, ...) and of the steady seconds (the latency span's seconds
    before the backlog began and after the catch-up: ``steady_processing_p50_ms``, ...)."""
    spans = figures.join(periods.select(*KEY, "latency_start", "latency_end"), on=KEY)
    latency = hist.where(F.col("metric") == LATENCY).join(spans, on=KEY)
    drain = latency.where(F.col("second").between(F.col("drain_first"), F.col("drain_last")))
    steady = latency.where(
        F.col("second").between(F.col("latency_start"), F.col("latency_end"))
        & (
            (F.col("second") < F.coalesce(F.col("hold_first"), F.col("drain_first")))
            | (F.col("second") > F.col("drain_last"))
        )
    )
    out = None
    for name, part in (("drain", drain), ("steady", steady)):
        found = tf.percentiles(part.select(*KEY, "bucket", "count"), list(KEY)).select(
            *KEY,
            F.col("p50_ms").alias(f"{name}_processing_p50_ms"),
            F.col("p99_ms").alias(f"{name}_processing_p99_ms"),
        )
        out = found if out is None else out.join(found, on=KEY, how="full")
    assert out is not None
    return out


#: The figures a point with ``[backlog]`` gets (the summary's backlog columns).
FIGURES = (
    "peak_backlog",
    "backlog_left",
    "catch_up_s",
    "drain_msgs_per_s",
    "drain_processing_p50_ms",
    "drain_processing_p99_ms",
    "steady_processing_p50_ms",
    "steady_processing_p99_ms",
)


def backlog_columns(
    spark: SparkSession,
    run_id: str,
    phases: Mapping[int, BacklogPhases],
    counters: DataFrame,
    hist: DataFrame,
    periods: DataFrame,
) -> tuple[dict[int, dict[str, Any]], DataFrame | None]:
    """Per point with phases: its backlog columns, and the backlog series (None without
    any point with phases)."""
    if not phases:
        return {}, None
    frame = phases_frame(spark, run_id, phases)
    backlog = series(counters, frame).cache()
    figures = drain_figures(backlog, frame).cache()
    found = figures.join(latencies(hist, figures, periods), on=KEY, how="left")
    columns: dict[int, dict[str, Any]] = {}
    for row in found.collect():
        record = row.asDict()
        columns[int(record["point"])] = {name: record.get(name) for name in FIGURES} | {
            "drain_cut_off": phases[int(record["point"])].cut_off
        }
    figures.unpersist()
    return columns, backlog.orderBy(*KEY, "second")


def cut_off_records(
    points: list[PointRecords], phases: Mapping[int, BacklogPhases]
) -> list[PointRecords]:
    """The points whose drain the limit cut off are stopped early, not drained: what was
    still queued is *not drained*, never lost (docs/measurement.md §5)."""
    out = []
    for records in points:
        found = phases.get(records.point)
        if found is not None and found.cut_off and records.state == tf.DRAINED:
            queued = found.queued_at_cut_off or 0
            records = PointRecords(
                records.point,
                tf.STOPPED,
                f"the drain limit ({found.drain_limit_s:g} s) ended the point with "
                f"{queued:,} message(s) queued",
            )
        out.append(records)
    return out
