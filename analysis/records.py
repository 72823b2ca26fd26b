"""Taking stock of a run's records before anything is counted (docs/measurement.md §5): every
node process a sweep point ran must have left its records (:class:`RunRecords`); a point
missing some is *incomplete* and no loss is claimed for it, and a point the run stopped
early is *not drained* (:class:`PointRecords`); a point some of whose records end early is
read up to there (:func:`before_ends`). The node statuses also give each point's largest
clock offset (:func:`clock_offsets`), which qualifies its processing latency.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from analysis import transforms as tf
from analysis.raw_tables import read_table
from analysis.storage import RunLocation
from analysis.summary_row import Figures
from workload.model.errors import one_line
from workload.model.layout import LAYOUT
from workload.model.record import COORDINATOR_GONE, PointEntry, RunContext
from workload.model.results import (
    DELIVERY_TABLES,
    TABLES,
    NodeStatus,
    PartKey,
    parse_status,
    raw_dir,
    read_statuses,
)


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
    #: Node parts whose records end in the chunks they flushed while they ran (no final
    #: file: the process was killed): the wall-clock second before which they hold every
    #: record (docs/measurement.md §5).
    ends: dict[PartKey, int] = field(default_factory=dict)

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
    each spread over the point's processes per node of its role."""
    nodes = {"sender": point.load.sender_nodes, "receiver": point.load.receivers}
    return {
        PartKey(point.point, role, node, part)
        for role, count in nodes.items()
        for node in range(count)
        for part in range(point.processes_of(role))
    }


def run_records(spark: SparkSession, run: RunLocation, context: RunContext) -> RunRecords:
    """Take stock of a run's records: locally every Parquet footer is read (a file that
    cannot be read is left out of the analysis and named); in S3, whose objects are
    whole or absent, the listing is Spark's and statuses are read by name."""
    if not run.s3:
        return local_records(run.local)
    present: set[tuple[str, PartKey]] = set()
    cuts: dict[tuple[str, PartKey], int | None] = {}
    for table in TABLES:
        for path in read_table(spark, run, table).inputFiles():
            key = PartKey.of_file(path)
            if key is not None:
                present.add((table, key))
                _note_cut(cuts, table, key, path)
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
    return RunRecords(statuses, present, ends=_ends(cuts))


def local_records(run_dir: Path) -> RunRecords:
    """:func:`run_records` of a local run directory."""
    present: set[tuple[str, PartKey]] = set()
    unreadable: dict[tuple[str, PartKey], str] = {}
    paths: dict[str, list[str] | None] = {}
    cuts: dict[tuple[str, PartKey], int | None] = {}
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
                _note_cut(cuts, table, key, path.name)
        paths[table] = readable
    statuses = {status.key: status for status in read_statuses(run_dir)}
    return RunRecords(statuses, present, unreadable, paths, _ends(cuts))


def _note_cut(
    cuts: dict[tuple[str, PartKey], int | None], table: str, key: PartKey, path: str
) -> None:
    """Keep how far a part's files of one table reach: None once its final file is seen,
    else the latest cut of its chunks."""
    cut = LAYOUT.chunk_of(path)
    if (table, key) in cuts and cuts[table, key] is None:
        return
    if cut is None:
        cuts[table, key] = None
    else:
        cuts[table, key] = max(cut, cuts.get((table, key)) or cut)


def _ends(cuts: dict[tuple[str, PartKey], int | None]) -> dict[PartKey, int]:
    """Per part without a final file of every table it writes: where its records end, the
    earliest of its tables' latest chunk cuts (a kill between a chunk's two files leaves
    the later one out). A table with no file at all is a gap, not an end
    (:meth:`RunRecords.gap`)."""
    ends: dict[PartKey, int] = {}
    for key in {key for _, key in cuts}:
        reach = [cuts[table, key] for table in key.tables if (table, key) in cuts]
        chunked = [cut for cut in reach if cut is not None]
        if chunked:
            ends[key] = min(chunked)
    return ends


@dataclass(frozen=True)
class PointRecords:
    """How one sweep point's records stand (a ``transforms`` state) and why."""

    point: int
    state: str
    reason: str = ""
    #: Where its records end (a wall-clock second, exclusive) when a node part's end in
    #: chunks: nothing at or after it is read (None: they do not).
    data_end: int | None = None

    @property
    def delivery(self) -> str:
        """The summary's ``delivery`` column: docs/measurement.md §5's word for the point, and why."""
        if self.state == tf.STOPPED:
            return f"not drained: {self.reason}"
        if self.state == tf.INCOMPLETE:
            return f"incomplete: {self.reason}"
        return self.state


