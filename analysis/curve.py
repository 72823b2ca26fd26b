"""The latency–throughput curve of a sweep, without plotly: its points (:class:`CurvePoint`,
from a run's summary rows and the load each point offered: :func:`curve_points`), their
load levels (:func:`levels`), the saturation knee (:func:`knee`, the rule in
:data:`KNEE_RULE`; :func:`no_knee` says why a curve has none) and each curve's knee in a
sentence (:func:`knee_text`). The chart that draws it is
:func:`analysis.charts.latency_throughput`.
"""

from __future__ import annotations

import html
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise

from analysis.column_model import RUN_QUANTILES, run_column
from analysis.repeats import spread
from analysis.summary_row import SummaryRow, number
from analysis.summary_table import bound_label
from workload.model.record import PointEntry
from workload.model.sections import LoadSection

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
    #: its knee gets (:meth:`workload.model.verdict.Verdict.label`); "" otherwise.
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


#: What the load sweeps raise; any other swept value (a message size, a broker parameter,
#: receiver nodes) makes a curve of its own on the latency–throughput chart.
LOAD_KEYS = ("threads", "sender_threads", "sender_nodes", "rate", "max_in_flight")


def offered_load(load: LoadSection) -> float:
    """What a point offers the broker, to order a sweep's points by: msgs/s in open loop
    (rate per worker × sending workers), batches in flight in closed loop."""
    if load.rate:
        return load.rate * load.sender_workers
    return load.sender_workers * load.max_in_flight


def curve_points(
    rows: Sequence[SummaryRow], points: Sequence[PointEntry], series: str = ""
) -> list[CurvePoint]:
    """A run's sweep points for the latency–throughput chart: each summary row with the load
    its context point offered (``points``: the context's; rows without one fall back to their
    own threads and sender nodes), on a curve named ``series`` and the values swept besides
    the load."""
    by_index = {p.point: p for p in points}
    out = []
    for r in rows:
        point = by_index.get(int(r["point"]))
        if point is not None:
            offered = offered_load(point.load)
        else:  # no context point: the row's own workers, one batch in flight each
            threads = number(r.get("sender_threads")) or number(r.get("threads")) or 0
            offered = threads * (number(r.get("sender_nodes")) or 1)
        varied = point.varied if point is not None else {}
        others = " ".join(f"{k}={v}" for k, v in varied.items() if k not in LOAD_KEYS)
        label = r.get("label") or (point.label if point is not None else "")
        out.append(
            CurvePoint(
                label=str(label or f"point {int(r['point'])}"),
                load=offered,
                receive_msgs_per_s=number(r.get("receive_msgs_per_s")),
                latency_ms={
                    q: number(r.get(run_column("processing_latency", q))) for q in RUN_QUANTILES
                },
                series=" · ".join(s for s in (series, others) if s),
                bound=bound_label(r),
            )
        )
    return out


def _ms(value: float | None) -> str:
    if value is None:
        return "–"
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def knee_text(points: list[CurvePoint]) -> str:
    """Each curve's knee in a sentence (HTML)."""
    found = []
    for series, curve in levels(points).items():
        if len(curve) < 2:
            continue
        name = f"{html.escape(series)}: " if series else ""
        at = knee(curve)
        if at is None:
            found.append(f"<li>{name}no knee — {html.escape(no_knee(curve))}.</li>")
            continue
        level = curve[at]
        after = curve[at + 1] if at + 1 < len(curve) else None
        text = (
            f"<li>{name}knee at <b>{html.escape(', '.join(level.labels))}</b>: "
            f"{level.receive_msgs_per_s:,.0f} msgs/s, p99 {_ms(level.p99)} ms"
        )
        if after is not None and after.p99 is not None:
            text += (
                f"; the next level ({html.escape(', '.join(after.labels))}) reached "
                f"{after.receive_msgs_per_s:,.0f} msgs/s at p99 {_ms(after.p99)} ms"
            )
        bound = [*level.bound, *(after.bound if after is not None else ())]
        if bound:
            text += (
                f". <b class=warn>Not the broker's limit — {html.escape(bound[0])}</b> "
                "(the verdict of the points at and after the knee)"
            )
        found.append(text + ".</li>")
    return f"<ul>{''.join(found)}</ul>" if found else ""
