"""What a run on this host may ask without a word more from its user (``brokerbench run``,
``validate``; not the client machines of an AWS stack, each of which runs its own nodes):
how many workers a point runs at once (:func:`host_problems`, ``--max-workers``), the cores
``[broker] cpus`` may take (:func:`cpus_problems`), and how
many runs a sweep starts without being asked (:func:`length_problems`, ``--yes``), and the
sweep's own word on its length (:func:`max_points_problems`, checked for every scenario).
Each returns problems (key path and message) as :mod:`workload.model.checks` does.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from pydantic import ValidationError

from workload.model.bounds import MAX_LOCAL_WORKERS, MAX_UNASKED_POINTS, format_duration
from workload.model.errors import Problem
from workload.model.scenario import Scenario


def max_points_problems(scenario: Scenario) -> list[Problem]:
    """A sweep larger than its own ``[sweep] max_points``."""
    allowed = scenario.sweep.max_points
    runs = scenario.sweep.size() * scenario.repeat
    if allowed is None or runs <= allowed:
        return []
    times = f" × repeat {scenario.repeat}" if scenario.repeat > 1 else ""
    return [
        Problem(
            ("sweep", "max_points"),
            f"the sweep has {scenario.sweep.size():,} point(s){times} = {runs:,} runs, more "
            f"than max_points ({allowed:,}): sweep fewer values, or raise max_points",
        )
    ]


@dataclass(frozen=True)
class HostLimits:
    """What a run on this host may ask without a word more from its user: the workers of
    a point at once (``--max-workers`` raises it) and whether a sweep of more than
    :data:`MAX_UNASKED_POINTS` runs was asked for (``--yes``)."""

    max_workers: int = MAX_LOCAL_WORKERS
    yes: bool = False
    #: The cores a run here may use (``[broker] cpus`` leaves the clients at least one).
    cores: int = field(default_factory=lambda: len(os.sched_getaffinity(0)))


#: The load keys that set how many workers a point runs.
WORKER_KEYS = ("threads", "sender_threads", "receiver_threads", "sender_nodes", "receiver_nodes")


def host_problems(scenario: Scenario, limits: HostLimits) -> list[Problem]:
    """Sweep points that run more workers at once than one host is held to: named after
    the swept value that makes them so, else the first of the load's worker keys the file
    sets (a capacity search is one point, the scenario's load)."""
    written = [key for key in WORKER_KEYS if key in scenario.load.model_fields_set]
    found: dict[Problem, None] = {}
    for combo in scenario.sweep.combinations():
        try:
            load = scenario.point_load(combo.load)
        except ValidationError:
            continue  # point_problems names it
        senders, receivers = load.threads_of("sender"), load.threads_of("receiver")
        workers = senders * load.sender_nodes + receivers * load.receivers
        if workers <= limits.max_workers:
            continue
        swept = [combo.load_at[key] for key in WORKER_KEYS if key in combo.load_at]
        where = swept[0] if swept else ("load", written[0] if written else "threads")
        message = (
            f"{workers:,} workers at once on this host (sender_threads × sender_nodes + "
            f"receiver_threads × receiver_nodes = {senders:,} × {load.sender_nodes:,} + "
            f"{receivers:,} × {load.receivers:,}); a local run runs at most "
            f"{limits.max_workers:,} (docs/measurement.md §7): lower them, or pass "
            "--max-workers N if this host takes more"
        )
        found[Problem(where, message)] = None
    return list(found) + cpus_problems(scenario, limits)


def cpus_problems(scenario: Scenario, limits: HostLimits) -> list[Problem]:
    """``[broker] cpus`` that leaves the clients no core of this machine."""
    cpus = scenario.broker.cpus
    if cpus is None or cpus < limits.cores:
        return []
    return [
        Problem(
            ("broker", "cpus"),
            f"{cpus} cores for the broker leave the clients none: this machine has "
            f"{limits.cores}; at most {limits.cores - 1}, or leave cpus out to share them all",
        )
    ]


def length_problems(scenario: Scenario, limits: HostLimits) -> list[Problem]:
    """A sweep of more than :data:`MAX_UNASKED_POINTS` runs that neither ``--yes`` nor its
    own ``[sweep] max_points`` asked for (a capacity search has at most 50 probes)."""
    if scenario.search is not None or limits.yes or scenario.sweep.max_points is not None:
        return []
    points = scenario.sweep.size()
    runs = points * scenario.repeat
    if runs <= MAX_UNASKED_POINTS:
        return []
    load = scenario.load  # duration and idle_timeout are not swept
    estimate = format_duration(runs * (load.duration + load.idle_timeout))
    times = f" × repeat {scenario.repeat}" if scenario.repeat > 1 else ""
    return [
        Problem(
            ("repeat",) if points <= MAX_UNASKED_POINTS else ("sweep",),
            f"{points:,} sweep point(s){times} = {runs:,} runs, estimated run time about "
            f"{estimate}: more than the {MAX_UNASKED_POINTS:,} runs a run starts without "
            f"asking; pass --yes, or set [sweep] max_points = {runs} to say the sweep is "
            "meant to be this long",
        )
    ]
