"""The charts of the HTML reports, as plotly figures built from plain inputs (no file I/O).

A page embeds plotly.js once (:func:`plotly_script`) and each figure as a ``<div>`` with the
script that draws it (:func:`embed`), so that it stays one self-contained file that opens
offline. Every chart has titled axes with units, ticks and hover tooltips; latency axes are
logarithmic (a p50 under a millisecond and a max of seconds share one chart), and so is any
other axis whose values span more than :data:`LOG_SPAN` to one.

* :func:`latency_throughput` — the latency–throughput curve of a sweep (x: receive msgs/s,
  y: whole-run processing latency), its points in order of the load the sweep offered, with
  the saturation knee (:func:`analysis.curve.knee`) marked;
* :func:`spectrum_chart` — percentile spectra as HdrHistogram plots them (x: the percentile
  on a log scale of 1/(1−p), y: latency), from merged histograms (:func:`spectrum`);
* :func:`bar_chart` and :func:`by_load` — the cross-system overview's bars and lines.

The charts of one sweep point over time are :mod:`analysis.point_charts`; they share this
module's frame (:func:`figure`, :func:`decade_ticks`).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from analysis.column_model import QUANTILE_TITLES
from analysis.curve import CurvePoint, Level, knee, levels
from analysis.hdr import Bucket
from workload.model.errors import UserError

if TYPE_CHECKING:
    import plotly.graph_objects as go

COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")
#: An axis whose positive values span more than this (max / min) is drawn logarithmic.
LOG_SPAN = 20.0
#: How tall a chart is, in pixels (its width follows the page).
HEIGHT = 400

#: The spectrum's right end: 99.999 %, i.e. 1/(1−p) = 10⁵.
SPECTRUM_CAP = 1e5
#: The spectrum's x ticks: 1/(1−p) and the percentile they stand for.
SPECTRUM_TICKS = (
    (1.0, "0%"),
    (10.0, "90%"),
    (100.0, "99%"),
    (1e3, "99.9%"),
    (1e4, "99.99%"),
    (1e5, "99.999%"),
)


@dataclass(frozen=True)
class Spectrum:
    """A histogram's percentile spectrum: per non-empty bucket, the fraction of samples up
    to and including it (``percent``), its place on the x axis (1/(1−p), at most
    :data:`SPECTRUM_CAP`) and its value; the first point is the minimum at 0 %."""

    x: list[float]
    percent: list[float]
    value_ms: list[float]
    count: int


def spectrum(buckets: Iterable[Bucket]) -> Spectrum:
    """The percentile spectrum of one merged histogram (empty for an empty one).

    The bucket where the cumulative count reaches ``seen`` of ``total`` samples is drawn at
    x = 1/(1 − seen/total) = total/(total − seen); the last bucket (100 %) and any bucket
    beyond 99.999 % are drawn at the cap, so the line ends there at the maximum.
    """
    ordered = sorted((b for b in buckets if b.count > 0), key=lambda b: b.bucket)
    total = sum(b.count for b in ordered)
    if not total:
        return Spectrum([], [], [], 0)
    x, percent, value = [1.0], [0.0], [ordered[0].value_ms]
    seen = 0
    for b in ordered:
        seen += b.count
        x.append(SPECTRUM_CAP if seen == total else min(total / (total - seen), SPECTRUM_CAP))
        percent.append(100.0 * seen / total)
        value.append(b.value_ms)
    return Spectrum(x, percent, value, total)


def graph_objects() -> Any:
    """plotly's graph objects, imported when a chart is made: the table and the notes of
    :mod:`analysis.report` work without plotly (the ``analysis`` extra)."""
    try:
        import plotly.graph_objects
    except ImportError:
        raise UserError(
            "the reports' charts need plotly, which is not installed: "
            "pip install 'brokerbench[analysis]'"
        ) from None
    return plotly.graph_objects


def plotly_script() -> str:
    """plotly.js, inline: once per page, before the first figure."""
    graph_objects()
    from plotly.offline import get_plotlyjs

    return f'<script type="text/javascript">{get_plotlyjs()}</script>'


#: Records a chart that fails to draw on the page itself (``#chart-errors``), so that a
#: reader sees it rather than an empty space.
ERROR_SCRIPT = """<script>window.addEventListener("error",function(e){var n=document.getElementById("chart-errors");
if(n){n.hidden=false;n.appendChild(document.createElement("li")).textContent="a chart could not be drawn: "+e.message;}});</script>"""


def embed(fig: go.Figure, div_id: str) -> str:
    """One figure as a ``<div>`` and the script that draws it (plotly.js not included)."""
    return str(
        fig.to_html(
            full_html=False,
            include_plotlyjs=False,
            div_id=div_id,
            config={"displaylogo": False, "responsive": True},
        )
    )


def axis_type(values: Iterable[float | None]) -> str:
    """The type of an axis for ``values``: log where they are positive and span more than
    :data:`LOG_SPAN` to one, else linear."""
    present = [v for v in values if v is not None]
    if not present or min(present) <= 0:
        return "linear"
    return "log" if max(present) / min(present) > LOG_SPAN else "linear"


def figure(title: str, x_title: str, y_title: str, *, x_type: str, y_type: str) -> go.Figure:
    """An empty chart in the reports' frame: titled axes of the given types, a grid, the
    legend below, a linear y axis from zero."""
    fig = graph_objects().Figure()
    fig.update_layout(
        title={"text": title, "x": 0.01, "font": {"size": 15}},
        height=HEIGHT,
        margin={"l": 75, "r": 20, "t": 50, "b": 100},
        paper_bgcolor="white",
        plot_bgcolor="white",
        hovermode="closest",
        legend={"orientation": "h", "yanchor": "top", "y": -0.3, "x": 0},
        font={"family": "system-ui, sans-serif", "size": 12},
    )
    grid = {
        "showgrid": True,
        "gridcolor": "#e5e5e5",
        "linecolor": "#999",
        "ticks": "outside",
        "exponentformat": "none",
        "separatethousands": True,
    }
    fig.update_xaxes(title_text=x_title, type=x_type, showline=True, zeroline=False, **grid)
    fig.update_yaxes(title_text=y_title, type=y_type, showline=True, zeroline=False, **grid)
    if y_type == "linear":
        fig.update_yaxes(rangemode="tozero")
    return fig


def decade_ticks(fig: go.Figure) -> go.Figure:
    """Log axes spanning two decades or more get a labelled tick at each power of ten (and
    unlabelled grid lines between), narrower ones at 1, 2 and 5 times a power of ten, each
    labelled with its full value (plotly's own labels on a narrow log axis are bare digits:
    a "5" that means 0.5)."""
    for name, attr in (("xaxis", "x"), ("yaxis", "y")):
        axis = fig.layout[name]
        if axis.type != "log" or axis.tickvals is not None:
            continue
        values = [v for t in fig.data for v in (getattr(t, attr) or ()) if v is not None and v > 0]
        if not values:
            continue
        low, high = min(values), max(values)
        if high / low >= 100:
            axis.dtick = 1
            axis.minor = {"showgrid": True, "gridcolor": "#f2f2f2", "dtick": "D1"}
        else:
            ticks = [
                m * 10.0**k
                for k in range(math.floor(math.log10(low)) - 1, math.ceil(math.log10(high)) + 1)
                for m in (1, 2, 5)
                if low / 2 <= m * 10.0**k <= high * 2
            ]
            axis.tickvals = ticks
            axis.ticktext = [f"{t:,g}" for t in ticks]
    return fig


#: Said in the title of a log axis of the latency–throughput curve: it does not start at 0.
LOG_NOTE = ", log scale: not from 0"


def latency_throughput(
    points: Iterable[CurvePoint],
    title: str = "Processing latency against throughput (whole run)",
    quantiles: Sequence[str] = ("p50", "p99", "p999"),
    slo_ms: float | None = None,
) -> go.Figure:
    """The latency–throughput curve: per series and quantile a line through its load
    levels (x: receive msgs/s from 0, or log where the rates span more than
    :data:`LOG_SPAN` to one; y: processing latency, log — each axis title says which),
    hover naming the sweep points,
    and each series' knee (:func:`~analysis.curve.knee`) as a star on its p99; a capacity search's SLO
    (``slo_ms``) as a dashed line. One series: a colour per
    quantile; several: a colour per series, a dash per quantile."""
    curves = levels(points)
    rates = [level.receive_msgs_per_s for curve in curves.values() for level in curve]
    x_type = axis_type(rates)
    fig = figure(
        title,
        "receive throughput (msgs/s)" + (LOG_NOTE if x_type == "log" else ", from 0"),
        "processing latency (ms)" + LOG_NOTE,
        x_type=x_type,
        y_type="log",
    )
    if x_type == "linear":
        fig.update_xaxes(rangemode="tozero")
    dashes = {"p50": "dot", "p95": "dashdot", "p99": "solid", "p999": "dash", "max": "longdash"}
    knees = 0
    for i, (series, curve) in enumerate(curves.items()):
        for j, q in enumerate(quantiles):
            parts = (series, QUANTILE_TITLES[q] if len(quantiles) > 1 else "")
            name = " · ".join(s for s in parts if s) or QUANTILE_TITLES[q]
            fig.add_trace(
                graph_objects().Scatter(
                    x=[level.receive_msgs_per_s for level in curve],
                    y=[level.latency_ms.get(q) for level in curve],
                    customdata=[", ".join(level.labels) for level in curve],
                    name=name,
                    mode="lines+markers",
                    line=(
                        {"color": COLORS[i % len(COLORS)], "dash": dashes[q]}
                        if len(curves) > 1
                        else {"color": COLORS[j % len(COLORS)]}
                    ),
                    hovertemplate=(
                        f"%{{customdata}}<br>{QUANTILE_TITLES[q]} %{{y:,.3~r}} ms"
                        f"<br>%{{x:,.0f}} msgs/s<extra>{series}</extra>"
                    ),
                )
            )
        at = knee(curve)
        if at is not None:
            fig.add_trace(_knee_marker(curve[at], series, first=knees == 0))
            knees += 1
    known = [r for r in rates if r is not None]
    if slo_ms is not None and known:  # a capacity search's SLO: the p99 a rate must stay under
        fig.add_trace(_slo_line(slo_ms, min(known), max(known)))
    return decade_ticks(fig)


def _knee_marker(level: Level, series: str, first: bool) -> Any:
    """A curve's knee: a star on its p99, labelled; one legend entry for every knee."""
    return graph_objects().Scatter(
        x=[level.receive_msgs_per_s],
        y=[level.p99],
        name="knee",
        legendgroup="knee",
        showlegend=first,
        mode="markers+text",
        text=["knee"],
        textposition="top left",
        marker={
            "symbol": "star",
            "size": 18,
            "color": "#111",
            "line": {"width": 1, "color": "white"},
        },
        customdata=[", ".join(level.labels)],
        hovertemplate=(
            "knee: %{customdata}<br>p99 %{y:,.3~r} ms<br>%{x:,.0f} msgs/s"
            f"<extra>{series}</extra>"
        ),
    )


