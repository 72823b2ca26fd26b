"""Expanding a scenario's ``[sweep]`` into sweep points (docs/measurement.md §4), and checking every point.

Value lists give their cartesian product (in the order the keys are declared);
``[[sweep.points]]`` gives an explicit list. Each point's load is validated again as a
whole load section — a swept value obeys the same limits as one written in ``[load]`` —
and its broker parameters against the system's model; receiver nodes default to twice the
sender nodes at every point.

With ``repeat = N`` every point runs N times, interleaved — all points once, then all
points again, … — so that a drift over time (a broker's caches, compaction, the machine)
does not bias one point. Each run is a sweep point of its own (its own index and
destination); ``base`` names the point of the un-repeated sweep it repeats, ``repeat``
which run it is. A capacity search (``[search]``) has no fixed list of points: its probes
are chosen as results come in (:mod:`workload.search`), so :func:`expand` refuses it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from workload.model.errors import Loc, Problem, UserError, key_path, problems_of

if TYPE_CHECKING:  # the scenario module checks its points with this one
    from workload.model.scenario import LoadSection, Scenario


@dataclass(frozen=True)
class SweepPoint:
    """One combination of parameters: the load it runs and the broker parameters it uses."""

    index: int
    load: LoadSection
    params: dict[str, Any] = field(default_factory=dict)
    #: The swept values only, for labels and the summary table.
    varied: dict[str, Any] = field(default_factory=dict)
    #: Which run of its point this is (0-based; ``repeat = N`` runs each point N times).
    repeat: int = 0
    #: The index of the point in the un-repeated sweep (default: ``index``).
    base: int = -1

    def __post_init__(self) -> None:
        if self.base < 0:
            object.__setattr__(self, "base", self.index)  # frozen: set once, here

    @property
    def receiver_nodes(self) -> int:
        return self.load.receiver_nodes or 2 * self.load.sender_nodes

    @property
    def label(self) -> str:
        return " ".join(f"{k}={v}" for k, v in self.varied.items()) or "single point"


class NotASweep(UserError):
    """A capacity search asked for its sweep points: they are not known before it runs."""


def base_points(scenario: Scenario) -> list[SweepPoint]:
    """The points of the un-repeated sweep, numbered from 0 (one when nothing is swept).

    Raises pydantic's ``ValidationError`` for a point that is not valid; a scenario from
    :func:`workload.model.scenario.load_scenario` has had every point checked already.
    """
    return [
        SweepPoint(
            index=index,
            load=scenario.point_load(combo.load),
            params=scenario.broker_params(combo.params).model_dump(),
            varied={**combo.load, **combo.params},
        )
        for index, combo in enumerate(scenario.sweep.combinations())
    ]


def expand(scenario: Scenario) -> list[SweepPoint]:
    """Every sweep point a run of the scenario runs, in order, numbered from 0: the points
    of the sweep ``repeat`` times, interleaved (run ``r`` of point ``b`` is index
    ``r × points + b``).

    Raises :class:`NotASweep` for a capacity search, whose points are chosen as it runs
    (``brokerbench run`` runs it; the client machines on AWS need a fixed list).
    """
    if scenario.search is not None:
        raise NotASweep(
            f"{scenario.name}: a capacity search ([search]) chooses its rates as results come "
            "in, so it has no fixed list of sweep points: run it here with `brokerbench run` "
            "(the client machines on AWS run a fixed list of points)"
        )
    base = base_points(scenario)
    return [
        replace(point, index=run * len(base) + point.index, repeat=run)
        for run in range(scenario.repeat)
        for point in base
    ]


def describe_points(points: Sequence[SweepPoint], repeat: int) -> str:
    """``6 sweep point(s): 3 × repeat 2, interleaved`` (just the count without repeats)."""
    text = f"{len(points)} sweep point(s)"
    if repeat > 1:
        text += f": {len(points) // repeat} × repeat {repeat}, interleaved"
    return text


def batching_floor(points: Sequence[SweepPoint]) -> str:
    """A note where an open-loop point's own batching sets a floor under its processing
    latency: a batch is sent when its last message is due, so its first waits up to
    (max_send_batch − 1) ÷ rate; "" where no point has such a floor of 1 ms or more."""
    worst = max(
        (
            ((p.load.max_send_batch - 1) / p.load.rate, p)
            for p in points
            if p.load.rate and p.load.max_send_batch > 1
        ),
        default=None,
        key=lambda found: found[0],
    )
    if worst is None or worst[0] < 0.001:
        return ""
    wait, point = worst
    return (
        f"open loop at {point.load.rate:g} msgs/s per worker with batches of up to "
        f"{point.load.max_send_batch}: a message waits up to {wait * 1000:,.3g} ms for the rest "
        "of its batch before it is sent, and that wait is in its processing latency — the "
        "sender's, not the broker's (max_send_batch = 1 removes it)"
    )


def estimated_seconds(points: Sequence[SweepPoint]) -> float:
    """A rough run time: each point (every run of it) sends for its duration, then
    receivers drain until idle.

    Broker start-up, topic creation and analysis come on top; receivers that drain early
    finish sooner.
    """
    return sum(p.load.duration + p.load.idle_timeout for p in points)


def point_problems(scenario: Scenario) -> list[Problem]:
    """Every sweep point's load and broker parameters, each validated whole.

    A problem is named after the swept value that causes it (``sweep.message_size[0]``) or,
    when no single value does, after the point and the values it combines.
    """
    found: dict[Problem, None] = {}
    for combo in scenario.sweep.combinations():
        checks: list[tuple[Callable[[Mapping[str, Any]], object], dict[str, Any], Loc]] = [
            (scenario.point_load, combo.load, ("load",)),
            (scenario.broker_params, combo.params, ("broker", "params")),
        ]
        for build, values, section in checks:
            try:
                build(values)
            except ValidationError as exc:
                where = combo.load_at if section == ("load",) else combo.params_at
                for problem in problems_of(exc):
                    found[_at_point(problem, values, where, section, combo.at)] = None
    return list(found)


def _at_point(
    problem: Problem, values: dict[str, Any], where: dict[str, Loc], section: Loc, at: Loc
) -> Problem:
    """Name a sweep point's problem after the swept value that causes it, else the point.

    The section was valid without the point's values, so when the point varies one value
    of it, that value is the cause.
    """
    for key in problem.keys:
        if key and isinstance(key[0], str) and key[0] in where:
            return Problem(where[key[0]] + key[1:], problem.message)
    inner = f"{key_path((*section, *problem.loc))}: {problem.message}"
    if len(where) == 1:
        (origin,) = where.values()
        return Problem(origin, inner)
    combined = " ".join(f"{k}={v!r}" for k, v in values.items())
    return Problem(at, f"{combined}: {inner}" if combined else inner)
