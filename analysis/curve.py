"""The latency–throughput curve of a sweep, without plotly: its points (:class:`CurvePoint`),
their load levels (:func:`levels`) and the saturation knee (:func:`knee`, the rule in
:data:`KNEE_RULE`; :func:`no_knee` says why a curve has none). The chart that draws it is
:func:`analysis.charts.latency_throughput`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import pairwise

from analysis.column_model import RUN_QUANTILES
from analysis.repeats import spread

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
