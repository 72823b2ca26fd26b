"""The run's machines and what they read: the broker cluster, the run's artifacts (wheel,
client scenario, manifest …) and the client fleet, which starts once both are there; the
user-data each machine boots with, and the run's manifest.

Everything here takes the results bucket's name as the run's guard hands it on
(:func:`infra.run_id.refuse_reuse`): a begun run is never deployed anew.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pulumi
import pulumi_aws as aws

from brokers.base import Endpoints
from brokers.cloud import CloudRecipe
from infra.access import RunAccess
from infra.constraints import read_lock
from infra.nodes import (
    BrokerCluster,
    BrokerClusterArgs,
    ClientFleet,
    ClientFleetArgs,
    DataVolume,
    MachineDefaults,
)
from infra.plan import (
    BrokerNode,
    ClientNode,
    FleetPlan,
    client_scenario,
    default_endpoints,
    fleet_composition,
)
from infra.settings import StackConfigError, StackSettings
from infra.stack_plan import StackPlan
from infra.storage import RunArtifacts, RunArtifactsArgs
from infra.userdata import (
    RunContext,
    analysis_entry,
    broker_user_data,
    client_user_data,
    missing_recipe_message,
)
from workload.model.manifest import (
    ManifestEndpoints,
    ManifestNode,
    ManifestSource,
    ManifestVolume,
    RunManifest,
)
from workload.model.scenario import Scenario

#: Without a cloud recipe nothing listens on the brokers; clients are placeholders too.
PLACEHOLDER_PORT = 1


@dataclass(frozen=True)
class RunMachines:
    """What the machines of a run are declared with, besides the settings and the plan."""

    context: RunContext
    defaults: MachineDefaults
    access: RunAccess
    #: The results bucket's name, once the run's guard let it through.
    bucket: pulumi.Output[str]
    endpoints: pulumi.Output[Endpoints]
    stack: str
    region: str
    #: The analysis job's packed Python environment, if built.
    environment: Path | None = None


def machine_zone(settings: StackSettings, types: list[str]) -> str:
    """The availability zone of every machine: the configured one, or the first available
    zone of the region; either must offer every instance type the stack runs (a
    :class:`StackConfigError` naming the zones that do, else)."""
    offered = aws.ec2.get_instance_type_offerings(
        location_type="availability-zone",
        filters=[aws.ec2.GetInstanceTypeOfferingsFilterArgs(name="instance-type", values=types)],
    )
    by_zone: dict[str, set[str]] = {}
    for kind, zone in zip(offered.instance_types, offered.locations, strict=True):
        by_zone.setdefault(zone, set()).add(kind)
    zones = [settings.availability_zone] if settings.availability_zone else []
    zones = zones or list(aws.get_availability_zones(state="available").names)
    for zone in zones:
        if set(types) <= by_zone.get(zone, set()):
            return zone
    where = ", ".join(sorted(z for z, kinds in by_zone.items() if set(types) <= kinds))
    fix = (
        f"set brokerbench:availabilityZone to one of {where}"
        if where
        else "no zone of the region offers them all; choose other instance types"
    )
    raise StackConfigError([f"{' and '.join(types)} not offered in {', '.join(zones)}: {fix}"])


def run_context(
    settings: StackSettings, target: StackPlan, region: str, secret_names: dict[str, str]
) -> RunContext:
    """What every machine's user-data is rendered from (the bucket and scenario added per
    machine)."""
    system = target.system
    return RunContext(
        system=system.name,
        title=system.title,
        run_id=target.run_id,
        scenario_name=target.scenario.name,
        region=region,
        wheel_key=target.layout.wheel_key,
        broker_wait_minutes=settings.broker_wait_minutes,
        client_instance_type=settings.client_instance_type,
        broker_instance_type=settings.broker_instance_type,
        placeholder=missing_recipe_message(system.name) if target.placeholder else "",
        fleet=fleet_composition(
            target.plan, settings.broker_instance_type, settings.client_instance_type
        ),
        secret_parameters=secret_names,
        faults=bool(target.scenario.faults),
        ttl_hours=settings.ttl_hours,
    )


def deploy_machines(settings: StackSettings, target: StackPlan, run: RunMachines) -> None:
    """The broker cluster, the run's artifacts and the client fleet (see the module)."""
    plan, layout = target.plan, target.layout
    brokers = BrokerCluster(
        "brokers",
        BrokerClusterArgs(
            nodes=plan.brokers,
            user_data=_broker_user_data(
                run.context, target.recipe, plan, target.scenario, run.bucket
            ),
            instance_type=settings.broker_instance_type,
            data_volume=DataVolume(
                settings.data_volume_gib,
                settings.data_volume_type,
                settings.data_volume_iops,
                settings.data_volume_throughput,
            ),
            defaults=run.defaults,
            profile=run.access.broker_profile,
        ),
    )
    scenario_toml = run.endpoints.apply(
        lambda e: client_scenario(settings.scenario_path(), e, plan.roles)
    )
    manifest = pulumi.Output.all(run.bucket, run.endpoints).apply(
        lambda v: run_manifest(v[0], v[1], settings, target, run)
    )
    artifacts = RunArtifacts(
        "artifacts",
        RunArtifactsArgs(
            run.bucket,
            layout,
            target.wheel,
            scenario_toml,
            manifest,
            analysis_entry(target.run_id, settings.analysis_module),
            read_lock(),
            run.environment,
        ),
    )
    ClientFleet(
        "clients",
        ClientFleetArgs(
            nodes=plan.clients,
            user_data={
                node.name: _client_user_data(run.context, node, run.bucket, scenario_toml)
                for node in plan.clients
            },
            instance_type=settings.client_instance_type,
            profile=run.access.client_profile,
            defaults=run.defaults,
            after=(artifacts, brokers),
        ),
    )


