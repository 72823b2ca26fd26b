"""The columns of ``analysis/summary.csv``, declared once.

Every latency percentile is named by its scope:

* ``<metric>_window_p95_ms`` — the headline (SPEC §3): the largest p95 over the sliding
  windows of the measurement period, the worst stretch a user would have seen;
* ``<metric>_run_<q>_ms`` — over the whole measurement period (after the warm-up), from the
  point's merged histogram: p50, p95, p99, p99.9 and max.

``<metric>`` is ``processing_latency`` (intended send time → receipt), ``send_latency``
(the send call, start → confirmation) or ``send_delay`` (open loop only: how late a send
started against its schedule). Summaries written before the scope was in the name are read
through :func:`upgrade`.

A row crosses module boundaries as a :class:`SummaryRow`: the analysis job makes them, the
terminal table, the report, the comparison and the overview read them (from the job, or
from the file through :func:`read_summary_csv`).
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

#: The latency metrics, as the raw records and the window series name them.
METRICS = ("processing_latency", "send_latency", "send_delay")
#: Whole-run percentiles, in order.
RUN_QUANTILES = ("p50", "p95", "p99", "p999", "max")
#: Shown names of percentiles.
QUANTILE_TITLES = {"p50": "p50", "p95": "p95", "p99": "p99", "p999": "p99.9", "max": "max"}


def window_column(metric: str, quantile: str = "p95") -> str:
    """The headline column: the worst window's ``quantile`` of ``metric``."""
    return f"{metric}_window_{quantile}_ms"


def run_column(metric: str, quantile: str) -> str:
    """A whole-run percentile column of ``metric``."""
    return f"{metric}_run_{quantile}_ms"


def latency_columns() -> list[str]:
    """Every latency column: per metric, the headline, then the whole-run percentiles."""
    return [
        column
        for metric in METRICS
        for column in (
            window_column(metric),
            *(run_column(metric, q) for q in RUN_QUANTILES),
        )
    ]


SUMMARY_COLUMNS = [
    "broker",
    "point",
    "label",
    # Repeated points (scenario ``repeat``): which run of which point this is.
    "repeat",
    "base_point",
    "threads",
    "sender_nodes",
    "receiver_nodes",
    "message_size",
    "sent",
    "received",
    "send_msgs_per_s",
    "receive_msgs_per_s",
    "lost",
    "not_drained",
    "duplicated",
    "redelivered",
    "unconfirmed_received",
    "delivery",
    "errors",
    "negative_latencies",
    "clipped_latencies",
    "receivers_kept_up",
    "measured_seconds",
    # Send delay (the last metric) is empty in closed loop.
    *latency_columns(),
    "cost_per_million_usd",
    "clock_offset_max_ms",
    "clock_source",
    # Declared faults (empty without): see analysis.faults. The errors, duplicates and
    # redeliveries within the faults' windows; ``duplicated`` and ``redelivered`` above are
    # the point's totals.
    "faults",
    "send_gap_s",
    "receive_gap_s",
    "fault_errors",
    "fault_duplicated",
    "fault_redelivered",
    "unavailable",
    # Probes of a capacity search (empty for a sweep): see analysis.capacity.
    "target_msgs_per_s",
    "slo_holds",
    "slo_reason",
]

#: Earlier names of columns, as summaries written before the scopes were named hold them.
LEGACY = {
    **{f"{m}_p95_ms": window_column(m) for m in METRICS},
    **{f"{m}_{q}_ms": run_column(m, q) for m in METRICS for q in ("p50", "p99", "p999", "max")},
}

V = TypeVar("V")


def upgrade(row: Mapping[str, V]) -> dict[str, V]:
    """A summary row with today's column names (a row of today's summaries is unchanged)."""
    if any(column in row for column in (window_column(m) for m in METRICS)):
        return dict(row)
    return {LEGACY.get(key, key): value for key, value in row.items()}


def number(value: object) -> float | None:
    """A summary cell (or any loosely typed figure) as a number: None when empty, not a
    number, or NaN."""
    if value in (None, ""):
        return None
    try:
        result = float(str(value))
    except (TypeError, ValueError):
        return None
    return None if math.isnan(result) else result


_KNOWN = frozenset(SUMMARY_COLUMNS)


class SummaryRow(Mapping[str, Any]):
    """One sweep point's row of ``summary.csv``: every column of :data:`SUMMARY_COLUMNS` and
    no other, each as the analysis computed it or as read back from the file (text). A
    column without a figure holds None or "" (a summary written before the column existed:
    None). Read by column (``row[c]``, ``row.get(c)``) or typed (:meth:`figure`,
    :attr:`point`)."""

    __slots__ = ("_cells",)

    def __init__(self, cells: Mapping[str, Any]) -> None:
        unknown = set(cells) - _KNOWN
        if unknown:
            raise ValueError(f"not a column of summary.csv: {', '.join(sorted(unknown))}")
        self._cells: dict[str, Any] = {c: cells.get(c) for c in SUMMARY_COLUMNS}

    def __getitem__(self, column: str) -> Any:
        return self._cells[column]

    def __iter__(self) -> Iterator[str]:
        return iter(self._cells)

    def __len__(self) -> int:
        return len(self._cells)

    def __repr__(self) -> str:
        filled = {k: v for k, v in self._cells.items() if v not in (None, "")}
        return f"SummaryRow({filled!r})"

    def figure(self, column: str) -> float | None:
        """The column as a number (None: no figure)."""
        return number(self._cells[column])

    @property
    def point(self) -> int:
        """The sweep point's index in the run."""
        return int(self._cells["point"])


def read_summary_csv(path: Path) -> list[SummaryRow]:
    """The rows of a ``summary.csv``, with today's column names."""
    with path.open(newline="") as f:
        return [SummaryRow(upgrade(row)) for row in csv.DictReader(f)]
