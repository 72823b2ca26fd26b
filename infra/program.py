"""The Pulumi program of every stack: config → system (from the registry) → components.

``stacks/__main__.py`` calls :func:`main`. :func:`build` is the same program as a
function of typed settings, so tests run it under Pulumi's mocks. Nothing here knows a
broker by name: the system's topology and cloud recipe decide the broker machines, the
scenario decides the client fleet. A system AWS runs for it (a managed queue) has no
broker machines; its recipe's :class:`~brokers.base.ManagedService` becomes the resource
the clients use (:mod:`infra.queue`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pulumi
import pulumi_aws as aws

from brokers.base import BrokerSystem, Endpoints
from brokers.cloud import CloudRecipe, ManagedService
from infra.access import RunAccess, RunAccessArgs
from infra.analysis import AnalysisApp, AnalysisAppArgs
from infra.constraints import client_constraints
from infra.instances import bandwidth_problems
from infra.network import Network, NetworkArgs
from infra.nodes import (
    BrokerCluster,
    BrokerClusterArgs,
    ClientFleet,
    ClientFleetArgs,
    DataVolume,
    MachineDefaults,
    cluster_placement_group,
)
from infra.plan import (
    BrokerNode,
    BucketLayout,
    ClientNode,
    FleetPlan,
    client_scenario,
    default_endpoints,
    fleet_composition,
    stack_fleet,
)
from infra.pyenv import (
    PackError,
    analysis_constraints,
    build_environment,
    default_out_dir,
    find_python_home,
)
from infra.queue import ManagedQueue, ManagedQueueArgs
from infra.secrets import StackSecrets, StackSecretsArgs
from infra.settings import (
    NAMESPACE,
    ROOT,
    StackConfigError,
    StackSettings,
    deprecations,
    settings_from_config,
    unpinned_ami,
)
from infra.source import SourceError, SourceState, source_state
from infra.source import build_wheel as _build
from infra.storage import ResultsBucket, ResultsBucketArgs, RunArtifacts, RunArtifactsArgs
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
class Deployment:
    """What a stack exports (``pulumi stack output``)."""

    run_id: str
    bucket: pulumi.Output[str]
    region: str
    broker_endpoints: pulumi.Output[list[str]]
    broker_nodes: dict[str, str]
    client_nodes: dict[str, str]
    emr_application_id: pulumi.Output[str]
    emr_execution_role_arn: pulumi.Output[str]
    layout: BucketLayout
    plan: FleetPlan
    placeholder: bool

    def exports(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "bucket": self.bucket,
            "region": self.region,
            "results_uri": self.bucket.apply(lambda b: f"s3://{b}/{self.layout.run_prefix}"),
            "broker_endpoints": self.broker_endpoints,
            "broker_nodes": self.broker_nodes,
            "client_nodes": self.client_nodes,
            "emr_application_id": self.emr_application_id,
            "emr_execution_role_arn": self.emr_execution_role_arn,
            "manifest_key": self.layout.manifest_key,
        }


def main() -> None:
    """Entry point of ``pulumi up``: read config, build, export."""
    config = {**pulumi.runtime.config.get_config_env(), **pulumi.runtime.config.CONFIG.get()}
    settings = settings_from_config(config, source=f"stacks/Pulumi.{pulumi.get_stack()}.yaml")
    region = pulumi.Config("aws").get("region")
    if not region:
        raise StackConfigError(["aws:region is not set: pulumi config set aws:region us-east-1"])
    source = source_state(ROOT)
    refusal = source.refusal(f"{NAMESPACE}:allowDirty")
    if refusal and not settings.allow_dirty:
        raise StackConfigError([refusal])
    if refusal:
        pulumi.log.warn(f"deploying as {NAMESPACE}:allowDirty allows: {refusal.split(':')[0]}")
    deployment = build(settings, pulumi.get_stack(), region, source=source)
    for key, value in deployment.exports().items():
        pulumi.export(key, value)


@dataclass(frozen=True)
class StackPlan:
    """What one stack deploys, decided before any resource is declared: the system, the
    scenario as its client machines get it, the fleet, the run's id and bucket layout."""

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
    another system or a topology without broker nodes and no managed service."""
    fleet = stack_fleet(settings)
    system, scenario, plan = fleet.system, fleet.scenario, fleet.plan
    if scenario.broker.system != system.name:
        raise StackConfigError(
            [f"{settings.scenario}: is a {scenario.broker.system} scenario, not {system.name}"]
        )
    run_id = settings.resolved_run_id(stack, scenario.name)
    source = source or source_state(ROOT)
    wheel = wheel or settings.wheel or build_wheel(source=source)
    tags = {
        "brokerbench:run": run_id,
        "brokerbench:system": system.name,
        "brokerbench:stack": stack,
    }
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
    return StackPlan(system, scenario, plan, run_id, layout, wheel, tags, placeholder, source)


def build(
    settings: StackSettings,
    stack: str,
    region: str,
    wheel: Path | None = None,
    source: SourceState | None = None,
) -> Deployment:
    """Declare every resource of one stack (``source``: the checkout, read when None)."""
    if not settings.ami:  # a looked-up image would change under a running fleet
        raise StackConfigError([unpinned_ami(region)])
    target = plan_stack(settings, stack, wheel, source)
    scenario, plan, layout, tags = target.scenario, target.plan, target.layout, target.tags
    managed = target.managed
    zone = settings.availability_zone or aws.get_availability_zones(state="available").names[0]
    network = Network(
        "net",
        NetworkArgs(
            settings.vpc_cidr, settings.subnet_cidr, zone, region, settings.admin_cidr, tags
        ),
    )
    bucket = ResultsBucket("results", ResultsBucketArgs(tags))
    queue = (
        ManagedQueue("queue", ManagedQueueArgs(managed, region, tags))
        if managed is not None
        else None
    )
    secrets = (
        StackSecrets("secrets", StackSecretsArgs(target.run_id, tags)) if plan.brokers else None
    )
    access = RunAccess(
        "access",
        RunAccessArgs(
            bucket.name,
            layout,
            tags,
            managed_arn=queue.arn if queue is not None else None,
            managed_actions=managed.client_actions if managed is not None else (),
            secret_arns=secrets.arns if secrets is not None else {},
            faults=bool(scenario.faults) and bool(plan.brokers),
        ),
    )
    analysis = AnalysisApp(
        "analysis",
        AnalysisAppArgs(
            settings.emr_release, settings.emr_max_vcpu, tags, image_uri=settings.emr_image
        ),
    )
    endpoints: pulumi.Output[Endpoints] = (
        queue.endpoints
        if queue is not None
        else pulumi.Output.from_input(_broker_endpoints(target.recipe, plan))
    )
    context = _run_context(settings, target, region, secrets)
    for instance_type in sorted({settings.broker_instance_type, settings.client_instance_type}):
        for line in bandwidth_problems(instance_type):
            pulumi.log.warn(line)
    placement = cluster_placement_group("machines", tags) if settings.placement_group else None
    machines = MachineDefaults(
        ami=settings.ami,
        subnet_id=network.subnet_id,
        security_group_id=network.security_group_id,
        root_volume_gib=settings.root_volume_gib,
        tags=tags,
        key_name=settings.key_name,
        public_ip=network.public_nodes,
        placement_group=placement.name if placement is not None else None,
    )
    environment = analysis_environment(settings, target)
    _machines(
        settings, target, context, machines, access, bucket, endpoints, stack, region, environment
    )
    return Deployment(
        run_id=target.run_id,
        bucket=bucket.name,
        region=region,
        broker_endpoints=endpoints.apply(lambda e: list(e.hosts)),
        broker_nodes={n.name: n.address for n in plan.brokers},
        client_nodes={n.name: n.address for n in plan.clients},
        emr_application_id=analysis.application_id,
        emr_execution_role_arn=access.analysis_role_arn,
        layout=layout,
        plan=plan,
        placeholder=target.placeholder,
    )


def _run_context(
    settings: StackSettings, target: StackPlan, region: str, secrets: StackSecrets | None
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
        secret_parameters=secrets.names if secrets is not None else {},
        faults=bool(target.scenario.faults),
        ttl_hours=settings.ttl_hours,
    )


def _machines(
    settings: StackSettings,
    target: StackPlan,
    context: RunContext,
    defaults: MachineDefaults,
    access: RunAccess,
    bucket: ResultsBucket,
    endpoints: pulumi.Output[Endpoints],
    stack: str,
    region: str,
    environment: Path | None = None,
) -> None:
    """The broker cluster, the run's artifacts (wheel, client scenario, manifest …) and the
    client fleet, which starts once both are there."""
    system, plan, layout = target.system, target.plan, target.layout
    brokers = BrokerCluster(
        "brokers",
        BrokerClusterArgs(
            nodes=plan.brokers,
            user_data=_broker_user_data(
                context, system, target.recipe, plan, target.scenario, bucket.name
            ),
            instance_type=settings.broker_instance_type,
            data_volume=DataVolume(
                settings.data_volume_gib,
                settings.data_volume_type,
                settings.data_volume_iops,
                settings.data_volume_throughput,
            ),
            defaults=defaults,
            profile=access.broker_profile,
        ),
    )
    scenario_toml = endpoints.apply(
        lambda e: client_scenario(settings.scenario_path(), e, plan.roles)
    )
    manifest = pulumi.Output.all(bucket.name, endpoints).apply(
        lambda v: _manifest(v[0], v[1], settings, target, stack, region, environment is not None)
    )
    artifacts = RunArtifacts(
        "artifacts",
        RunArtifactsArgs(
            bucket.name,
            layout,
            target.wheel,
            scenario_toml,
            manifest,
            analysis_entry(target.run_id, settings.analysis_module),
            client_constraints(),
            environment,
        ),
    )
    ClientFleet(
        "clients",
        ClientFleetArgs(
            nodes=plan.clients,
            user_data={
                node.name: _client_user_data(context, node, bucket.name, scenario_toml)
                for node in plan.clients
            },
            instance_type=settings.client_instance_type,
            profile=access.client_profile,
            defaults=defaults,
            after=(artifacts, brokers),
        ),
    )


def _broker_endpoints(recipe: CloudRecipe | None, plan: FleetPlan) -> Endpoints:
    """Where clients connect: the recipe's ``endpoints`` (a placeholder without a recipe)."""
    if recipe is None:
        return default_endpoints(plan.cluster, [PLACEHOLDER_PORT])
    return recipe.endpoints(plan.cluster)


