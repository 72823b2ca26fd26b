"""The charts of the HTML reports, as plotly figures built from plain inputs (no file I/O).

A page embeds plotly.js once (:func:`plotly_script`) and each figure as a ``<div>`` with the
script that draws it (:func:`embed`), so that it stays one self-contained file that opens
offline. Every chart has titled axes with units, ticks and hover tooltips; latency axes are
logarithmic (a p50 under a millisecond and a max of seconds share one chart), and so is any
other axis whose values span more than :data:`LOG_SPAN` to one.

* :func:`latency_throughput` — the latency–throughput curve of a sweep (x: receive msgs/s,
  y: whole-run processing latency), its points in order of the load the sweep offered, with
  the saturation knee (:func:`knee`) marked;
* :func:`throughput_over_time` and :func:`latency_over_time` — one sweep point's latency
  windows: rates, and p50/p95/p99/p99.9/max of a latency metric, per window; the point's
  declared faults (:class:`FaultMark`) as shaded bands from the action to the node's
  return, each with a labelled line at its action;
* :func:`spectrum_chart` — percentile spectra as HdrHistogram plots them (x: the percentile
  on a log scale of 1/(1−p), y: latency), from merged histograms (:func:`spectrum`);
* :func:`bar_chart` and :func:`by_load` — the cross-system overview's bars and lines.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import pairwise
from typing import TYPE_CHECKING, Any

from analysis.columns import QUANTILE_TITLES, RUN_QUANTILES
from analysis.hdr import Bucket
from analysis.repeats import spread
from workload.model.errors import UserError

if TYPE_CHECKING:
    import plotly.graph_objects as go

COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")
#: An axis whose positive values span more than this (max / min) is drawn logarithmic.
LOG_SPAN = 20.0
#: How tall a chart is, in pixels (its width follows the page).
HEIGHT = 400

# The knee rule (see :func:`knee`).
#: A step to more load must raise receive throughput by at least this factor …
KNEE_GAIN = 1.10
#: … while the p99 of processing latency grows by less than this factor (or than throughput).
KNEE_LATENCY = 2.0
#: … and a knee needs at least this many load levels.
KNEE_LEVELS = 3
#: The rule as the pages state it.
KNEE_RULE = (
    "The knee (★) is the last load level that more load still paid for. A step to the next "
    f"level pays when it raises receive throughput by at least {KNEE_GAIN - 1:.0%} and the "
    f"whole-run p99 of processing latency by less than {KNEE_LATENCY:g}× — or, where "
    "throughput grew by more than that, by less than throughput grew. The knee is where the "
    "first step that does not pay starts: beyond it throughput stalls, or grows only at a "
    "latency that grows faster. A knee needs at least three load levels and a first step that "
    "paid: where every step paid, the sweep did not reach saturation; where the first step "
    "already did not pay, it started at or past saturation (or the levels differ too little); "
    "either way no knee is marked. Levels are ordered by the load offered (msgs/s in open loop, "
    "batches in flight in closed loop); repeated runs of a point are one level, at their "
    "medians."
)

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
class CurvePoint:
    """One sweep point on a latency–throughput curve.

    ``load`` is what the sweep raised from point to point (the load offered: msgs/s in open
    loop, batches in flight in closed loop); it orders the curve. Points of one curve share
    ``series`` (the other values a sweep varies, e.g. a message size); points of one series
    and load are runs of one point (``repeat``), merged into one level.
    """

    label: str
    load: float
    receive_msgs_per_s: float | None
    #: Whole-run percentiles of processing latency, ms, by :data:`RUN_QUANTILES` name.
    latency_ms: Mapping[str, float | None]
    series: str = ""
    #: What set the point's pace, where the clients or the shared machine did: the label
    #: its knee gets (:meth:`workload.verdict.Verdict.label`); "" otherwise.
    bound: str = ""


@dataclass(frozen=True)
class Level:
    """One load level of a curve: its points (runs of one sweep point) at their medians."""

    load: float
    labels: tuple[str, ...]
    receive_msgs_per_s: float
    latency_ms: Mapping[str, float | None]
    #: Its points' client- or host-bound labels (empty: the broker's own figures).
    bound: tuple[str, ...] = ()

    @property
    def p99(self) -> float | None:
        return self.latency_ms.get("p99")


def _median(values: Iterable[float | None]) -> float | None:
    found = spread(values)
    return None if found is None else found.median


def levels(points: Iterable[CurvePoint]) -> dict[str, list[Level]]:
    """Per series, its load levels in order of load; a point without a receive rate is left
    out (it has no place on the x axis)."""
    grouped: dict[str, dict[float, list[CurvePoint]]] = {}
    for p in points:
        if p.receive_msgs_per_s is not None:
            grouped.setdefault(p.series, {}).setdefault(p.load, []).append(p)
    out: dict[str, list[Level]] = {}
    for series, by_load in grouped.items():
        out[series] = []
        for load, group in sorted(by_load.items()):
            rate = _median(p.receive_msgs_per_s for p in group)
            assert rate is not None  # every point of a group has one
            out[series].append(
                Level(
                    load,
                    tuple(dict.fromkeys(p.label for p in group)),
                    rate,
                    {q: _median(p.latency_ms.get(q) for p in group) for q in RUN_QUANTILES},
                    tuple(dict.fromkeys(p.bound for p in group if p.bound)),
                )
            )
    return out


def knee(curve: Sequence[Level]) -> int | None:
    """The index in ``curve`` (levels in order of load) of its saturation knee, or None.

    Walking up the load, a step *pays* when it raises receive throughput by a factor
    ``gain`` of at least :data:`KNEE_GAIN` (+10 %) and the whole-run p99 of processing
    latency by less than ``max(KNEE_LATENCY, gain)``: latency may double on any step, and
    grow more only where throughput grew more (its elasticity below one). The knee is the
    level where the first step that does not pay starts: the last level reached only by
    steps that paid. Below it the broker turns more load into throughput at a modest latency
    cost; beyond it throughput stalls (closed loop: more senders only queue) or is bought
    with latency (open loop: the queue grows). When every step pays, the sweep stopped short
    of saturation: None. A knee needs :data:`KNEE_LEVELS` levels and a first step that paid:
    where it did not, nothing shows where saturation began (None; :func:`no_knee` says why).
    Levels without a p99 are skipped.
    """
    usable = [(i, level) for i, level in enumerate(curve) if level.p99 is not None]
    if len(usable) < KNEE_LEVELS:
        return None
    for (i, low), (_, high) in pairwise(usable):
        assert low.p99 is not None and high.p99 is not None
        if low.receive_msgs_per_s > 0:
            gain = high.receive_msgs_per_s / low.receive_msgs_per_s
        else:
            gain = math.inf if high.receive_msgs_per_s > 0 else 1.0
        affordable = high.p99 < low.p99 * max(KNEE_LATENCY, gain)
        if not (gain >= KNEE_GAIN and affordable):
            return i if i != usable[0][0] else None
    return None


def no_knee(curve: Sequence[Level]) -> str:
    """Why a curve with at least two levels has no knee (:func:`knee` is None)."""
    usable = [level for level in curve if level.p99 is not None]
    if len(usable) < KNEE_LEVELS:
        return (
            f"only {len(usable)} load levels: a knee needs at least {KNEE_LEVELS} "
            "(sweep more levels)"
        )
    low, high = usable[0], usable[1]
    gain = high.receive_msgs_per_s / low.receive_msgs_per_s if low.receive_msgs_per_s else 1.0
    if not (gain >= KNEE_GAIN and high.p99 is not None and low.p99 is not None
            and high.p99 < low.p99 * max(KNEE_LATENCY, gain)):  # fmt: skip
        return (
            f"the first step already did not pay (throughput ×{gain:.3g}): the sweep started "
            "at or past saturation, or its levels differ too little"
        )
    return "every step still paid: the sweep did not reach saturation"


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


def _go() -> Any:
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
    _go()
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


def _figure(title: str, x_title: str, y_title: str, *, x_type: str, y_type: str) -> go.Figure:
    fig = _go().Figure()
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


def _decades(fig: go.Figure) -> go.Figure:
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


def latency_throughput(
    points: Iterable[CurvePoint],
    title: str = "Processing latency against throughput (whole run)",
    quantiles: Sequence[str] = ("p50", "p99", "p999"),
    slo_ms: float | None = None,
) -> go.Figure:
    """The latency–throughput curve: per series and quantile a line through its load
    levels (x: receive msgs/s, y: processing latency, log), hover naming the sweep points,
    and each series' knee (:func:`knee`) as a star on its p99; a capacity search's SLO
    (``slo_ms``) as a dashed line. One series: a colour per
    quantile; several: a colour per series, a dash per quantile."""
    curves = levels(points)
    rates = [level.receive_msgs_per_s for curve in curves.values() for level in curve]
    fig = _figure(
        title,
        "receive throughput (msgs/s)",
        "processing latency (ms)",
        x_type=axis_type(rates),
        y_type="log",
    )
    dashes = {"p50": "dot", "p95": "dashdot", "p99": "solid", "p999": "dash", "max": "longdash"}
    knees = 0
    for i, (series, curve) in enumerate(curves.items()):
        for j, q in enumerate(quantiles):
            parts = (series, QUANTILE_TITLES[q] if len(quantiles) > 1 else "")
            name = " · ".join(s for s in parts if s) or QUANTILE_TITLES[q]
            fig.add_trace(
                _go().Scatter(
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
        if at is None:
            continue
        level = curve[at]
        fig.add_trace(
            _go().Scatter(
                x=[level.receive_msgs_per_s],
                y=[level.p99],
                name="knee",
                legendgroup="knee",
                showlegend=knees == 0,
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
        )
        knees += 1
    known = [r for r in rates if r is not None]
    if slo_ms is not None and known:  # a capacity search's SLO: the p99 a rate must stay under
        # A trace, not a shape: shapes on a log axis take log10 coordinates.
        fig.add_trace(
            _go().Scatter(
                x=[min(known), max(known)],
                y=[slo_ms, slo_ms],
                name=f"SLO p99 ≤ {slo_ms:,.3g} ms",
                mode="lines",
                line={"color": "#b00", "dash": "dash", "width": 1},
                hovertemplate=f"SLO p99 ≤ {slo_ms:,.3g} ms<extra></extra>",
            )
        )
    return _decades(fig)


def throughput_over_time(
    windows: Sequence[Window], title: str = "Throughput", faults: Sequence[FaultMark] = ()
) -> go.Figure:
    """Send and receive msgs/s per latency window, over the measurement; ``faults`` marked
    (:func:`mark_faults`)."""
    rates = [w.send_msgs_per_s for w in windows] + [w.receive_msgs_per_s for w in windows]
    fig = _figure(
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
            _go().Scatter(
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
    return mark_faults(_decades(fig), faults, windows)


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
    fig = _figure(
        title,
        "time since the start of the measurement (s, end of each window)",
        "latency (ms)",
        x_type="linear",
        y_type="log",
    )
    for i, (q, ys) in enumerate(values.items()):
        fig.add_trace(
            _go().Scatter(
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
    return mark_faults(_decades(fig), faults, windows)


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
    fig = _figure(
        title, "time since the start of the measurement (s)", unit, x_type="linear", y_type="linear"
    )
    for i, s in enumerate(drawn):
        fig.add_trace(
            _go().Scatter(
                x=list(s.seconds),
                y=list(s.values),
                name=s.name,
                mode="lines",
                line={"color": COLORS[i % len(COLORS)], "width": 1.5},
                hovertemplate=f"{s.name}: %{{y:,.1f}} {unit}<br>%{{x:,.0f}} s<extra></extra>",
            )
        )
    return mark_faults(fig, faults, windows)


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


def spectrum_chart(series: Mapping[str, Iterable[Bucket]], title: str) -> go.Figure | None:
    """One line per histogram (``series``: name → its buckets): latency by percentile, x on
    the log scale of 1/(1−p) with ticks at 0 %, 90 %, 99 %, … 99.999 %, y latency (log).
    None when every histogram is empty."""
    spectra = {name: spectrum(buckets) for name, buckets in series.items()}
    spectra = {name: s for name, s in spectra.items() if s.count}
    if not spectra:
        return None
    fig = _figure(
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
            _go().Scatter(
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
    return _decades(fig)


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
    fig = _figure(title, unit, "", x_type="linear", y_type="category")
    fig.add_trace(
        _go().Bar(
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
    fig = _figure(
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
            _go().Scatter(
                x=[x for x, _ in ordered],
                y=[y for _, y in ordered],
                name=name,
                mode="lines+markers",
                line={"color": COLORS[i % len(COLORS)]},
                hovertemplate=f"{name}<br>%{{x:,g}}: %{{y:,.3~r}}<extra></extra>",
            )
        )
    return _decades(fig)