def broker_endpoints(recipe: CloudRecipe | None, plan: FleetPlan) -> Endpoints:
    """Where clients connect: the recipe's ``endpoints`` (a placeholder without a recipe)."""
    if recipe is None:
        return default_endpoints(plan.cluster, [PLACEHOLDER_PORT])
    return recipe.endpoints(plan.cluster)


def _broker_user_data(
    context: RunContext,
    recipe: CloudRecipe | None,
    plan: FleetPlan,
    scenario: Scenario,
    bucket: pulumi.Output[str],
) -> dict[str, pulumi.Input[str]]:
    """Each broker node's user-data (with the bucket, where its fault agent reads markers)."""
    params = scenario.broker_params()

    def renderer(node: BrokerNode) -> Callable[[str], str]:
        return lambda name: broker_user_data(
            replace(context, bucket=name), node, recipe, plan.cluster, params
        )

    return {node.name: bucket.apply(renderer(node)) for node in plan.brokers}


def _client_user_data(
    context: RunContext,
    node: ClientNode,
    bucket: pulumi.Output[str],
    scenario_toml: pulumi.Output[str],
) -> pulumi.Output[str]:
    def render(values: list[Any]) -> str:
        return client_user_data(replace(context, bucket=values[0], scenario_toml=values[1]), node)

    return pulumi.Output.all(bucket, scenario_toml).apply(render)


def run_manifest(
    bucket: str, endpoints: Endpoints, settings: StackSettings, target: StackPlan, run: RunMachines
) -> str:
    """What the cloud commands (and the run context) need to know about this deployment."""
    system, scenario, plan, layout = target.system, target.scenario, target.plan, target.layout
    recipe = target.recipe
    return RunManifest(
        run_id=layout.run_id,
        stack=run.stack,
        system=system.name,
        title=system.title,
        scenario=scenario.name,
        scenario_file=str(settings.scenario),
        region=run.region,
        bucket=bucket,
        run_prefix=layout.run_prefix,
        topology=plan.roles,
        replication=system.reference_topology.replication,
        caveats=list(system.caveats),
        broker_instance_type=settings.broker_instance_type,
        client_instance_type=settings.client_instance_type,
        data_volume=ManifestVolume(gib=settings.data_volume_gib, type=settings.data_volume_type),
        brokers=[ManifestNode(role=n.role, index=n.index, address=n.address) for n in plan.brokers],
        clients=[ManifestNode(role=n.role, index=n.index, address=n.address) for n in plan.clients],
        points=list(plan.points),
        endpoints=ManifestEndpoints(hosts=list(endpoints.hosts), extra=dict(endpoints.extra)),
        emr_python=settings.emr_python,
        emr_environment=layout.environment_key if run.environment is not None else "",
        ttl_hours=settings.ttl_hours,
        source=ManifestSource(commit=target.source.commit, dirty=target.source.dirty),
        settings=settings.model_dump(
            mode="json", by_alias=True, exclude_none=True, exclude={"wheel"}
        ),
        fingerprint=target.fingerprint,
        client_versions=read_lock().pins,
        broker_install=recipe.install_commands() if recipe is not None and plan.brokers else [],
    ).to_json()
