"""The Pulumi program of every stack: config → system (from the registry) → components.

``stacks/__main__.py`` calls :func:`main`. :func:`build` is the same program as a
function of typed settings, so tests run it under Pulumi's mocks. Nothing here knows a
broker by name: the system's topology and cloud recipe decide the broker machines, the
scenario decides the client fleet (:mod:`infra.stack_plan`, :mod:`infra.machines`). A
system AWS runs for it (a managed queue) has no broker machines; its recipe's
:class:`~brokers.base.ManagedService` becomes the resource the clients use
(:mod:`infra.queue`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pulumi

from brokers.base import Endpoints
from infra.access import RunAccess, RunAccessArgs
from infra.analysis import AnalysisApp, AnalysisAppArgs
from infra.budget import ttl_problems
from infra.instances import bandwidth_problems
from infra.machines import (
    RunMachines,
    broker_endpoints,
    deploy_machines,
    machine_zone,
    run_context,
)
from infra.network import Network, NetworkArgs
from infra.nodes import MachineDefaults, cluster_placement_group
from infra.plan import BucketLayout, FleetPlan, fleet_composition
from infra.pyenv import (
    PackError,
    analysis_constraints,
    build_environment,
    default_out_dir,
    find_python_home,
)
from infra.queue import ManagedQueue, ManagedQueueArgs
from infra.run_id import refuse_reuse, run_id_for
from infra.secrets import StackSecrets, StackSecretsArgs
from infra.settings import (
    NAMESPACE,
    ROOT,
    STACKS_DIR,
    StackConfigError,
    StackSettings,
    settings_from_config,
    unpinned_ami,
)
from infra.source import SourceState, source_state
from infra.stack_plan import StackPlan, build_wheel, plan_stack
from infra.storage import ResultsBucket, ResultsBucketArgs
from workload.model.scenario_file import load_scenario

__all__ = ["Deployment", "build", "build_wheel", "fleet_composition", "main"]

#: What the shell checks before anything is declared (the cost cap needs the price table,
#: which infra does not read): one line per problem, the deployment refused if any.
Guard = Callable[[StackSettings, str, str], list[str]]


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


def main(guard: Guard | None = None) -> None:
    """Entry point of ``pulumi up``: read config, check it, build, export."""
    config = {**pulumi.runtime.config.get_config_env(), **pulumi.runtime.config.CONFIG.get()}
    stack = pulumi.get_stack()
    stack_file = STACKS_DIR / f"Pulumi.{stack}.yaml"
    settings = settings_from_config(config, source=f"stacks/{stack_file.name}")
    region = pulumi.Config("aws").get("region")
    if not region:
        raise StackConfigError(["aws:region is not set: pulumi config set aws:region us-east-1"])
    source = source_state(ROOT)
    refusal = source.refusal(f"{NAMESPACE}:allowDirty")
    if refusal and not settings.allow_dirty:
        raise StackConfigError([refusal])
    if refusal:
        pulumi.log.warn(f"deploying as {NAMESPACE}:allowDirty allows: {refusal.split(':')[0]}")
    scenario = load_scenario(settings.scenario_path())
    problems = ttl_problems(settings, scenario) + (guard(settings, stack, region) if guard else [])
    if problems:
        raise StackConfigError(problems)
    run_id = run_id_for(settings, scenario.name, stack_file)
    settings = settings.model_copy(update={"run_id": run_id})
    deployment = build(settings, stack, region, source=source)
    for key, value in deployment.exports().items():
        pulumi.export(key, value)


@dataclass(frozen=True)
class Shared:
    """The resources of a stack the machines use: network, bucket, access, analysis."""

    network: Network
    bucket: ResultsBucket
    #: The bucket's name once the run's guard let it through (:func:`refuse_reuse`).
    guarded: pulumi.Output[str]
    access: RunAccess
    analysis: AnalysisApp
    endpoints: pulumi.Output[Endpoints]
    secret_names: dict[str, str]


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
    shared = _shared(settings, target, region)
    for instance_type in sorted({settings.broker_instance_type, settings.client_instance_type}):
        for line in bandwidth_problems(instance_type):
            pulumi.log.warn(line)
    placement = (
        cluster_placement_group("machines", target.tags) if settings.placement_group else None
    )
    defaults = MachineDefaults(
        ami=settings.ami,
        subnet_id=shared.network.subnet_id,
        security_group_id=shared.network.security_group_id,
        root_volume_gib=settings.root_volume_gib,
        tags=target.tags,
        key_name=settings.key_name,
        public_ip=shared.network.public_nodes,
        placement_group=placement.name if placement is not None else None,
    )
    context = run_context(settings, target, region, shared.secret_names)
    environment = analysis_environment(settings, target)
    machines = RunMachines(
        context, defaults, shared.access, shared.guarded, shared.endpoints, stack, region,
        environment,
    )  # fmt: skip
    deploy_machines(settings, target, machines)
    plan = target.plan
    return Deployment(
        run_id=target.run_id,
        bucket=shared.bucket.name,
        region=region,
        broker_endpoints=shared.endpoints.apply(lambda e: list(e.hosts)),
        broker_nodes={n.name: n.address for n in plan.brokers},
        client_nodes={n.name: n.address for n in plan.clients},
        emr_application_id=shared.analysis.application_id,
        emr_execution_role_arn=shared.access.analysis_role_arn,
        layout=target.layout,
        plan=plan,
        placeholder=target.placeholder,
    )


def _shared(settings: StackSettings, target: StackPlan, region: str) -> Shared:
    """The network (in a zone that offers the stack's instance types), the results bucket
    and the run's guard on it, the managed queue, the secrets, IAM and the EMR application."""
    plan, tags, managed = target.plan, target.tags, target.managed
    types = sorted(
        {settings.client_instance_type}
        | ({settings.broker_instance_type} if plan.brokers else set())
    )
    zone = machine_zone(settings, types)
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
            target.layout,
            tags,
            managed_arn=queue.arn if queue is not None else None,
            managed_actions=managed.client_actions if managed is not None else (),
            secret_arns=secrets.arns if secrets is not None else {},
            faults=bool(target.scenario.faults) and bool(plan.brokers),
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
        else pulumi.Output.from_input(broker_endpoints(target.recipe, plan))
    )
    guarded = refuse_reuse(bucket.name, target.run_id, target.fingerprint)
    names = secrets.names if secrets is not None else {}
    return Shared(network, bucket, guarded, access, analysis, endpoints, names)


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
