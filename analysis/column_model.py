"""What a column of ``analysis/summary.csv`` is, and how latency columns are named: the
latency metrics and their percentiles, a :class:`Column` declaration with its
:class:`Scope` and the direction that is :class:`Better`, and :func:`latency_column`, which
declares one latency column from its metric, scope and percentile. The columns themselves
are declared in :mod:`analysis.columns`.

Every latency percentile is named by its scope:

* ``<metric>_window_p95_ms`` — the headline (docs/measurement.md §3): the largest p95 over the sliding
  windows of the measurement period, the worst stretch a user would have seen;
* ``<metric>_run_<q>_ms`` — over the whole measurement period (after the warm-up), from the
  point's merged histogram: p50, p95, p99, p99.9 and max.

``<metric>`` is ``processing_latency`` (intended send time → receipt), ``send_latency``
(the send call, start → confirmation) or ``send_delay`` (open loop only: how late a send
started against its schedule).
"""

from __future__ import annotations

from dataclasses import KW_ONLY, dataclass
from enum import Enum

#: The latency metrics, as the raw records and the window series name them.
METRICS = ("processing_latency", "send_latency", "send_delay")
#: Whole-run percentiles, in order.
RUN_QUANTILES = ("p50", "p95", "p99", "p999", "max")
#: Shown names of percentiles.
QUANTILE_TITLES = {"p50": "p50", "p95": "p95", "p99": "p99", "p999": "p99.9", "max": "max"}
#: The latency metrics as the report's charts and pages name them.
METRIC_TITLES = {
    "processing_latency": "Processing latency",
    "send_latency": "Send call latency",
    "send_delay": "Send delay",
}


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


class Better(Enum):
    """Which way a metric improves."""

    HIGHER = "higher"
    LOWER = "lower"


class Scope(Enum):
    """What a column summarises; the latency tables mark [window] and [run]."""

    POINT = "point"
    TOTAL = "total"
    RUN = "run"
    WINDOW = "window"
    FAULT = "fault"
    BACKLOG = "backlog"
    SEARCH = "search"

    @property
    def meaning(self) -> str:
        return _SCOPE_MEANINGS[self]


_SCOPE_MEANINGS = {
    Scope.POINT: "what ran: the sweep point, its load, and its nodes' clocks",
    Scope.TOTAL: "counted over the whole point, warm-up and drain included",
    Scope.RUN: (
        "the measurement period: rates over its whole seconds after the warm-up, latencies "
        "(and their counts) over every second from the warm-up's end to the last one received"
    ),
    Scope.WINDOW: "the worst latency window of the measurement period",
    Scope.FAULT: "what the point's declared faults did (empty without faults)",
    Scope.BACKLOG: (
        "the backlog the point built and drained (empty without [backlog]; docs/measurement.md §4)"
    ),
    Scope.SEARCH: "a capacity search's probe (empty for a sweep)",
}


@dataclass(frozen=True)
class Column:
    """One column of ``summary.csv`` and how every view shows it."""

    name: str
    #: What the column holds (docs/columns.md).
    doc: str
    scope: Scope
    _: KW_ONLY
    #: Unit of its figures ("" for text, flags and counts of calls or latencies).
    unit: str = ""
    #: The short title of the terminal and HTML tables ("" where no table shows it).
    title: str = ""
    #: What compare calls it ("send throughput").
    long: str = ""
    #: A chart's title for it; "" for :attr:`long`, capitalised.
    chart: str = ""
    #: Display format of a figure (``str.format``).
    fmt: str = "{}"
    #: Which direction is better; None for what is not a measure of the broker (the load,
    #: a label, the clocks).
    better: Better | None = None

    @property
    def faults_only(self) -> bool:
        """Whether the column has a figure only where the point declared faults."""
        return self.scope is Scope.FAULT

    @property
    def chart_title(self) -> str:
        """The column as a chart's title."""
        return self.chart or self.long[:1].upper() + self.long[1:]

    @property
    def shown(self) -> tuple[str, str, str]:
        """How a table shows it: (column, title, format)."""
        return (self.name, self.title, self.fmt)


@dataclass(frozen=True)
class _LatencyNames:
    """How one latency metric is named, from which its columns' titles are made."""

    short: str
    long: str
    doc: str
    fmt: str


_LATENCY = {
    "processing_latency": _LatencyNames(
        "proc", "processing", "processing latency (intended send time → receipt)", "{:,.1f}"
    ),
    "send_latency": _LatencyNames(
        "send call", "send call", "send call latency (start of the call → confirmation)", "{:,.2f}"
    ),
    "send_delay": _LatencyNames(
        "send delay",
        "send delay",
        "send delay (open loop only: how late a batch started against its schedule)",
        "{:,.2f}",
    ),
}


def latency_column(metric: str, scope: Scope, quantile: str) -> Column:
    """A latency column: the worst window's p95 (whose doc says what ``metric`` measures) or
    a whole-run percentile of ``metric`` (medians shown to two decimals)."""
    names, q = _LATENCY[metric], QUANTILE_TITLES[quantile]
    window = scope is Scope.WINDOW
    where = "worst window" if window else "whole run"
    return Column(
        window_column(metric, quantile) if window else run_column(metric, quantile),
        f"{names.doc}: the largest {q} of the sliding windows"
        if window
        else f"{METRIC_TITLES[metric].lower()}: the whole run's {q}",
        scope,
        unit="ms",
        title=f"{names.short} {q} ms [{scope.value}]",
        long=f"{names.long} {q}, {where}",
        chart=f"{METRIC_TITLES[metric]} {q} ({where})",
        fmt="{:,.2f}" if quantile == "p50" else names.fmt,
        better=Better.LOWER,
    )


class Columns(dict[str, Column]):
    """Columns by name, in order: ``COLUMNS["lost"]`` — a name that is no column raises
    KeyError naming it, so a misspelt column fails where it is named."""

    def __init__(self, *columns: Column) -> None:
        super().__init__((c.name, c) for c in columns)
        if len(self) < len(columns):
            raise ValueError("a column is declared twice")

    def __missing__(self, name: str) -> Column:
        raise KeyError(f"not a column of summary.csv: {name}")
