"""A scenario's ``[sweep]`` (docs/measurement.md §4) and the sweep points it gives.

Value lists give their cartesian product (in the order the keys are declared);
``[[sweep.points]]`` gives an explicit list (:class:`SweepSection`). Each point's load is
validated again as a whole load section — a swept value obeys the same limits as one
written in ``[load]`` — and its broker parameters against the system's model
(:func:`workload.model.checks.point_problems`); receiver nodes default to twice the sender
nodes at every point, sender and receiver threads to ``threads``. :func:`workload.model.scenario.expand` numbers the points, repeats
included.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from pydantic import Field, model_validator

from workload.model.bounds import (
    MAX_SWEEP_POINTS,
    MAX_UNASKED_POINTS,
    MessageSize,
    ReceiverNodes,
    SenderNodes,
    Strict,
    Threads,
)
from workload.model.errors import Loc, UserError
from workload.model.sections import LoadSection


class Combination(NamedTuple):
    """One sweep point's values, and where each is written (for messages)."""

    load: dict[str, Any]
    params: dict[str, Any]
    load_at: dict[str, Loc]
    params_at: dict[str, Loc]
    #: The point as a whole: ``sweep.points[i]`` or ``sweep``.
    at: Loc


class SweepPointSpec(Strict):
    """One explicit point of ``[[sweep.points]]``: a value of each load key a sweep may
    vary (:data:`SWEEPABLE`, these fields in their order), and broker parameters."""

    threads: Threads | None = None
    sender_nodes: SenderNodes | None = None
    receiver_nodes: ReceiverNodes | None = None
    message_size: MessageSize | None = None
    sender_threads: Threads | None = None
    receiver_threads: Threads | None = None
    params: dict[str, Any] = Field(default_factory=dict)


#: The load keys a sweep may vary, in the order their value lists multiply: the load fields
#: of :class:`SweepPointSpec`. :class:`SweepSection` has a value list for each.
SWEEPABLE = tuple(key for key in SweepPointSpec.model_fields if key != "params")


class SweepSection(Strict):
    """Values to sweep: their cartesian product, or an explicit list of points. The value
    lists are :data:`SWEEPABLE`'s keys, typed as :class:`SweepPointSpec` types one value."""

    threads: list[Threads] | None = None
    sender_nodes: list[SenderNodes] | None = None
    receiver_nodes: list[ReceiverNodes] | None = None
    message_size: list[MessageSize] | None = None
    sender_threads: list[Threads] | None = None
    receiver_threads: list[Threads] | None = None
    params: dict[str, list[Any]] = Field(default_factory=dict)
    points: list[SweepPointSpec] = Field(default_factory=list)
    max_points: int | None = Field(
        default=None,
        ge=1,
        le=MAX_SWEEP_POINTS,
        description="The most runs (sweep points × repeat) this sweep is meant to have: "
        "more is an error, and up to it a run starts without --yes, which it otherwise "
        f"asks for beyond {MAX_UNASKED_POINTS:,}.",
    )

    def _axes(self) -> list[tuple[bool, str, list[Any]]]:
        """(is a broker parameter, key, values) of every value list, in declared order."""
        axes: list[tuple[bool, str, list[Any]]] = [
            (False, k, getattr(self, k)) for k in SWEEPABLE if getattr(self, k) is not None
        ]
        return axes + [(True, k, v) for k, v in self.params.items()]

    def varies(self) -> bool:
        """Whether anything is swept (value lists or explicit points)."""
        return bool(self.points or self._axes())

    def size(self) -> int:
        """How many points the sweep has, without expanding it."""
        if self.points:
            return len(self.points)
        return math.prod(len(values) for _, _, values in self._axes())

    def combinations(self) -> Iterator[Combination]:
        """Every point's values (one empty point when nothing is swept)."""
        if self.points:
            for i, p in enumerate(self.points):
                load = {k: getattr(p, k) for k in SWEEPABLE if getattr(p, k) is not None}
                yield Combination(
                    load,
                    dict(p.params),
                    {k: ("sweep", "points", i, k) for k in load},
                    {k: ("sweep", "points", i, "params", k) for k in p.params},
                    ("sweep", "points", i),
                )
            return
        axes = self._axes()
        for picks in itertools.product(*(range(len(values)) for _, _, values in axes)):
            combo = Combination({}, {}, {}, {}, ("sweep",))
            for (is_param, key, values), i in zip(axes, picks, strict=True):
                (combo.params if is_param else combo.load)[key] = values[i]
                where = combo.params_at if is_param else combo.load_at
                where[key] = ("sweep", "params", key, i) if is_param else ("sweep", key, i)
            yield combo

    @model_validator(mode="after")
    def _one_style(self) -> SweepSection:
        lists = [key for _, key, _ in self._axes()]
        if self.points and lists:
            raise ValueError("use either value lists or [[sweep.points]], not both")
        for _, key, values in self._axes():
            if not values:
                raise ValueError(f"{key}: the list of values is empty")
        size = self.size()
        if size > MAX_SWEEP_POINTS:
            raise ValueError(
                f"{size:,} sweep points (the product of the list lengths); the limit is "
                f"{MAX_SWEEP_POINTS:,}"
            )
        return self


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
        return self.load.receivers

    @property
    def label(self) -> str:
        return " ".join(f"{k}={v}" for k, v in self.varied.items()) or "single point"


class NotASweep(UserError):
    """A capacity search asked for its sweep points: they are not known before it runs."""


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
