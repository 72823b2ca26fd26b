"""A whole scenario file as one model (:class:`Scenario`) — its sections are
:mod:`workload.model.sections`, :mod:`workload.model.sweep` and :mod:`workload.model.faults`
— and the sweep points a run of it runs (:func:`expand`).

With ``repeat = N`` every point runs N times, interleaved — all points once, then all
points again, … — so that a drift over time (a broker's caches, compaction, the machine)
does not bias one point. Each run is a sweep point of its own (its own index and
destination); ``base`` names the point of the un-repeated sweep it repeats, ``repeat``
which run it is. A capacity search (``[search]``) has no fixed list of points: its probes
are chosen as results come in (:mod:`workload.engine.search`), so :func:`expand` refuses it.

A scenario is read from its file by :func:`workload.model.scenario_file.load_scenario`,
which also runs the checks across sections (:mod:`workload.model.checks`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from pydantic import Field, model_validator

from brokers import registry
from brokers.connection import BrokerParams
from workload.model.backlog import BacklogSection
from workload.model.bounds import (
    MAX_DESCRIPTION,
    MAX_FAULTS,
    MAX_REPEAT,
    MAX_SWEEP_POINTS,
    Name,
    Strict,
)
from workload.model.errors import conflict
from workload.model.faults import FaultSpec
from workload.model.sections import (
    BrokerSection,
    LoadSection,
    MeasurementSection,
    SearchSection,
    default_warmup,
)
from workload.model.sweep import NotASweep, SweepPoint, SweepSection


class Scenario(Strict):
    """A whole scenario file."""

    name: Name = Field(
        description="Used in run ids, file names and S3 keys: letters and digits, with "
        "single '.', '-' or '_' between them."
    )
    description: str = Field("", max_length=MAX_DESCRIPTION)
    broker: BrokerSection
    load: LoadSection = Field(default_factory=LoadSection)  # type: ignore[arg-type]
    measurement: MeasurementSection = Field(default_factory=MeasurementSection)  # type: ignore[arg-type]
    sweep: SweepSection = Field(default_factory=SweepSection)
    faults: list[FaultSpec] = Field(
        default_factory=list,
        max_length=MAX_FAULTS,
        description="Faults each sweep point goes through (local runs of a multi-node "
        "topology of a system that supports them), one at a time.",
    )
    repeat: int = Field(
        1,
        ge=1,
        le=MAX_REPEAT,
        description="Runs of each sweep point, interleaved: every point once, then every "
        "point again, … (each run its own sweep point, with its own destination).",
    )
    backlog: BacklogSection | None = Field(
        None,
        description="A backlog built and drained at every sweep point: receivers stay away, "
        "then drain (local runs, `brokerbench run`).",
    )
    search: SearchSection | None = Field(
        None,
        description="A capacity search instead of a sweep: the highest total open-loop rate "
        "that holds the processing-latency SLO (runs locally with `brokerbench run`).",
    )

    @model_validator(mode="after")
    def _resolve(self) -> Scenario:
        duration = self.load.duration
        warmup = self.measurement.warmup
        if warmup is None:
            resolved = self.measurement.model_copy(update={"warmup": default_warmup(duration)})
            object.__setattr__(self, "measurement", resolved)  # frozen: resolved once, here
        elif warmup >= duration:
            raise conflict(
                ("measurement.warmup", "load.duration"),
                f"the warm-up ({warmup:g} s) must be shorter than load.duration ({duration:g} s)",
            )
        window = self.measurement.window
        measured = duration - (self.measurement.warmup or 0.0)
        if window > measured and "window" in self.measurement.model_fields_set:
            raise conflict(
                ("measurement.window", "load.duration", "measurement.warmup"),
                f"the latency window ({window:g} s) must not be longer than the measured "
                f"period (load.duration {duration:g} s − warm-up {duration - measured:g} s = "
                f"{measured:g} s): each point would be one window, its [window] figures "
                "its [run] figures",
            )
        runs = self.sweep.size() * self.repeat
        if runs > MAX_SWEEP_POINTS:
            raise conflict(
                ("repeat",),
                f"{self.sweep.size():,} sweep point(s) × repeat {self.repeat} = {runs:,} runs; "
                f"the limit is {MAX_SWEEP_POINTS:,}: lower repeat or sweep fewer values",
            )
        system = registry.get(self.broker.system)
        if self.load.max_in_flight > 1 and not system.can_pipeline:
            raise conflict(
                ("load.max_in_flight",),
                f"{system.title}'s adapter confirms each batch before the next "
                f"({system.one_in_flight or 'its client cannot pipeline'}); only 1 is possible",
            )
        return self

    def broker_params(self, overrides: Mapping[str, Any] | None = None) -> BrokerParams:
        """The system's typed parameters, with a sweep point's overrides applied."""
        model = registry.get(self.broker.system).params_model
        return model.model_validate({**self.broker.params, **(overrides or {})})

    def point_load(self, overrides: Mapping[str, Any] | None = None) -> LoadSection:
        """A sweep point's whole load, validated again as a load section.

        The scenario's load with the point's values; receiver nodes default to twice the
        sender nodes, sender and receiver threads to ``threads``.
        """
        data = {**self.load.model_dump(), **(overrides or {})}
        if data["receiver_nodes"] is None:
            data["receiver_nodes"] = 2 * data["sender_nodes"]
        for role in ("sender", "receiver"):
            if data[f"{role}_threads"] is None:
                data[f"{role}_threads"] = data["threads"]
        return LoadSection.model_validate(data)


def base_points(scenario: Scenario) -> list[SweepPoint]:
    """The points of the un-repeated sweep, numbered from 0 (one when nothing is swept).

    Raises pydantic's ``ValidationError`` for a point that is not valid; a scenario from
    :func:`workload.model.scenario_file.load_scenario` has had every point checked already.
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
