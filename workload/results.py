"""The on-disk layout of a run and the Parquet tables each client node writes.

``RESULTS_DIR/<run-id>/``
  ``context.json``            the run context (``workload.context``)
  ``raw/seconds/``            per second, per worker: counters and latency histograms
  ``raw/sent_ranges/``        per sender worker: confirmed sequence ranges
  ``raw/received/``           per received message: sender node, worker, seq, second
  ``nodes/``                  one JSON status per node (ok, or the error that stopped it)
  ``analysis/``               what the analysis job writes (summary.csv, windows, report)

Every row carries ``run_id`` and ``point`` so the tables of many runs can be read as one
dataset (locally or from S3). Files are named ``p<point>-<role>-<node>.<part>.parquet``: a
node's workers are spread over processes, each writing its own part.
"""

from __future__ import annotations

import json
from array import array
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from workload.recording import WorkerRecorder

HIST = pa.map_(pa.int32(), pa.int64())

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
        ("send_latency", HIST),
        ("processing_latency", HIST),
        ("send_delay", HIST),
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
    ]
)

TABLES = {
    "seconds": SECONDS_SCHEMA,
    "sent_ranges": SENT_RANGES_SCHEMA,
    "received": RECEIVED_SCHEMA,
}


@dataclass(frozen=True)
class NodeStatus:
    point: int
    role: str
    node: int
    ok: bool
    error: str = ""
    part: int = 0
    sent: int = 0
    received: int = 0
    errors: int = 0


def raw_dir(run_dir: Path, table: str) -> Path:
    return run_dir / "raw" / table


def node_file(point: int, role: str, node: int, part: int = 0) -> str:
    return f"p{point}-{role}-{node}.{part}"


def write_node(
    run_dir: Path,
    run_id: str,
    point: int,
    role: str,
    node: int,
    recorders: Iterable[WorkerRecorder],
    part: int = 0,
) -> None:
    """Write one node part's recorders as one Parquet file per table (atomically renamed)."""
    recorders = list(recorders)
    seconds: dict[str, list[object]] = {name: [] for name in SECONDS_SCHEMA.names}
    ranges: dict[str, list[object]] = {name: [] for name in SENT_RANGES_SCHEMA.names}
    for rec in recorders:
        for second, s in sorted(rec.seconds.items()):
            row = {
                "run_id": run_id,
                "point": point,
                "role": role,
                "node": node,
                "worker": rec.worker,
                "second": second,
                "sent": s.sent,
                "received": s.received,
                "acked": s.acked,
                "errors": s.errors,
                "redelivered": s.redelivered,
                "foreign": s.foreign,
                "send_latency": list(s.send_latency.counts.items()),
                "processing_latency": list(s.processing_latency.counts.items()),
                "send_delay": list(s.send_delay.counts.items()),
            }
            for key, value in row.items():
                seconds[key].append(value)
        for lo, hi in rec.sent_ranges:
            for key, value in zip(
                SENT_RANGES_SCHEMA.names, (run_id, point, node, rec.worker, lo, hi), strict=True
            ):
                ranges[key].append(value)
    name = node_file(point, role, node, part)
    _write(raw_dir(run_dir, "seconds"), name, pa.table(seconds, schema=SECONDS_SCHEMA))
    if role == "sender":
        _write(raw_dir(run_dir, "sent_ranges"), name, pa.table(ranges, schema=SENT_RANGES_SCHEMA))
    else:
        n = sum(len(r.rx_seq) for r in recorders)
        received = pa.table(
            {
                "run_id": pa.repeat(pa.scalar(run_id, pa.string()), n),
                "point": pa.repeat(pa.scalar(point, pa.int32()), n),
                "sender_node": _concat([r.rx_node for r in recorders], pa.int32()),
                "sender_worker": _concat([r.rx_worker for r in recorders], pa.int32()),
                "seq": _concat([r.rx_seq for r in recorders], pa.int64()),
                "receiver_node": pa.repeat(pa.scalar(node, pa.int32()), n),
                "second": _concat([r.rx_second for r in recorders], pa.int64()),
            },
            schema=RECEIVED_SCHEMA,
        )
        _write(raw_dir(run_dir, "received"), name, received)


def _concat(arrays: list[array[int]], type_: pa.DataType) -> pa.Array:
    """Zero-copy view of ``array.array`` columns as one Arrow array."""
    chunks = [pa.Array.from_buffers(type_, len(a), [None, pa.py_buffer(a)]) for a in arrays if a]
    return pa.concat_arrays(chunks) if chunks else pa.array([], type_)


def _write(directory: Path, name: str, table: pa.Table) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    tmp = directory / f".{name}.parquet.tmp"
    pq.write_table(table, tmp, compression="zstd")
    tmp.rename(directory / f"{name}.parquet")


def write_status(run_dir: Path, status: NodeStatus) -> None:
    directory = run_dir / "nodes"
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{node_file(status.point, status.role, status.node, status.part)}.json"
    path.write_text(json.dumps(asdict(status), indent=1))


def read_statuses(run_dir: Path) -> list[NodeStatus]:
    directory = run_dir / "nodes"
    if not directory.is_dir():
        return []
    return [NodeStatus(**json.loads(p.read_text())) for p in sorted(directory.glob("*.json"))]
