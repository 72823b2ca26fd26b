"""``brokerbench cloud plan --stack NAME``: what a stack would run and cost, before ``up``.

Everything comes from the stack's file (``stacks/Pulumi.<stack>.yaml``, read as the Pulumi
program reads it) and the price table shipped with the analysis: each machine role's count
and instance type, the fleet's on-demand price per hour, the estimated cost of the
scenario's sweep, how the fleet stops (at the run's end; at the latest after its ttl) and
the most it may cost until then, and the account quotas it needs. A sweep longer than the
ttl, or a worst case above the cost cap (``--max-usd`` or ``brokerbench:maxUsd``), is a
line on stderr and exit 1 — ``pulumi up`` refuses both too (:func:`deploy_guard`). Only the
quota check talks to AWS (Service Quotas for the limits, EC2 for what already runs), and
only when credentials are there; a quota that what runs plus the need exceed is one line on
stderr and exit 1.
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from analysis.prices import PriceTable, load_prices
from infra.budget import POINT_OVERHEAD_S, cost_problems, sweep_seconds, ttl_problems, worst_case
from infra.instances import BANDWIDTH, bandwidth_problems
from infra.plan import StackFleet, stack_fleet
from infra.settings import (
    StackConfig,
    StackConfigError,
    StackSettings,
    load_stack_config,
    stack_path,
)
from workload.model.errors import UserError, one_line
from workload.model.scenario import expand
from workload.shell.cloud_quotas import (
    ELASTIC_IPS,
    STANDARD_FAMILIES,
    VCPUS,
    VPCS,
    QuotaCheck,
    QuotaNeed,
    check_quotas,
    quota_client,
)

#: A price table older than this many days is said to be so.
PRICES_AGE_DAYS = 365


@dataclass(frozen=True)
class MachineRole:
    """Machines of one role: broker roles of the topology, senders, receivers."""

    role: str
    count: int
    instance_type: str


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
    """The quotas the stack uses and lines for what cannot be counted: a type outside the
    standard families (another quota), a type without a vCPU count (the need is then
    unknown, not counted as 0)."""
    vcpus: int | None = 0
    notes = []
    for role in roles:
        if not role.instance_type.startswith(STANDARD_FAMILIES):
            notes.append(f"{role.instance_type}: not a standard family; its vCPUs are not counted")
        elif role.instance_type not in prices.vcpus:
            notes.append(
                f"{role.instance_type}: no vCPU count in table {prices.version}: the stack's "
                "vCPU need is unknown (see EC2's instance types) and not checked"
            )
            vcpus = None
        elif vcpus is not None:
            vcpus += role.count * prices.vcpus_of(role.instance_type)
    needs = [
        QuotaNeed("ec2", VCPUS, "Running On-Demand Standard instances, vCPUs", vcpus),
        QuotaNeed("vpc", VPCS, "VPCs per region", 1),
        QuotaNeed("ec2", ELASTIC_IPS, "EC2-VPC Elastic IPs", 1 if nat_gateway else 0),
    ]
    return needs, notes


def stop_lines(settings: StackSettings, hourly: float | None, currency: str) -> list[str]:
    """How the fleet stops: at the run's end, at the latest after its ttl, and the most the
    machines may cost until then."""
    lines = [
        "auto-stop: every machine stops itself when the run ends (a client when its agent "
        "exits, a broker once the run's end is posted), at the latest after the ttl"
    ]
    if not settings.ttl_hours:
        tail = "a machine the run's end misses runs until cloud down"
        return [*lines, f"ttl: none (brokerbench:ttlHours 0): {tail}"]
    hours = settings.ttl_hours
    lines.append(
        f"ttl: every machine stops itself {hours} h after boot at the latest (brokerbench:ttlHours)"
    )
    bound = worst_case(hourly, hours) if hourly is not None else None
    if bound is not None:
        lines.append(
            f"worst case: {bound:.2f} {currency} for the machines, should the run's end not "
            "stop them"
        )
    return lines


def cost_cap_line(settings: StackSettings, cap: float | None, currency: str) -> str:
    """The cost cap the plan holds the stack to, and where it comes from."""
    if cap is not None:
        return f"cost cap: {cap:g} {currency} (--max-usd)"
    if settings.max_usd is not None:
        return f"cost cap: {settings.max_usd:g} {currency} (brokerbench:maxUsd; pulumi up holds it)"
    return "cost cap: none (brokerbench:maxUsd, or --max-usd)"


def prices_age_line(prices: PriceTable, today: datetime | None = None) -> str | None:
    """A warning when the price table is older than :data:`PRICES_AGE_DAYS` (its version
    ends with the year and month it was published)."""
    try:
        published = datetime.strptime(prices.version[-7:], "%Y-%m").replace(tzinfo=UTC)
    except ValueError:
        return None
    age = ((today or datetime.now(UTC)) - published).days
    if age <= PRICES_AGE_DAYS:
        return None
    return (
        f"prices: table {prices.version} is {age / 365:.1f} years old: today's prices may "
        "differ (analysis/prices/ takes a newer table)"
    )


def sweep_lines(fleet: StackFleet, hourly: float | None, currency: str) -> list[str]:
    """The sweep's points, its estimated duration and cost."""
    points = expand(fleet.scenario)
    seconds = sweep_seconds(fleet.scenario)
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


