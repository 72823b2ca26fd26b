"""What a stack deploys, computed before any cloud resource exists (no Pulumi here).

From the system's topology and the scenario's sweep points: every broker node (role,
index, fixed private address), the client fleet (enough sender and receiver machines for
the largest sweep point), the S3 layout of the run and the scenario TOML the client
machines receive (the same scenario, pointed at the AWS brokers). Private addresses are
fixed so that every node's configuration can name its peers before the machines exist.
"""

from __future__ import annotations

import ipaddress
import tomllib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import toml

from brokers import registry
from brokers.base import BrokerSystem, Endpoints
from infra.settings import StackSettings
from workload.model.layout import LAYOUT
from workload.model.manifest import ManifestPoint
from workload.model.scenario import Scenario, expand
from workload.model.scenario_file import parse_scenario
from workload.model.sweep import SweepPoint

#: Host numbers inside the subnet: brokers from 10, clients from 100.
BROKER_HOST_BASE = 10
CLIENT_HOST_BASE = 100


@dataclass(frozen=True)
class Node:
    """A machine of the stack: its role, its index among the role's machines, its address."""

    role: str
    index: int
    address: str

    @property
    def name(self) -> str:
        return f"{self.role}-{self.index}"


class BrokerNode(Node):
    """A broker machine, in a role of the system's topology."""


class ClientNode(Node):
    """A client machine: role "sender" or "receiver"."""


@dataclass(frozen=True)
class BucketLayout:
    """Where a run's files live in the results bucket.

    ``runs/<run-id>/`` mirrors a local ``RESULTS_DIR/<run-id>/`` (clients write here; its
    names are :class:`workload.model.layout.RunLayout`'s); ``artifacts/<run-id>/`` holds what the
    stack uploads (clients only read it).
    """

    run_id: str
    wheel_name: str

    @property
    def run_prefix(self) -> str:
        return LAYOUT.prefix(self.run_id)

    @property
    def artifacts_prefix(self) -> str:
        return f"artifacts/{self.run_id}/"

    @property
    def analysis_prefix(self) -> str:
        return f"{self.run_prefix}{LAYOUT.analysis}/"

    @property
    def wheel_key(self) -> str:
        return f"{self.artifacts_prefix}{self.wheel_name}"

    @property
    def constraints_key(self) -> str:
        """The pip constraints client machines install the wheel with (:mod:`infra.constraints`)."""
        return f"{self.artifacts_prefix}constraints.txt"

    @property
    def py_files_key(self) -> str:
        """The same wheel under a ``.zip`` name, for Spark's ``--py-files``."""
        return f"{self.artifacts_prefix}brokerbench.zip"

    @property
    def environment_key(self) -> str:
        """The analysis job's packed Python environment (:mod:`infra.pyenv`)."""
        return f"{self.artifacts_prefix}pyenv.tar.gz"

    @property
    def scenario_key(self) -> str:
        return f"{self.artifacts_prefix}scenario.toml"

    @property
    def manifest_key(self) -> str:
        """The run's manifest, kept with its results (the next run's ``up`` leaves it)."""
        return f"{self.run_prefix}manifest.json"

    @property
    def legacy_manifest_key(self) -> str:
        """Where a run deployed before the manifest moved to its results keeps it."""
        return f"{self.artifacts_prefix}manifest.json"

    @property
    def entry_key(self) -> str:
        return f"{self.artifacts_prefix}analysis_entry.py"


@dataclass(frozen=True)
class FleetPlan:
    roles: dict[str, int]
    brokers: tuple[BrokerNode, ...]
    senders: tuple[ClientNode, ...]
    receivers: tuple[ClientNode, ...]
    points: tuple[ManifestPoint, ...]

    @property
    def cluster(self) -> dict[str, list[str]]:
        """Every role of the topology → its nodes' private addresses (index order)."""
        found: dict[str, list[str]] = {role: [] for role in self.roles}
        for node in self.brokers:
            found[node.role].append(node.address)
        return found

    @property
    def clients(self) -> tuple[ClientNode, ...]:
        return self.senders + self.receivers


class PlanError(ValueError):
    pass


