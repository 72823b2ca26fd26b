"""A node part's records written as the raw tables (:mod:`workload.model.results` holds
their schemas and readers): one Parquet file per table, each whole or not at all — a chunk
flushed while the part runs, or the part's final file."""

from __future__ import annotations

from array import array
from collections.abc import Iterable
from pathlib import Path

import numpy as np
import pyarrow as pa

from workload.engine.recording import Records, WorkerRecorder
from workload.model.errors import RecordsNotWritten
from workload.model.layout import LAYOUT
from workload.model.results import (
    RECEIVED_SCHEMA,
    SECONDS_SCHEMA,
    SENT_RANGES_SCHEMA,
    write_table_file,
)


def write_node(
    run_dir: Path,
    run_id: str,
    point: int,
    role: str,
    node: int,
    recorders: Iterable[Records | WorkerRecorder],
    part: int = 0,
    cut: int | None = None,
) -> None:
    """Write what one node part's workers recorded (taken out of their recorders,
    :meth:`WorkerRecorder.take`, or read in place from the recorders) as one
    Parquet file per table (atomically renamed): its final files, or with ``cut`` a chunk
    holding its records before that wall-clock second not written before. The per-second
    table is written first: a chunk whose delivery table is there is whole.

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
        for (lo, hi), second in zip(rec.sent_ranges, rec.range_seconds, strict=True):
            for key, value in zip(
                SENT_RANGES_SCHEMA.names,
                (run_id, point, node, rec.worker, lo, hi, second),
                strict=True,
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
                "late": _late(recorders, n),
                "size": _concat([r.rx_size for r in recorders], pa.int32()),
            },
            schema=RECEIVED_SCHEMA,
        )
    failed: list[RecordsNotWritten] = []
    for table, data in tables.items():  # each table on its own: keep whatever can be kept
        try:
            path = LAYOUT.raw_file(table, point, role, node, part, cut)
            write_table_file(run_dir / path, data)
        except RecordsNotWritten as exc:
            failed.append(exc)
    if failed:
        raise failed[0]


def _concat(arrays: list[array[int]], type_: pa.DataType) -> pa.Array:
    """Zero-copy view of ``array.array`` columns as one Arrow array."""
    chunks = [pa.Array.from_buffers(type_, len(a), [None, pa.py_buffer(a)]) for a in arrays if a]
    return pa.concat_arrays(chunks) if chunks else pa.array([], type_)


def _late(recorders: list[Records | WorkerRecorder], n: int) -> pa.Array:
    """The ``late`` column: True at the rows the recorders marked late, in their order."""
    mask = np.zeros(n, dtype=bool)
    first = 0
    for r in recorders:
        if r.rx_late:
            mask[first + np.frombuffer(r.rx_late, dtype=np.int64)] = True
        first += len(r.rx_seq)
    return pa.array(mask, type=pa.bool_())
