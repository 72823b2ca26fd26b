"""The charts of one sweep point over time, as plotly figures built from plain inputs:
:func:`throughput_over_time` and :func:`latency_over_time` from its latency windows
(:class:`Window`: rates, and p50/p95/p99/p99.9/max of a latency metric, per window),
:func:`resources_over_time` from its nodes' telemetry (:class:`ResourceSeries`); the
point's declared faults (:class:`FaultMark`) on each, as shaded bands from the action to
the node's return with a labelled line at the action (:func:`mark_faults`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from analysis.charts import COLORS, axis_type, decade_ticks, figure, graph_objects
from analysis.column_model import QUANTILE_TITLES

if TYPE_CHECKING:
    import plotly.graph_objects as go


@dataclass(frozen=True)
class Window:
    """One latency window of a sweep point: when it ends (seconds since the start of the
    measurement, the end of the warm-up), its length, rates and latency percentiles."""

    end_s: float
    seconds: float
    send_msgs_per_s: float | None
    receive_msgs_per_s: float | None
    #: metric → quantile (:data:`RUN_QUANTILES` names) → ms; None where the window had none.
    latency_ms: Mapping[str, Mapping[str, float | None]] = field(default_factory=dict)


@dataclass(frozen=True)
class FaultMark:
    """One declared fault on a point's time-series charts, on their time axis (seconds
    since the start of the measurement): its action, e.g. ``kill n2 (leader)``, when it was
    issued, and when its node came back (None: it did not, before the point ended)."""

    label: str
    start_s: float
    end_s: float | None


#: The colour of fault markers: a band and a line at the action.
FAULT_COLOR = "#b00"


def throughput_over_time(
    windows: Sequence[Window], title: str = "Throughput", faults: Sequence[FaultMark] = ()
) -> go.Figure:
    """Send and receive msgs/s per latency window, over the measurement; ``faults`` marked
    (:func:`mark_faults`)."""
    rates = [w.send_msgs_per_s for w in windows] + [w.receive_msgs_per_s for w in windows]
    fig = figure(
        title,
        "time since the start of the measurement (s, end of each window)",
        "msgs/s",
        x_type="linear",
        y_type=axis_type(rates),
    )
    for i, (name, values) in enumerate(
        (
            ("send", [w.send_msgs_per_s for w in windows]),
            ("receive", [w.receive_msgs_per_s for w in windows]),
        )
    ):
        fig.add_trace(
            graph_objects().Scatter(
                x=[w.end_s for w in windows],
                y=values,
                name=f"{name} msgs/s",
                mode="lines+markers",
                marker={"size": 4},
                line={"color": COLORS[i], "dash": "dash" if name == "receive" else "solid"},
                customdata=[_window_text(w) for w in windows],
                hovertemplate=f"{name} %{{y:,.0f}} msgs/s<br>%{{customdata}}<extra></extra>",
            )
        )
    return mark_faults(decade_ticks(fig), faults, windows)


def latency_over_time(
    windows: Sequence[Window], metric: str, title: str, faults: Sequence[FaultMark] = ()
) -> go.Figure | None:
    """p50, p95, p99, p99.9 and max of ``metric`` per latency window (log y), ``faults``
    marked (:func:`mark_faults`); None when no window has a value (send delay in closed
    loop)."""
    values = {
        q: [w.latency_ms.get(metric, {}).get(q) for w in windows]
        for q in ("p50", "p95", "p99", "p999", "max")
    }
    if all(v is None for series in values.values() for v in series):
        return None
    fig = figure(
        title,
        "time since the start of the measurement (s, end of each window)",
        "latency (ms)",
        x_type="linear",
        y_type="log",
    )
    for i, (q, ys) in enumerate(values.items()):
        fig.add_trace(
            graph_objects().Scatter(
                x=[w.end_s for w in windows],
                y=ys,
                name=QUANTILE_TITLES[q],
                mode="lines+markers",
                marker={"size": 4},
                line={"color": COLORS[i % len(COLORS)]},
                customdata=[_window_text(w) for w in windows],
                hovertemplate=(
                    f"{QUANTILE_TITLES[q]} %{{y:,.3~r}} ms<br>%{{customdata}}<extra></extra>"
                ),
            )
        )
    return mark_faults(decade_ticks(fig), faults, windows)


@dataclass(frozen=True)
class ResourceSeries:
    """One node's telemetry over a point, for :func:`resources_over_time`: seconds since
    the chart's origin and the figure per second."""

    name: str
    seconds: Sequence[float]
    values: Sequence[float | None]