def point_records(
    context: RunContext, records: RunRecords, starts: Mapping[int, int] | None = None
) -> list[PointRecords]:
    """Per sweep point of the context: drained, stopped early, incomplete, or never run.

    A run ends at the first point that is interrupted or fails, so in a run that did
    not complete the last point that left records is the one stopped early, and later
    points never ran. A point missing a node part's records is incomplete, whatever else.
    So is a point some of whose node parts left only the chunks they flushed while they
    ran (a process killed): its records end where the earliest of those parts' do — the
    analysis reads nothing after it, and since messages sent before it may have been
    received after it, none is counted lost or not drained. ``starts``: each point's first
    recorded second, to say where its data ends in seconds from it.
    """
    stopped_early = context.ended in ("interrupted", "failed")
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
        ends = [records.ends[key] for key in parts if key in records.ends]
        if gaps:
            more = f"; {len(gaps) - 1} more node process(es) likewise" if len(gaps) > 1 else ""
            out.append(PointRecords(index, tf.INCOMPLETE, gaps[0] + more))
        elif ends:
            end = min(ends)
            start = (starts or {}).get(index)
            reason = _data_end(context, point, end, start)
            out.append(PointRecords(index, tf.INCOMPLETE, reason, data_end=end))
        elif stopped_early and index == last:
            out.append(PointRecords(index, tf.STOPPED, _why_stopped(context)))
        elif failed:
            who, error = failed[0].key.who, failed[0].error
            out.append(PointRecords(index, tf.STOPPED, f"{who} stopped early ({error})"))
        else:
            out.append(PointRecords(index, tf.DRAINED))
    return out


def first_seconds(seconds: DataFrame) -> dict[int, int]:
    """Per point: its first recorded second."""
    firsts = seconds.groupBy(*tf.KEY).agg(F.min("second").alias("first"))
    return {r["point"]: r["first"] for r in firsts.collect()}


def before_ends(table: DataFrame, ends: Mapping[int, int]) -> DataFrame:
    """The rows of a table with a ``second`` that lie before their point's end of data
    (``ends``: point → wall-clock second; a point not in it keeps every row)."""
    if not ends:
        return table
    keep = F.lit(True)
    for point, end in sorted(ends.items()):
        keep = F.when(F.col("point") == point, F.col("second") < end).otherwise(keep)
    return table.where(keep)


def delivery_label(records: PointRecords, not_drained: int | None) -> str:
    """The point's ``delivery``, from its counts where they settle it: a point the run
    stopped early whose every confirmed message was received (nothing not drained) was
    drained, whatever stopped the run after it."""
    if records.state == tf.STOPPED and not_drained == 0:
        return tf.DRAINED
    return records.delivery


@dataclass(frozen=True, eq=False)
class Clocks(Figures):
    """A point's nodes' clocks."""

    clock_offset_max_ms: float | None
    clock_source: str


def clock_offsets(statuses: Iterable[NodeStatus]) -> dict[int, Clocks]:
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
        point: Clocks(max(offsets[point], default=None), "; ".join(sorted(found)))
        for point, found in sources.items()
    }


def _data_end(context: RunContext, point: PointEntry, end: int, start: int | None) -> str:
    """Where a point's records end, and why, for its ``delivery``: "data ends at 34 s of
    60 s; the run was interrupted (the coordinator is gone)…"."""
    duration = point.load.duration
    of = f" of {float(duration):g} s" if isinstance(duration, int | float) else ""
    at = f"at {end - start} s{of}" if start is not None else f"before second {end}"
    if context.coordinator_gone:
        why = f"the run was {COORDINATOR_GONE}"
    elif context.ended == "interrupted":
        why = "the run was interrupted"
    elif context.ended == "failed":
        why = "the run failed"
    else:
        why = "a node process ended without its final records"
    return (
        f"data ends {at}; {why}: later records are not read, and messages sent before it "
        "are not counted lost or not drained (some may have been received after it)"
    )


def _why_stopped(context: RunContext) -> str:
    if context.coordinator_gone:
        return f"the run was {COORDINATOR_GONE} before receivers drained the queue"
    if context.status == "interrupted":
        return "the run was interrupted before receivers drained the queue"
    errors = context.errors
    return f"the run failed ({errors[0]})" if errors else "the run failed"
