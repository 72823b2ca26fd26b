"""The Parquet tables each client node writes, and the status of each node part.

The raw tables, each a folder of the run (``raw/<table>/``, :mod:`workload.model.layout`):

  ``seconds``                 per second, per worker: counters and latency histograms
  ``sent_ranges``             per sender worker: confirmed sequence ranges, per second
  ``received``                per received message: sender node, worker, seq, second, size,
                              and whether it arrived late for its key

and ``nodes/``, one JSON status per node part (ok, or the error that stopped it).

Every row carries ``run_id`` and ``point`` so the tables of many runs can be read as one
dataset (locally or from S3). Files are named ``p<point>-<role>-<node>.<part>.parquet``: a
node's workers are spread over processes, each writing its own part (:class:`PartKey`).

Every file is written whole or not at all; a write that fails (a full disk, a read-only
directory) raises :class:`~workload.model.errors.RecordsNotWritten`, one line naming the
file and why. A node part's recorders become these tables in :mod:`workload.engine.node_records`.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from workload.model.errors import RecordsNotWritten, write_whole
from workload.model.layout import LAYOUT

HIST = pa.map_(pa.int32(), pa.int64())
#: A second is split into this many slots for ``active_tenths`` (the worker's recorder,
#: :attr:`workload.engine.recording.SecondStats.active`, marks them).
SLOTS = 10
SLOT_NS = 1_000_000_000 // SLOTS

SECONDS_SCHEMA = pa.schema(
    [
        ("run_id", pa.string()),
        ("point", pa.int32()),
        ("role", pa.string()),
        ("node", pa.int32()),
        ("worker", pa.int32()),
        ("second", pa.int64()),
        ("sent", pa.int64()),
        ("received", pa.int64()),
        ("acked", pa.int64()),
        ("errors", pa.int64()),
        ("redelivered", pa.int64()),
        ("foreign", pa.int64()),
        # Tenths of the second with a confirmed send / a receive (bit i: the i-th tenth).
        ("active_tenths", pa.int32()),
        ("send_latency", HIST),
        ("processing_latency", HIST),
        ("send_delay", HIST),
        # Bytes of the messages confirmed, received (this run's) and acknowledged.
        ("sent_bytes", pa.int64()),
        ("received_bytes", pa.int64()),
        ("acked_bytes", pa.int64()),
    ]
)

#: The resource telemetry of every node (:mod:`workload.engine.telemetry`): one file per point
#: and node, ``raw/telemetry/p<K>-<node>.parquet``.
TELEMETRY_SCHEMA = pa.schema(
    [
        ("run_id", pa.string()),
        ("point", pa.int32()),
        ("role", pa.string()),
        ("node", pa.string()),
        ("second", pa.int64()),
        ("seconds", pa.float64()),
        ("cores", pa.float64()),
        ("processes", pa.int32()),
        ("cpu_pct", pa.float64()),
        ("cpu_user_pct", pa.float64()),
        ("cpu_system_pct", pa.float64()),
        ("cpu_iowait_pct", pa.float64()),
        # The machine's CPU taken by the hypervisor for other guests (the host row; else null).
        ("cpu_steal_pct", pa.float64()),
        ("cpu_process_max_pct", pa.float64()),
        # A broker node's busiest thread, % of one core (else null).
        ("cpu_thread_max_pct", pa.float64()),
        ("rss_bytes", pa.int64()),
        ("read_bytes_s", pa.float64()),
        ("write_bytes_s", pa.float64()),
        ("device", pa.string()),
        ("device_write_ops_s", pa.float64()),
        ("device_write_bytes_s", pa.float64()),
        ("device_busy_pct", pa.float64()),
        ("device_flushes_s", pa.float64()),
        ("net_in_bytes_s", pa.float64()),
        ("net_out_bytes_s", pa.float64()),
        ("gc_pause_ms_s", pa.float64()),
        # Space the node's data directory takes on disk, every few seconds (else null).
        ("data_bytes", pa.int64()),
        ("note", pa.string()),
    ]
)

SENT_RANGES_SCHEMA = pa.schema(
    [
        ("run_id", pa.string()),
        ("point", pa.int32()),
        ("node", pa.int32()),
        ("worker", pa.int32()),
        ("seq_lo", pa.int64()),
        ("seq_hi", pa.int64()),
        # The second the range was confirmed in (a worker's contiguous sends of a second).
        ("second", pa.int64()),
    ]
)

RECEIVED_SCHEMA = pa.schema(
    [
        ("run_id", pa.string()),
        ("point", pa.int32()),
        ("sender_node", pa.int32()),
        ("sender_worker", pa.int32()),
        ("seq", pa.int64()),
        ("receiver_node", pa.int32()),
        ("second", pa.int64()),
        # Arrived late for its key at its receiver worker (workload.engine.keys.OrderTracker);
        # False for a keyless load, null in the records of older runs.
        ("late", pa.bool_()),
        # The message's size in bytes.
        ("size", pa.int32()),
    ]
)

TABLES = {
    "seconds": SECONDS_SCHEMA,
    "sent_ranges": SENT_RANGES_SCHEMA,
    "received": RECEIVED_SCHEMA,
}
#: The table that proves delivery, per role: what senders had confirmed, what receivers got.
DELIVERY_TABLES = {"sender": "sent_ranges", "receiver": "received"}


@dataclass(frozen=True, order=True)
class PartKey:
    """One process ("part") of one client node at one sweep point: whose records a file holds."""

    point: int
    role: str
    node: int
    part: int = 0

    @property
    def name(self) -> str:
        return LAYOUT.part_name(self.point, self.role, self.node, self.part)

    @property
    def status_file(self) -> str:
        """Its status, relative to the run's root."""
        return LAYOUT.status(self.point, self.role, self.node, self.part)

    @property
    def who(self) -> str:
        return f"{self.role} node {self.node} process {self.part}"

    @property
    def tables(self) -> tuple[str, str]:
        """The raw tables this part writes."""
        return ("seconds", DELIVERY_TABLES[self.role])

    @classmethod
    def of_file(cls, path: str) -> PartKey | None:
        """The part a file of a run belongs to (``…/p0-receiver-1.0.parquet``); None otherwise."""
        found = LAYOUT.part_of(path)
        return None if found is None else cls(*found)


