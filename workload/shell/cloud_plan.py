"""``brokerbench cloud plan --stack NAME``: what a stack would run and cost, before ``up``.

Everything comes from the stack's file (``stacks/Pulumi.<stack>.yaml``, read as the Pulumi
program reads it) and the price table shipped with the analysis: each machine role's count
and instance type, the fleet's on-demand price per hour, the estimated cost of the
scenario's sweep, and the account quotas the stack needs. Only the quota check talks to
AWS (Service Quotas), and only when credentials are there; a quota smaller than the need
is one line on stderr and exit 1.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from analysis.prices import PriceTable, load_prices
from infra.instances import BANDWIDTH, bandwidth_problems
from infra.plan import StackFleet, stack_fleet
from infra.settings import StackConfig, StackConfigError, load_stack_config, stack_path
from workload.model.errors import UserError, one_line
from workload.model.scenario import expand

#: Seconds a sweep point takes besides its sending duration: preparing the destination,
#: starting every node in step, receivers draining, uploading the records. An assumption.
POINT_OVERHEAD_S = 90.0
#: Instance families EC2's "Running On-Demand Standard" vCPU quota counts.
STANDARD_FAMILIES = ("a", "c", "d", "h", "i", "m", "r", "t", "z")


@dataclass(frozen=True)
class MachineRole:
    """Machines of one role: broker roles of the topology, senders, receivers."""

    role: str
    count: int
    instance_type: str


@dataclass(frozen=True)
class QuotaNeed:
    """What the stack needs of one Service Quotas quota."""

    service: str
    code: str
    title: str
    need: int


@dataclass(frozen=True)
class QuotaCheck:
    """The needs against the account's quotas: ``checked`` False says why not."""

    checked: bool
    reason: str = ""
    #: Quota code → the account's value (only when checked).
    values: dict[str, float] | None = None

    def problems(self, needs: list[QuotaNeed]) -> list[str]:
        values = self.values or {}
        return [
            f"quota too small: {n.title} ({n.code}): the stack needs {n.need}, the quota is "
            f"{values[n.code]:g}; ask for more in Service Quotas"
            for n in needs
            if n.code in values and values[n.code] < n.need
        ]


def machine_roles(fleet: StackFleet, broker_type: str, client_type: str) -> list[MachineRole]:
    """Every role with machines: the broker roles, then senders and receivers."""
    plan = fleet.plan
    roles = [MachineRole(role, n, broker_type) for role, n in plan.roles.items() if n]
    for role, nodes in (("sender", plan.senders), ("receiver", plan.receivers)):
        if nodes:
            roles.append(MachineRole(role, len(nodes), client_type))
    return roles


def quota_needs(
    roles: list[MachineRole], prices: PriceTable, nat_gateway: bool
) -> tuple[list[QuotaNeed], list[str]]:
    """The quotas the stack uses and lines for what cannot be counted (types without a vCPU
    count, types outside the standard families)."""
    vcpus, notes = 0, []
    for role in roles:
        if not role.instance_type.startswith(STANDARD_FAMILIES):
            notes.append(f"{role.instance_type}: not a standard family; its vCPUs are not counted")
        elif role.instance_type not in prices.vcpus:
            notes.append(f"{role.instance_type}: no vCPU count in table {prices.version}")
        else:
            vcpus += role.count * prices.vcpus_of(role.instance_type)
    needs = [
        QuotaNeed("ec2", "L-1216C47A", "Running On-Demand Standard instances, vCPUs", vcpus),
        QuotaNeed("vpc", "L-F678F1CE", "VPCs per region", 1),
        QuotaNeed("ec2", "L-0263D0A3", "EC2-VPC Elastic IPs", 1 if nat_gateway else 0),
    ]
    return needs, notes


def quota_client(region: str | None) -> Any:
    """A Service Quotas client, or a :class:`LookupError` saying why there is none."""
    import boto3

    session = boto3.Session(region_name=region)
    if session.get_credentials() is None:
        raise LookupError("no AWS credentials")
    if not session.region_name:
        raise LookupError("no region (aws:region in the stack, or --region)")
    return session.client("service-quotas")


def check_quotas(client: Any, needs: list[QuotaNeed]) -> QuotaCheck:
    """The account's value of every needed quota; the first failure says why none is."""
    values: dict[str, float] = {}
    for need in needs:
        try:
            answer = client.get_service_quota(ServiceCode=need.service, QuotaCode=need.code)
            values[need.code] = float(answer["Quota"]["Value"])
        except Exception as exc:  # credentials, permissions, network: one line, not a trace
            return QuotaCheck(False, f"{need.code}: {one_line(str(exc))}")
    return QuotaCheck(True, values=values)


def sweep_seconds(fleet: StackFleet) -> float:
    """The sweep's estimated duration: each point's sending duration and the overhead."""
    return sum(p.load.duration + POINT_OVERHEAD_S for p in expand(fleet.scenario))


