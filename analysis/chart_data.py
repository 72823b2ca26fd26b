"""What a run's report draws, read back from what the analysis job wrote under
``analysis/`` (no Spark): each point's latency windows and its charts' time 0
(:func:`read_windows`), its merged whole-run histograms (:func:`read_histograms`) and its
nodes' telemetry as the series of its resource charts (:func:`read_resources`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from analysis.column_model import METRIC_TITLES, RUN_QUANTILES
from analysis.hdr import Bucket
from analysis.point_charts import BacklogSeries, ResourceSeries, Window
from workload.model.backlog import read_phases
from workload.model.layout import LAYOUT
from workload.model.telemetry import HOST

#: The resource charts of a point: (title, unit, telemetry column, roles drawn).
RESOURCE_CHARTS = (
    ("CPU per node (% of one core)", "%", "cpu_pct", ("broker", "sender", "receiver", HOST)),
    ("Disk write operations of the data device", "ops/s", "device_write_ops_s", ("broker", HOST)),
    ("Broker GC pause time", "ms/s", "gc_pause_ms_s", ("broker",)),
    ("Broker data on disk (its data directory)", "MB", "data_bytes", ("broker",)),
)
#: Columns read only every few seconds (null between): drawn through their readings.
_SPARSE = {"data_bytes": 1e-6}


def read_resources(
    run_dir: Path, point: int, origin_s: int
) -> list[tuple[str, str, list[ResourceSeries]]]:
    """A point's telemetry as the series of :data:`RESOURCE_CHARTS`, time counted from
    ``origin_s`` (its charts' origin); empty where it has none or it cannot be read. The
    data device is drawn once (the machine's row, else the first broker node's)."""
    folder = run_dir / LAYOUT.raw_table(LAYOUT.telemetry)
    try:
        files = sorted(folder.glob(f"p{point}-*.parquet"))
        rows = [r for f in files for r in pq.read_table(f).to_pylist()]
    except (OSError, ValueError):
        return []
    by_node: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in sorted(rows, key=lambda r: r["second"]):
        by_node.setdefault((r["role"], r["node"]), []).append(r)
    out = []
    for title, unit, column, roles in RESOURCE_CHARTS:
        scale = _SPARSE.get(column)
        series = [
            ResourceSeries(
                f"{node} ({role})" if role != HOST else "machine",
                [r["second"] - origin_s for r in kept],
                [r.get(column) if scale is None else r[column] * scale for r in kept],
            )
            for (role, node), found in by_node.items()
            if role in roles
            for kept in [
                found if scale is None else [r for r in found if r.get(column) is not None]
            ]
        ]
        if column == "device_write_ops_s":
            series = series[-1:] if any(s.name == "machine" for s in series) else series[:1]
        out.append((title, unit, series))
    return out


@dataclass(frozen=True)
class WindowSeries:
    """A point's latency windows, in order; its charts count time from ``origin_s``, the
    wall-clock second its first window starts (the end of its warm-up)."""

    origin_s: int
    windows: list[Window]


def read_windows(run_dir: Path) -> dict[int, WindowSeries]:
    """Each point's latency windows (``analysis/windows``) and its charts' time 0."""
    directory = run_dir / LAYOUT.windows
    if not directory.is_dir():
        return {}
    rows: dict[int, list[dict[str, Any]]] = {}
    for row in pq.read_table(directory).to_pylist():
        rows.setdefault(int(row["point"]), []).append(row)
    out = {}
    for point, found in rows.items():
        found.sort(key=lambda r: r["window_start"])
        start = found[0]["window_start"]
        windows = [
            Window(
                end_s=float(r["window_start"] - start + (r.get("window_seconds") or 1)),
                seconds=float(r.get("window_seconds") or 1),
                send_msgs_per_s=r.get("send_msgs_per_s"),
                receive_msgs_per_s=r.get("receive_msgs_per_s"),
                latency_ms={
                    m: {q: r.get(f"{m}_{q}") for q in RUN_QUANTILES} for m in METRIC_TITLES
                },
            )
            for r in found
        ]
        out[point] = WindowSeries(int(start), windows)
    return out


def read_histograms(run_dir: Path) -> dict[int, dict[str, list[Bucket]]]:
    """Each point's merged whole-run histograms (``analysis/histograms``), by metric."""
    directory = run_dir / LAYOUT.histograms
    if not directory.is_dir():
        return {}
    out: dict[int, dict[str, list[Bucket]]] = {}
    for row in pq.read_table(directory).to_pylist():
        out.setdefault(int(row["point"]), {}).setdefault(row["metric"], []).append(
            Bucket(int(row["bucket"]), int(row["count"]), float(row["value_ms"]))
        )
    return out


def read_backlog(run_dir: Path, origin: dict[int, int]) -> dict[int, BacklogSeries]:
    """Each point's backlog series (``analysis/backlog``) and its drain, time counted from
    the point's chart origin (``origin``, else its first second); none where the run had
    no ``[backlog]`` or it cannot be read."""
    directory = run_dir / LAYOUT.backlog_series
    if not directory.is_dir():
        return {}
    try:
        rows = pq.read_table(directory).to_pylist()
        phases = read_phases(run_dir)
    except (OSError, ValueError):
        return {}
    by_point: dict[int, list[dict[str, Any]]] = {}
    for row in sorted(rows, key=lambda r: r["second"]):
        by_point.setdefault(int(row["point"]), []).append(row)
    out = {}
    for point, found in by_point.items():
        zero = origin.get(point, found[0]["second"])
        drain = phases.get(point)
        start = (
            drain.drain_ns / 1e9 - zero
            if drain is not None and drain.drain_ns is not None
            else None
        )
        caught = [
            r["second"] + 1 - zero
            for r in found
            if start is not None
            and r["second"] + 1 - zero > start
            and r["received_total"] >= r["confirmed_total"] - r["confirmed"]
        ]
        out[point] = BacklogSeries(
            [r["second"] + 1 - zero for r in found],
            [int(r["queued"]) for r in found],
            start,
            caught[0] if caught else None,
        )
    return out
