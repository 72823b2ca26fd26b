"""A node part's recorders written as the raw tables (:mod:`workload.model.results` holds
their schemas and readers): one Parquet file per table, each whole or not at all."""

from __future__ import annotations

from array import array
from collections.abc import Iterable
from pathlib import Path

import pyarrow as pa

from workload.model.errors import RecordsNotWritten
from workload.model.layout import LAYOUT
from workload.model.results import (
    RECEIVED_SCHEMA,
    SECONDS_SCHEMA,
    SENT_RANGES_SCHEMA,
    write_table_file,
)
from workload.recording import WorkerRecorder


def write_node(
    run_dir: Path,
    run_id: str,
    point: int,
    role: str,
    node: int,
    recorders: Iterable[WorkerRecorder],
    part: int = 0,
) -> None:
    """Write one node part's recorders as one Parquet file per table (atomically renamed).

    Every table is attempted; the first that could not be written is then raised
    (:class:`RecordsNotWritten`).
    """
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
                "sent_bytes": s.sent_bytes,
                "received_bytes": s.received_bytes,
                "acked_bytes": s.acked_bytes,
                "active_tenths": s.active,
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
    tables = {"seconds": pa.table(seconds, schema=SECONDS_SCHEMA)}
    if role == "sender":
        tables["sent_ranges"] = pa.table(ranges, schema=SENT_RANGES_SCHEMA)
    else:
        n = sum(len(r.rx_seq) for r in recorders)
        tables["received"] = pa.table(
            {
                "run_id": pa.repeat(pa.scalar(run_id, pa.string()), n),
                "point": pa.repeat(pa.scalar(point, pa.int32()), n),
                "sender_node": _concat([r.rx_node for r in recorders], pa.int32()),
                "sender_worker": _concat([r.rx_worker for r in recorders], pa.int32()),
                "seq": _concat([r.rx_seq for r in recorders], pa.int64()),
                "receiver_node": pa.repeat(pa.scalar(node, pa.int32()), n),
                "second": _concat([r.rx_second for r in recorders], pa.int64()),
                "size": _concat([r.rx_size for r in recorders], pa.int32()),
            },
            schema=RECEIVED_SCHEMA,
        )
    failed: list[RecordsNotWritten] = []
    for table, data in tables.items():  # each table on its own: keep whatever can be kept
        try:
            write_table_file(run_dir / LAYOUT.raw_file(table, point, role, node, part), data)
        except RecordsNotWritten as exc:
            failed.append(exc)
    if failed:
        raise failed[0]


def _concat(arrays: list[array[int]], type_: pa.DataType) -> pa.Array:
    """Zero-copy view of ``array.array`` columns as one Arrow array."""
    chunks = [pa.Array.from_buffers(type_, len(a), [None, pa.py_buffer(a)]) for a in arrays if a]
    return pa.concat_arrays(chunks) if chunks else pa.array([], type_)
