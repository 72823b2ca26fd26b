"""A run's raw tables as Spark reads them: their Spark schemas derived from the Arrow
schemas the nodes write (and back, for the job's small results), a table's files, and
every node's telemetry (Parquet files and the JSON-lines batches broker machines stream).
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from analysis.storage import RunLocation
from workload.model.layout import LAYOUT
from workload.model.results import TABLES, TELEMETRY_SCHEMA

_ARROW_TO_SPARK: dict[pa.DataType, T.DataType] = {
    pa.string(): T.StringType(),
    pa.int32(): T.IntegerType(),
    pa.int64(): T.LongType(),
    pa.float64(): T.DoubleType(),
    pa.bool_(): T.BooleanType(),
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
    JSON-lines batches broker machines on AWS stream (:mod:`workload.engine.aws.telemetry_agent`)."""
    telemetry = read_table(spark, run, LAYOUT.telemetry, telemetry_paths(run))
    if not run.has_files(LAYOUT.telemetry_stream, ".jsonl"):
        return telemetry
    stream = (
        spark.read.schema(telemetry.schema)
        .option("recursiveFileLookup", "true")
        .json(run.spark_path(LAYOUT.telemetry_stream))
    )
    return telemetry.unionByName(stream)


def arrow_schema(schema: T.StructType) -> pa.Schema:
    """The Arrow schema of a (flat) Spark result."""
    to_arrow = {spark: arrow for arrow, spark in _ARROW_TO_SPARK.items()}
    to_arrow[T.DoubleType()] = pa.float64()
    return pa.schema([(f.name, to_arrow[f.dataType]) for f in schema.fields])