def plan_fleet(roles: dict[str, int], points: list[SweepPoint], subnet_cidr: str) -> FleetPlan:
    """Broker nodes for ``roles`` and clients for the largest sweep point, with addresses."""
    subnet = ipaddress.ip_network(subnet_cidr)
    point_plans = tuple(ManifestPoint.of(p) for p in points)
    senders = max((p.senders for p in point_plans), default=0)
    receivers = max((p.receivers for p in point_plans), default=0)
    broker_count = sum(roles.values())
    if BROKER_HOST_BASE + broker_count > CLIENT_HOST_BASE:
        raise PlanError(f"{broker_count} broker nodes do not fit the address plan (max 90)")
    last_client = CLIENT_HOST_BASE + senders + receivers
    if last_client >= subnet.num_addresses - 1:
        raise PlanError(f"{senders + receivers} client nodes do not fit subnet {subnet}")

    def address(host: int) -> str:
        return str(subnet.network_address + host)

    brokers: list[BrokerNode] = []
    for role, count in roles.items():
        for index in range(count):
            brokers.append(BrokerNode(role, index, address(BROKER_HOST_BASE + len(brokers))))
    sender_nodes = tuple(
        ClientNode("sender", i, address(CLIENT_HOST_BASE + i)) for i in range(senders)
    )
    receiver_nodes = tuple(
        ClientNode("receiver", i, address(CLIENT_HOST_BASE + senders + i)) for i in range(receivers)
    )
    return FleetPlan(dict(roles), tuple(brokers), sender_nodes, receiver_nodes, point_plans)


def default_endpoints(cluster: dict[str, list[str]], ports: list[int]) -> Endpoints:
    """Every broker node on the first client port: what a recipe without ``endpoints`` gets."""
    if not ports:
        raise PlanError("the cloud recipe names no ports; clients would not know where to connect")
    return Endpoints(
        hosts=tuple(f"{address}:{ports[0]}" for nodes in cluster.values() for address in nodes)
    )


def stack_scenario(scenario_file: Path, roles: dict[str, int]) -> Scenario:
    """The scenario as a stack deploys it, validated as its client machines will read it
    (deployment = 'endpoints' on the stack's brokers, faults on ``roles``)."""
    text = client_scenario(scenario_file, Endpoints(("10.0.0.1:1",)), roles)
    return parse_scenario(tomllib.loads(text), f"{scenario_file.name} (for AWS)")


def client_scenario(
    scenario_file: Path, endpoints: Endpoints, roles: dict[str, int] | None = None
) -> str:
    """The scenario as TOML for the client machines: same load, the AWS brokers as endpoints.

    The result is validated like any scenario file before it is returned.
    """
    text = scenario_file.read_text(encoding="utf-8")
    data: dict[str, Any] = tomllib.loads(text)
    broker = dict(data.get("broker", {}))
    broker.pop("topology", None)
    broker["deployment"] = "endpoints"
    broker["endpoints"] = list(endpoints.hosts)
    broker.pop("options", None)
    if endpoints.extra:
        broker["options"] = dict(endpoints.extra)
    if data.get("faults") and roles is not None:
        broker["aws_topology"] = dict(roles)
    data["broker"] = broker
    header = (
        f"# {scenario_file.name}, pointed at the brokers of this stack (written by brokerbench)\n"
    )
    rendered = header + toml.dumps(data)
    parse_scenario(tomllib.loads(rendered), f"{scenario_file.name} (for AWS)")
    return rendered


@dataclass(frozen=True)
class StackFleet:
    """The machines a stack's settings deploy: the system, the scenario as the client
    machines get it, and the fleet planned for it."""

    system: BrokerSystem[Any]
    scenario: Scenario
    plan: FleetPlan


def stack_fleet(settings: StackSettings, scenario_file: Path | None = None) -> StackFleet:
    """What ``settings`` deploy (``scenario_file`` in place of the stack's scenario): the
    system's reference topology unless ``roles`` replaces it, clients for the largest point."""
    system = registry.get(settings.system)
    roles = settings.roles if settings.roles is not None else system.reference_topology.roles
    scenario = stack_scenario(scenario_file or settings.scenario_path(), roles)
    return StackFleet(system, scenario, plan_fleet(roles, expand(scenario), settings.subnet_cidr))


def fleet_composition(plan: FleetPlan, broker_type: str, client_type: str) -> dict[str, int]:
    """Instance type → count over the broker cluster and the client fleet."""
    # Counter's sum leaves out the types of no machine.
    fleet = Counter({broker_type: len(plan.brokers)}) + Counter({client_type: len(plan.clients)})
    return dict(fleet)