@dataclass
class Plan:
    """A stack's plan: its lines, the quota needs, and what refuses it (stderr, exit 1)."""

    lines: list[str]
    needs: list[QuotaNeed]
    problems: list[str] = field(default_factory=list)


def plan_report(config: StackConfig, scenario: Path | None, cap: float | None = None) -> Plan:
    """The plan of a stack (without the quota check); ``cap``: the cost cap, else the
    stack's ``maxUsd``."""
    settings = config.settings
    try:
        fleet = stack_fleet(settings, scenario)
    except (StackConfigError, ValueError, OSError) as exc:
        raise UserError(f"stack {config.name}: {one_line(str(exc))}") from None
    prices = load_prices()
    roles = machine_roles(fleet, settings.broker_instance_type, settings.client_instance_type)
    lines = [
        f"stack {config.name}: {fleet.system.name} in {config.region or '(no aws:region)'}, "
        f"scenario {scenario or settings.scenario}, run "
        + (settings.run_id or "(a new id at pulumi up)"),
        "machines:",
    ]
    role_lines, hourly = fleet_lines(roles, prices, config.region)
    lines += role_lines + machine_lines(roles, settings.placement_group)
    lines += [line for line in [prices_age_line(prices)] if line]
    lines += sweep_lines(fleet, hourly, prices.currency)
    lines += stop_lines(settings, hourly, prices.currency)
    lines.append(cost_cap_line(settings, cap, prices.currency))
    needs, notes = quota_needs(roles, prices, nat_gateway=settings.admin_cidr is None)
    lines += [f"quota needs: {n.title} ({n.code}): {n.need}" for n in needs if n.need is not None]
    lines += notes
    problems = ttl_problems(settings, fleet.scenario)
    problems += cost_problems(settings, hourly, prices.currency, cap)
    return Plan(lines, needs, problems)


def deploy_guard(settings: StackSettings, stack: str, region: str) -> list[str]:
    """What ``pulumi up`` refuses besides what infra checks itself: a worst case above the
    stack's cost cap (the price table is the shell's to read)."""
    if settings.max_usd is None:
        return []
    fleet = stack_fleet(settings)
    roles = machine_roles(fleet, settings.broker_instance_type, settings.client_instance_type)
    prices = load_prices()
    _, hourly = fleet_lines(roles, prices, region)
    return cost_problems(settings, hourly, prices.currency)


def cmd_plan(args: argparse.Namespace) -> int:
    try:
        config = load_stack_config(stack_path(args.stack))
    except StackConfigError as exc:
        raise UserError(one_line(str(exc))) from None
    plan = plan_report(config, args.scenario, args.max_usd)
    print("\n".join(plan.lines))
    region = args.region or config.region
    try:
        check = check_quotas(quota_client(region), plan.needs, quota_client(region, "ec2"))
    except LookupError as exc:
        check = QuotaCheck(False, str(exc.args[0]))
    if not check.checked:
        print(f"quotas: not checked: {check.reason}")
    else:
        print(f"quotas: checked in {region} (the account's limits, less what runs there now)")
        for _, line, fits in check.verdicts(plan.needs):
            print(f"  {line}: {'ok' if fits else 'too small'}")
    problems = plan.problems + (check.problems(plan.needs) if check.checked else [])
    for line in problems:
        print(line, file=sys.stderr)
    return 1 if problems else 0