@dataclass(frozen=True)
class NodeStatus:
    """How one node part ended, and its host's clock state before the point
    (``workload.engine.clock``; no source when someone else wrote the status for it)."""

    point: int
    role: str
    node: int
    ok: bool
    error: str = ""
    part: int = 0
    sent: int = 0
    received: int = 0
    errors: int = 0
    clock_offset_s: float | None = None
    clock_source: str = ""

    @property
    def key(self) -> PartKey:
        return PartKey(self.point, self.role, self.node, self.part)


def raw_dir(run_dir: Path, table: str) -> Path:
    return run_dir / LAYOUT.raw_table(table)


def read_point(run_dir: Path, table: str, point: int, columns: list[str] | None = None) -> pa.Table:
    """One raw table's rows of one sweep point, from every node part's file (``columns``
    only, when given); an empty table of the same schema when the point has none."""
    schema = TABLES[table]
    files = sorted(raw_dir(run_dir, table).glob(LAYOUT.point_files(point)))
    if not files:
        empty = schema.empty_table()
        return empty.select(columns) if columns is not None else empty
    return pa.concat_tables(pq.read_table(f, columns=columns, schema=schema) for f in files)


def write_table_file(path: Path, table: pa.Table) -> None:
    """Write one Parquet file whole or not at all (:class:`RecordsNotWritten` names it)."""
    write_whole(path, lambda tmp: pq.write_table(table, tmp, compression="zstd"))


def write_status(run_dir: Path, status: NodeStatus) -> None:
    path = run_dir / status.key.status_file
    write_whole(path, lambda tmp: tmp.write_text(json.dumps(asdict(status), indent=1)))


def read_statuses(run_dir: Path) -> list[NodeStatus]:
    """The node statuses a run holds; a status file that cannot be read counts as absent."""
    directory = run_dir / LAYOUT.nodes
    if not directory.is_dir():
        return []
    statuses = []
    for path in sorted(directory.glob("*.json")):
        status = parse_status(path)
        if status is not None:
            statuses.append(status)
    return statuses


def parse_status(path: Path | str, text: str | None = None) -> NodeStatus | None:
    """One status file (or its text), None when it is missing or not a status."""
    known = {f.name for f in fields(NodeStatus)}
    try:
        data = json.loads(Path(path).read_text() if text is None else text)
        return NodeStatus(**{k: v for k, v in data.items() if k in known})
    except (OSError, ValueError, TypeError, AttributeError):
        return None


def telemetry_table(rows: list[dict[str, Any]]) -> pa.Table:
    """Sampler rows as an Arrow table of :data:`TELEMETRY_SCHEMA`."""
    return pa.Table.from_pylist(
        [{name: row.get(name) for name in TELEMETRY_SCHEMA.names} for row in rows],
        TELEMETRY_SCHEMA,
    )


def write_telemetry(run_dir: Path, rows: list[dict[str, Any]], cut: int | None = None) -> None:
    """Write sampler rows as one Parquet file per point and node (:mod:`workload.model.layout`;
    with ``cut``, a chunk flushed while the point runs); every file is attempted, the first
    that could not be written is raised
    (:class:`~workload.model.errors.RecordsNotWritten`)."""
    by_file: dict[tuple[int, str], list[dict[str, Any]]] = {}
    for row in rows:
        by_file.setdefault((row["point"], row["node"]), []).append(row)
    failed: list[RecordsNotWritten] = []
    for (point, node), part in sorted(by_file.items()):
        try:
            path = run_dir / LAYOUT.telemetry_file(point, node, cut)
            write_table_file(path, telemetry_table(part))
        except RecordsNotWritten as exc:
            failed.append(exc)
    if failed:
        raise failed[0]


def read_telemetry_chunks(run_dir: Path, point: int) -> list[dict[str, Any]]:
    """The telemetry rows of ``point`` flushed in chunks while it ran (files that cannot be
    read are skipped: a gap, not a failure)."""
    rows: list[dict[str, Any]] = []
    for path in sorted(raw_dir(run_dir, LAYOUT.telemetry).glob(f"p{point}-*.c*.parquet")):
        with contextlib.suppress(OSError, ValueError, pa.ArrowException):
            rows += pq.read_table(path, schema=TELEMETRY_SCHEMA).to_pylist()
    return rows