def _slo_line(slo_ms: float, low: float, high: float) -> Any:
    """A capacity search's SLO across the curve's rates (``low`` to ``high``), dashed. A
    trace, not a shape: shapes on a log axis take log10 coordinates."""
    return graph_objects().Scatter(
        x=[low, high],
        y=[slo_ms, slo_ms],
        name=f"SLO p99 ≤ {slo_ms:,.3g} ms",
        mode="lines",
        line={"color": "#b00", "dash": "dash", "width": 1},
        hovertemplate=f"SLO p99 ≤ {slo_ms:,.3g} ms<extra></extra>",
    )


def spectrum_chart(series: Mapping[str, Iterable[Bucket]], title: str) -> go.Figure | None:
    """One line per histogram (``series``: name → its buckets): latency by percentile, x on
    the log scale of 1/(1−p) with ticks at 0 %, 90 %, 99 %, … 99.999 %, y latency (log).
    None when every histogram is empty."""
    spectra = {name: spectrum(buckets) for name, buckets in series.items()}
    spectra = {name: s for name, s in spectra.items() if s.count}
    if not spectra:
        return None
    fig = figure(
        title,
        "percentile (log scale of 1/(1−p))",
        "latency (ms)",
        x_type="log",
        y_type="log",
    )
    fig.update_xaxes(
        tickvals=[x for x, _ in SPECTRUM_TICKS],
        ticktext=[text for _, text in SPECTRUM_TICKS],
        range=[0, 5.05],
    )
    fig.update_layout(margin={"r": 45})
    for i, (name, s) in enumerate(spectra.items()):
        fig.add_trace(
            graph_objects().Scatter(
                x=s.x,
                y=s.value_ms,
                name=name,
                mode="lines",
                line={"color": COLORS[i % len(COLORS)], "shape": "vh"},
                customdata=[_percent(p) for p in s.percent],
                hovertemplate=(
                    f"{name}<br>%{{customdata}}: %{{y:,.3~r}} ms<extra>{s.count:,} samples</extra>"
                ),
            )
        )
    return decade_ticks(fig)


