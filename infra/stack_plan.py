"""What one stack deploys, decided before any resource is declared (:func:`plan_stack`): the
system, the scenario as its client machines get it, the fleet, the run's id, tags and
bucket layout, the code (the wheel) and the fingerprint of what the machines run."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pulumi

from brokers.base import BrokerSystem
from brokers.cloud import CloudRecipe, ManagedService
from infra.plan import BucketLayout, FleetPlan, stack_fleet
from infra.run_id import fingerprint, new_run_id
from infra.settings import ROOT, RUN_TAG, STACK_TAG, StackConfigError, StackSettings, deprecations
from infra.source import SourceError, SourceState, source_state
from infra.source import build_wheel as _build
from infra.userdata import missing_recipe_message
from workload.model.scenario import Scenario


@dataclass(frozen=True)
class StackPlan:
    """What one stack deploys (see the module)."""

    system: BrokerSystem[Any]
    scenario: Scenario
    plan: FleetPlan
    run_id: str
    layout: BucketLayout
    wheel: Path
    tags: dict[str, str]
    #: The system has no cloud recipe: the broker machines are placeholders.
    placeholder: bool
    #: The checkout the wheel and this program come from.
    source: SourceState
    #: What the run's machines run, as a digest (:func:`infra.run_id.fingerprint`).
    fingerprint: str = ""

    @property
    def recipe(self) -> CloudRecipe | None:
        return self.system.cloud

    @property
    def managed(self) -> ManagedService | None:
        return self.recipe.managed if self.recipe is not None else None


def plan_stack(
    settings: StackSettings,
    stack: str,
    wheel: Path | None = None,
    source: SourceState | None = None,
) -> StackPlan:
    """The stack's plan (warnings logged); a :class:`StackConfigError` for a scenario of
    another system or a topology without broker nodes and no managed service. Without a
    configured run id the run gets a new one (:func:`infra.run_id.new_run_id`)."""
    fleet = stack_fleet(settings)
    system, scenario, plan = fleet.system, fleet.scenario, fleet.plan
    if scenario.broker.system != system.name:
        raise StackConfigError(
            [f"{settings.scenario}: is a {scenario.broker.system} scenario, not {system.name}"]
        )
    run_id = settings.run_id or new_run_id(scenario.name)
    source = source or source_state(ROOT)
    wheel = wheel or settings.wheel or build_wheel(source=source)
    tags = {RUN_TAG: run_id, "brokerbench:system": system.name, STACK_TAG: stack}
    recipe = system.cloud
    managed = recipe.managed if recipe is not None else None
    for line in deprecations(settings):
        pulumi.log.warn(line)
    placeholder = recipe is None and bool(plan.brokers)
    if placeholder:
        pulumi.log.warn(missing_recipe_message(system.name))
    if not plan.brokers and managed is None:
        raise StackConfigError(
            [
                f"{system.name}: the topology has no broker nodes and the system's cloud "
                "recipe declares no managed service"
            ]
        )
    layout = BucketLayout(run_id, wheel.name)
    digest = fingerprint(settings, settings.scenario_path().read_text(), wheel, stack)
    return StackPlan(
        system, scenario, plan, run_id, layout, wheel, tags, placeholder, source, digest
    )


def build_wheel(out_dir: Path | None = None, source: SourceState | None = None) -> Path:
    """This checkout's wheel (into ``.cache/wheel/`` by default), the same bytes for the
    same commit (:mod:`infra.source`)."""
    source = source or source_state(ROOT)
    try:
        return _build(ROOT, out_dir or ROOT / ".cache" / "wheel", source.commit_time)
    except SourceError as exc:
        raise StackConfigError([str(exc)]) from None