def ttl_line(ttl_hours: int, fleet: StackFleet) -> str:
    """When the machines stop themselves, and whether the sweep's estimate fits before."""
    if not ttl_hours:
        return "ttl: none (brokerbench:ttlHours 0): the machines run until cloud down"
    fits = sweep_seconds(fleet) < ttl_hours * 3600
    return f"ttl: every machine stops itself {ttl_hours} h after boot (brokerbench:ttlHours); " + (
        "the sweep's estimate fits" if fits else "the sweep's estimate does NOT fit: raise it"
    )


def sweep_lines(fleet: StackFleet, hourly: float | None, currency: str) -> list[str]:
    """The sweep's points, its estimated duration and cost."""
    points = expand(fleet.scenario)
    seconds = sweep_seconds(fleet)
    cost = f", {hourly * seconds / 3600:.2f} {currency}" if hourly is not None else ""
    return [
        f"sweep of {fleet.scenario.name}: {len(points)} point(s), each its sending duration + "
        f"{POINT_OVERHEAD_S:g} s (assumed: prepare, start, drain, upload) = "
        f"{seconds / 60:.1f} min{cost} (booting and idle time not counted)"
    ]


def fleet_lines(
    roles: list[MachineRole], prices: PriceTable, region: str | None
) -> tuple[list[str], float | None]:
    """One line per role with its price, the fleet's total per hour (None if a price is
    missing)."""
    lines, total = [], 0.0
    unpriced = False
    for role in roles:
        try:
            each = prices.hourly(region or "", role.instance_type)
        except KeyError as exc:
            unpriced = True
            price = f"no price: {exc.args[0]}"
        else:
            total += each * role.count
            price = f"{each:.4f} {prices.currency}/h each"
        lines.append(f"  {role.role:<12} {role.count:>3} × {role.instance_type:<12} {price}")
    count = sum(r.count for r in roles)
    if unpriced:
        lines.append(f"fleet: {count} machines, price per hour unknown")
        return lines, None
    lines.append(
        f"fleet: {count} machines, {total:.2f} {prices.currency}/hour on demand in {region} "
        f"(price table {prices.version}: {prices.source}; volumes, NAT gateway, S3 and EMR "
        "not included)"
    )
    return lines, total


def machine_lines(roles: list[MachineRole], placement_group: bool) -> list[str]:
    """Each instance type's bandwidth (sustained or burst) and where the machines are placed."""
    lines = []
    for instance_type in sorted({r.instance_type for r in roles}):
        problems = bandwidth_problems(instance_type)
        if problems:
            lines += [f"bandwidth: {line}" for line in problems]
        else:
            lines.append(f"bandwidth: {instance_type}: {BANDWIDTH[instance_type].describe()}")
    lines.append(
        "placement: every machine in one cluster placement group"
        if placement_group
        else "placement: no placement group (brokerbench:placementGroup false)"
    )
    return lines


def plan_report(config: StackConfig, scenario: Path | None) -> tuple[list[str], list[QuotaNeed]]:
    """The lines of the plan (without the quota check) and the quota needs."""
    settings = config.settings
    try:
        fleet = stack_fleet(settings, scenario)
    except (StackConfigError, ValueError) as exc:
        raise UserError(f"stack {config.name}: {one_line(str(exc))}") from None
    prices = load_prices()
    roles = machine_roles(fleet, settings.broker_instance_type, settings.client_instance_type)
    lines = [
        f"stack {config.name}: {fleet.system.name} in {config.region or '(no aws:region)'}, "
        f"scenario {scenario or settings.scenario}",
        "machines:",
    ]
    role_lines, hourly = fleet_lines(roles, prices, config.region)
    lines += role_lines + machine_lines(roles, settings.placement_group)
    lines += sweep_lines(fleet, hourly, prices.currency)
    lines.append(ttl_line(settings.ttl_hours, fleet))
    needs, notes = quota_needs(roles, prices, nat_gateway=settings.admin_cidr is None)
    lines += [f"quota needs: {n.title} ({n.code}): {n.need}" for n in needs] + notes
    return lines, needs


def cmd_plan(args: argparse.Namespace) -> int:
    try:
        config = load_stack_config(stack_path(args.stack))
    except StackConfigError as exc:
        raise UserError(one_line(str(exc))) from None
    lines, needs = plan_report(config, args.scenario)
    print("\n".join(lines))
    region = args.region or config.region
    try:
        check = check_quotas(quota_client(region), needs)
    except LookupError as exc:
        check = QuotaCheck(False, str(exc.args[0]))
    if not check.checked:
        print(f"quotas: not checked: {check.reason}")
        return 0
    print(
        f"quotas: checked in {region} (the account's limits; what already runs there uses "
        "part of them)"
    )
    values = check.values or {}
    for need in needs:
        verdict = "ok" if values[need.code] >= need.need else "too small"
        print(
            f"  {need.title} ({need.code}): need {need.need}, quota {values[need.code]:g}: {verdict}"
        )
    problems = check.problems(needs)
    for line in problems:
        print(line, file=sys.stderr)
    return 1 if problems else 0
