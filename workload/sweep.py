"""Expanding a scenario's ``[sweep]`` into sweep points (SPEC §4).

Value lists give their cartesian product (in the order the keys are declared);
``[[sweep.points]]`` gives an explicit list. Receiver nodes default to twice the sender
nodes at every point.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from workload.scenario import SWEEPABLE, LoadSection, Scenario


@dataclass(frozen=True)
class SweepPoint:
    """One combination of parameters: the load it runs and the broker parameters it uses."""

    index: int
    load: LoadSection
    params: dict[str, Any] = field(default_factory=dict)
    #: The swept values only, for labels and the summary table.
    varied: dict[str, Any] = field(default_factory=dict)

    @property
    def receiver_nodes(self) -> int:
        return self.load.receiver_nodes or 2 * self.load.sender_nodes

    @property
    def label(self) -> str:
        return " ".join(f"{k}={v}" for k, v in self.varied.items()) or "single point"


def expand(scenario: Scenario) -> list[SweepPoint]:
    """All sweep points of a scenario, numbered from 0 (one point when nothing is swept)."""
    sweep = scenario.sweep
    combos: list[tuple[dict[str, Any], dict[str, Any]]]  # (load overrides, param overrides)
    if sweep.points:
        combos = [
            (
                {k: getattr(p, k) for k in SWEEPABLE if getattr(p, k) is not None},
                dict(p.params),
            )
            for p in sweep.points
        ]
    else:
        axes: list[tuple[str, bool, list[Any]]] = [
            (k, False, list(getattr(sweep, k))) for k in SWEEPABLE if getattr(sweep, k) is not None
        ]
        axes += [(k, True, list(v)) for k, v in sweep.params.items()]
        combos = []
        for values in itertools.product(*(axis[2] for axis in axes)):
            load_over = {a[0]: v for a, v in zip(axes, values, strict=True) if not a[1]}
            param_over = {a[0]: v for a, v in zip(axes, values, strict=True) if a[1]}
            combos.append((load_over, param_over))
    points = []
    for index, (load_over, param_over) in enumerate(combos):
        load = scenario.load.model_copy(update=load_over)
        if load.receiver_nodes is None:
            load = load.model_copy(update={"receiver_nodes": 2 * load.sender_nodes})
        params = scenario.broker_params(param_over).model_dump()
        varied = {**load_over, **param_over}
        points.append(SweepPoint(index=index, load=load, params=params, varied=varied))
    return points