def _percent(p: float) -> str:
    """A percentile with two significant digits of its distance to 100 % (99.934 %, not
    99.9 %; 50.0 %)."""
    if p >= 100.0:
        return "100% (max)"
    if p <= 0.0:
        return "0% (min)"
    digits = max(1, 1 - math.floor(math.log10(100.0 - p)))
    return f"{p:.{digits}f}%"


def bar_chart(values: Mapping[str, float], title: str, unit: str) -> go.Figure:
    """Horizontal bars, one per name, labelled with their value."""
    names = list(values)
    fig = figure(title, unit, "", x_type="linear", y_type="category")
    fig.add_trace(
        graph_objects().Bar(
            x=[values[n] for n in names],
            y=names,
            orientation="h",
            marker={"color": [COLORS[i % len(COLORS)] for i in range(len(names))]},
            text=[f"{values[n]:,.0f} {unit}" for n in names],
            textposition="auto",
            hovertemplate=f"%{{y}}: %{{x:,.0f}} {unit}<extra></extra>",
            showlegend=False,
        )
    )
    fig.update_yaxes(autorange="reversed")
    fig.update_layout(height=max(160, 70 + 45 * len(names)), margin={"b": 50})
    return fig


def by_load(
    series: Mapping[str, Sequence[tuple[float, float]]],
    title: str,
    x_title: str,
    y_title: str,
    *,
    log_y: bool = False,
) -> go.Figure:
    """One line per name (``series``: name → (x, y) pairs), ticks at the x values that
    occur (e.g. the sweep's thread counts); x is logarithmic where the values span more than
    :data:`LOG_SPAN` to one, y where ``log_y``."""
    xs = sorted({x for pairs in series.values() for x, _ in pairs})
    fig = figure(
        title,
        x_title,
        y_title,
        x_type=axis_type(xs),
        y_type="log" if log_y else axis_type(y for pairs in series.values() for _, y in pairs),
    )
    if xs and len(xs) <= 12:
        fig.update_xaxes(tickvals=xs, ticktext=[f"{x:,g}" for x in xs])
    for i, (name, pairs) in enumerate(series.items()):
        ordered = sorted(pairs)
        fig.add_trace(
            graph_objects().Scatter(
                x=[x for x, _ in ordered],
                y=[y for _, y in ordered],
                name=name,
                mode="lines+markers",
                line={"color": COLORS[i % len(COLORS)]},
                hovertemplate=f"{name}<br>%{{x:,g}}: %{{y:,.3~r}}<extra></extra>",
            )
        )
    return decade_ticks(fig)
