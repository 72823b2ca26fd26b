"""A node part's records written as the raw tables (:mod:`workload.model.results` holds
their schemas and readers): one Parquet file per table, each whole or not at all — a chunk
flushed while the part runs, or the part's final file."""

from __future__ import annotations

from array import array
from collections.abc import Iterable
from operator import attrgetter
from pathlib import Path
from typing import Any

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
    tables = {"seconds": _seconds(run_id, point, role, node, recorders)}
    if role == "sender":
        ranges = [
            {"run_id": run_id, "point": point, "node": node, "worker": r.worker}
            | {"seq_lo": lo, "seq_hi": hi, "second": second}
            for r in recorders
            for (lo, hi), second in zip(r.sent_ranges, r.range_seconds, strict=True)
        ]
        tables["sent_ranges"] = pa.Table.from_pylist(ranges, schema=SENT_RANGES_SCHEMA)
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


#: The per-second table's counters and histograms: each the :class:`SecondStats` field of
#: its name.
COUNTERS: tuple[str, ...] = ("sent", "received", "acked", "errors", "redelivered", "foreign")
COUNTERS += ("sent_bytes", "received_bytes", "acked_bytes")
HISTOGRAMS = ("send_latency", "processing_latency", "send_delay")


def _seconds(
    run_id: str, point: int, role: str, node: int, recorders: list[Records | WorkerRecorder]
) -> pa.Table:
    """The per-second table: a row per worker and second, by worker and second."""
    rows = [(r.worker, second, s) for r in recorders for second, s in sorted(r.seconds.items())]
    stats = [s for *_, s in rows]
    n = len(rows)
    columns: dict[str, list[Any]] = {"run_id": [run_id] * n, "point": [point] * n}
    columns |= {"role": [role] * n, "node": [node] * n, "worker": [w for w, _, _ in rows]}
    columns |= {"second": [t for _, t, _ in rows], "active_tenths": [s.active for s in stats]}
    for name in COUNTERS:
        columns[name] = list(map(attrgetter(name), stats))
    for name in HISTOGRAMS:
        columns[name] = [list(h.counts.items()) for h in map(attrgetter(name), stats)]
    return pa.table(columns, schema=SECONDS_SCHEMA)


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