def _broker_user_data(
    context: RunContext,
    system: BrokerSystem[Any],
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


def _manifest(
    bucket: str,
    endpoints: Endpoints,
    settings: StackSettings,
    target: StackPlan,
    stack: str,
    region: str,
    environment: bool = False,
) -> str:
    """What the cloud commands (and the run context) need to know about this deployment."""
    system, scenario, plan, layout = target.system, target.scenario, target.plan, target.layout
    return RunManifest(
        run_id=layout.run_id,
        stack=stack,
        system=system.name,
        title=system.title,
        scenario=scenario.name,
        scenario_file=str(settings.scenario),
        region=region,
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
        emr_environment=layout.environment_key if environment else "",
        ttl_hours=settings.ttl_hours,
        source=ManifestSource(commit=target.source.commit, dirty=target.source.dirty),
    ).to_json()


def analysis_environment(settings: StackSettings, target: StackPlan) -> Path | None:
    """The analysis job's packed Python environment (:mod:`infra.pyenv`): none with a custom
    image (it brings its Python), nor without an interpreter to pack (a warning says so)."""
    if settings.emr_image:
        return None
    try:
        home = find_python_home(settings.emr_python_home)
        if home is None:
            pulumi.log.warn(
                "no relocatable CPython >= 3.11 for x86_64 Linux to pack for the analysis "
                f"job: run uv python install 3.11 (or set {NAMESPACE}:emrPythonHome, or "
                f"{NAMESPACE}:emrImage) and pulumi up again; until then cloud analyze refuses"
            )
            return None
        pins = analysis_constraints(home.version)
        return build_environment(
            home, target.wheel, pins.pins, default_out_dir(), target.source.commit_time
        )
    except PackError as exc:
        raise StackConfigError([f"{NAMESPACE}:emrPythonHome: {exc}"]) from None


def build_wheel(out_dir: Path | None = None, source: SourceState | None = None) -> Path:
    """This checkout's wheel (into ``.cache/wheel/`` by default), the same bytes for the
    same commit (:mod:`infra.source`)."""
    source = source or source_state(ROOT)
    try:
        return _build(ROOT, out_dir or ROOT / ".cache" / "wheel", source.commit_time)
    except SourceError as exc:
        raise StackConfigError([str(exc)]) from None
