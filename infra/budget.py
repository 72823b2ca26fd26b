"""What a run may take, in time and money, before it is deployed: the sweep's estimate
against the machines' time to live, and their worst-case cost against the stack's cap.

The fleet stops itself when its run ends; the time to live (``brokerbench:ttlHours``) is the
bound when that fails, so the machines never cost more than their hourly price × the ttl.
``cloud plan`` and ``pulumi up`` both refuse a scenario whose estimate does not fit in the
ttl, and a stack whose bound is above its cost cap (``brokerbench:maxUsd`` or
``cloud plan --max-usd``). Prices come from the caller (the shell reads the price table).
"""

from __future__ import annotations

import math

from infra.settings import NAMESPACE, StackSettings
from workload.model.scenario import Scenario, expand

#: Seconds a sweep point takes besides its sending duration: preparing the destination,
#: starting every node in step, receivers draining, uploading the records. An assumption.
POINT_OVERHEAD_S = 90.0


def sweep_seconds(scenario: Scenario) -> float:
    """The sweep's estimated duration: each point's sending duration and the overhead."""
    return sum(p.load.duration + POINT_OVERHEAD_S for p in expand(scenario))


def ttl_problems(settings: StackSettings, scenario: Scenario) -> list[str]:
    """One line when the sweep's estimate does not fit in the machines' time to live."""
    seconds = sweep_seconds(scenario)
    if not settings.ttl_hours or seconds < settings.ttl_hours * 3600:
        return []
    hours = math.ceil(seconds / 3600 + 0.5)
    return [
        f"{NAMESPACE}:ttlHours {settings.ttl_hours}: the sweep of {scenario.name} takes about "
        f"{seconds / 3600:.1f} h, so the machines would stop themselves before it ends: "
        f"pulumi config set {NAMESPACE}:ttlHours {hours}"
    ]


def worst_case(hourly: float, ttl_hours: int) -> float | None:
    """The most the machines cost before they stop themselves (None: no ttl, no bound)."""
    return hourly * ttl_hours if ttl_hours else None


def cost_problems(
    settings: StackSettings, hourly: float | None, currency: str, cap: float | None = None
) -> list[str]:
    """One line when the machines' worst case is above the cost cap (``cap``, else the
    stack's ``maxUsd``), or cannot be bounded: no ttl, or a type the table cannot price."""
    cap = cap if cap is not None else settings.max_usd
    if cap is None:
        return []
    if hourly is None:
        why = "the fleet's price per hour is unknown, so the cap cannot be held"
        return [f"cost cap {cap:g} {currency}: {why}: choose priced types or leave the cap out"]
    bound = worst_case(hourly, settings.ttl_hours)
    if bound is None:
        why = f"{NAMESPACE}:ttlHours 0 leaves the machines running until cloud down, unbounded"
        return [f"cost cap {cap:g} {currency}: {why}: set a ttl"]
    if bound <= cap:
        return []
    hours = math.floor(cap / hourly) if hourly else 0
    return [
        f"cost cap {cap:g} {currency}: the machines may cost up to {bound:.2f} {currency} "
        f"({hourly:.2f} {currency}/h × {NAMESPACE}:ttlHours {settings.ttl_hours}) before they "
        f"stop themselves: "
        + (f"lower {NAMESPACE}:ttlHours to {hours}" if hours else "choose a cheaper fleet")
        + " or raise the cap"
    ]