def resources_over_time(
    series: Sequence[ResourceSeries],
    title: str,
    unit: str,
    faults: Sequence[FaultMark] = (),
    windows: Sequence[Window] = (),
) -> go.Figure | None:
    """Per node, one resource second by second (CPU %, disk operations/s, …) on the time
    axis of the point's throughput and latency charts, with its faults marked."""
    drawn = [s for s in series if any(v is not None for v in s.values)]
    if not drawn:
        return None
    fig = figure(
        title, "time since the start of the measurement (s)", unit, x_type="linear", y_type="linear"
    )
    for i, s in enumerate(drawn):
        fig.add_trace(
            graph_objects().Scatter(
                x=list(s.seconds),
                y=list(s.values),
                name=s.name,
                mode="lines",
                line={"color": COLORS[i % len(COLORS)], "width": 1.5},
                hovertemplate=f"{s.name}: %{{y:,.1f}} {unit}<br>%{{x:,.0f}} s<extra></extra>",
            )
        )
    return mark_faults(fig, faults, windows)


@dataclass(frozen=True)
class BacklogSeries:
    """A point's backlog second by second (``analysis/backlog``), on the time axis of its
    other charts: the end of each second since the chart's origin, the messages queued
    then; and the drain from its start to the catch-up (None: it did not catch up), if it
    began."""

    seconds: Sequence[float]
    queued: Sequence[int]
    drain_start_s: float | None = None
    caught_up_s: float | None = None


#: The colour of the drain's band on the backlog chart.
DRAIN_COLOR = "#2a7"


def backlog_over_time(series: BacklogSeries, title: str = "Backlog over time") -> go.Figure:
    """Messages queued (confirmed − received) at the end of each second, the drain shaded
    from its start to the catch-up (to the end of the chart when it did not catch up)."""
    fig = figure(
        title,
        "time since the start of the measurement (s)",
        "messages queued",
        x_type="linear",
        y_type="linear",
    )
    fig.add_trace(
        graph_objects().Scatter(
            x=list(series.seconds),
            y=list(series.queued),
            name="queued",
            mode="lines+markers",
            marker={"size": 4},
            line={"color": COLORS[0]},
            hovertemplate="%{y:,} queued<br>%{x:,.0f} s<extra></extra>",
        )
    )
    start = series.drain_start_s
    if start is not None:
        end = series.caught_up_s
        label = "drain" if end is not None else "drain (not caught up)"
        fig.add_shape(
            type="rect",
            xref="x",
            yref="paper",
            y0=0,
            y1=1,
            layer="below",
            x0=start,
            x1=end if end is not None else max(series.seconds, default=start),
            fillcolor=DRAIN_COLOR,
            opacity=0.12,
            line={"width": 0},
            name="drain",
        )
        fig.add_annotation(
            x=start,
            xref="x",
            y=1,
            yref="paper",
            xanchor="left",
            text=label,
            showarrow=False,
            font={"color": DRAIN_COLOR, "size": 11},
        )
    return fig


def _window_text(w: Window) -> str:
    return f"window {w.end_s - w.seconds:,.0f}–{w.end_s:,.0f} s"


def mark_faults(
    fig: go.Figure, faults: Sequence[FaultMark], windows: Sequence[Window]
) -> go.Figure:
    """Each fault on a time-series chart: a shaded band from its action to its node's
    return (to the end of the chart, the last window's end, when the node did not come
    back) and a dashed vertical line at the action, labelled at the top. Shapes span the
    plot's height (paper coordinates), so they sit right on a log y axis too."""
    chart_end = max((w.end_s for w in windows), default=0.0)
    for i, fault in enumerate(faults):
        end = fault.end_s if fault.end_s is not None else max(chart_end, fault.start_s)
        common = {"xref": "x", "yref": "paper", "y0": 0, "y1": 1, "layer": "below"}
        fig.add_shape(
            type="rect",
            x0=fault.start_s,
            x1=end,
            fillcolor=FAULT_COLOR,
            opacity=0.08,
            line={"width": 0},
            name=f"fault {i} band",
            **common,
        )
        fig.add_shape(
            type="line",
            x0=fault.start_s,
            x1=fault.start_s,
            line={"color": FAULT_COLOR, "width": 1.5, "dash": "dash"},
            name=f"fault {i} action",
            **common,
        )
        back = "not back" if fault.end_s is None else f"back at {fault.end_s:,.1f} s"
        fig.add_annotation(
            x=fault.start_s,
            xref="x",
            y=1,
            yref="paper",
            yanchor="bottom" if i % 2 == 0 else "top",
            xanchor="left",
            text=fault.label,
            hovertext=f"{fault.label} at {fault.start_s:,.1f} s, {back}",
            showarrow=False,
            font={"color": FAULT_COLOR, "size": 11},
            bgcolor="rgba(255,255,255,0.7)",
        )
    return fig
