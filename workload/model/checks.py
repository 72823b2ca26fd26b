"""The checks of a scenario across its sections, after each section checked its own keys:
every sweep point validated whole (:func:`point_problems`), its broker parameters against
the topology (:func:`topology_problems`) and none twice (:func:`sweep_problems`), and what ``[[faults]]``
(:func:`fault_problems`, :func:`drain_problems`), ``[search]`` (:func:`search_problems`)
and ``[load] keys`` (:func:`key_problems`) and ``[backlog]`` (:func:`backlog_problems`) ask of the rest. Each returns problems (key path and message), none when all is well;
:func:`workload.model.scenario_file.parse_scenario` reports them together.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from pydantic import ValidationError

from brokers import registry
from brokers.base import ALL_NODES, FAULT_ROLES, FaultSupport
from workload.model.bounds import MAX_RATE, MIN_RATE
from workload.model.errors import Loc, Problem, key_path, problems_of
from workload.model.faults import FaultSpec
from workload.model.scenario import Scenario
from workload.model.sweep import SWEEPABLE


def point_problems(scenario: Scenario) -> list[Problem]:
    """Every sweep point's load and broker parameters, each validated whole.

    A problem is named after the swept value that causes it (``sweep.message_size[0]``) or,
    when no single value does, after the point and the values it combines.
    """
    found: dict[Problem, None] = {}
    for combo in scenario.sweep.combinations():
        checks: list[tuple[Callable[[Mapping[str, Any]], object], dict[str, Any], Loc]] = [
            (scenario.point_load, combo.load, ("load",)),
            (scenario.broker_params, combo.params, ("broker", "params")),
        ]
        for build, values, section in checks:
            try:
                build(values)
            except ValidationError as exc:
                where = combo.load_at if section == ("load",) else combo.params_at
                for problem in problems_of(exc):
                    found[_at_point(problem, values, where, section, combo.at)] = None
    return list(found)


def _at_point(
    problem: Problem, values: dict[str, Any], where: dict[str, Loc], section: Loc, at: Loc
) -> Problem:
    """Name a sweep point's problem after the swept value that causes it, else the point.

    The section was valid without the point's values, so when the point varies one value
    of it, that value is the cause.
    """
    for key in problem.keys:
        if key and isinstance(key[0], str) and key[0] in where:
            return Problem(where[key[0]] + key[1:], problem.message)
    inner = f"{key_path((*section, *problem.loc))}: {problem.message}"
    if len(where) == 1:
        (origin,) = where.values()
        return Problem(origin, inner)
    combined = " ".join(f"{k}={v!r}" for k, v in values.items())
    return Problem(at, f"{combined}: {inner}" if combined else inner)


def topology_problems(scenario: Scenario) -> list[Problem]:
    """What each sweep point's broker parameters ask that the local topology cannot give
    (more replicas than nodes…), from the system's local deployment; named after the swept
    value where a point's own value causes it. Brokers brokerbench does not start
    (``deployment = "endpoints"``) are the user's to size."""
    section = scenario.broker
    system = registry.get(section.system)
    if section.deployment != "local" or system.local is None:
        return []
    found: dict[Problem, None] = {}
    for combo in scenario.sweep.combinations():
        try:
            params = scenario.broker_params(combo.params)
        except ValidationError:
            continue  # point_problems names it
        for problem in system.local.param_problems(section.topology, params):
            where = combo.params_at.get(problem.key, ("broker", "params", problem.key))
            found[Problem(where, problem.message)] = None
    return list(found)


def sweep_problems(scenario: Scenario) -> list[Problem]:
    """Sweep points that are the same point again: a value repeated in a swept list, or an
    explicit point equal to an earlier one (``repeat`` is what runs points more than once;
    a duplicate would run its point again under a second index, and compare with itself)."""
    sweep = scenario.sweep
    lists: list[tuple[Loc, list[Any]]] = [
        (("sweep", key), values) for key in SWEEPABLE if (values := getattr(sweep, key)) is not None
    ]
    lists += [(("sweep", "params", key), values) for key, values in sweep.params.items()]
    problems = []
    for at, values in lists:
        seen: dict[str, int] = {}
        for i, value in enumerate(values):
            first = seen.setdefault(_same(value), i)
            if first != i:
                problems.append(
                    Problem(
                        (*at, i),
                        f"{value!r} is swept already ({key_path((*at, first))}): each value "
                        "once — repeat runs every point more than once",
                    )
                )
    seen = {}
    for i, point in enumerate(sweep.points):
        first = seen.setdefault(_same(point.model_dump()), i)
        if first != i:
            problems.append(
                Problem(
                    ("sweep", "points", i),
                    f"the same point as sweep.points[{first}]: each point once — repeat runs "
                    "every point more than once",
                )
            )
    return problems


def _same(value: Any) -> str:
    """What makes two swept values the same (equal numbers, strings, tables)."""
    return json.dumps(value, sort_keys=True, default=str)


def search_problems(scenario: Scenario) -> list[Problem]:
    """What a ``[search]`` cannot go with: the search sets each probe's rate and runs one
    point at a time (no ``load.rate``, ``[sweep]``, ``[[faults]]`` or ``repeat``), and each
    probe's rate per sender worker obeys ``load.rate``'s limits."""
    search = scenario.search
    if search is None:
        return []
    problems: list[Problem] = []
    if scenario.load.rate is not None:
        problems.append(
            Problem(
                ("load", "rate"),
                "a capacity search sets each probe's rate itself (search.low to search.high, "
                "msgs/s in total over all sender workers): leave out load.rate",
            )
        )
    sweep = scenario.sweep
    if sweep.varies():
        problems.append(
            Problem(
                ("sweep",),
                "a capacity search runs one point at the rates it chooses: leave out [sweep] "
                "(search one configuration per scenario file)",
            )
        )
    if scenario.faults:
        problems.append(
            Problem(
                ("faults",),
                "a capacity search runs without faults: leave out [[faults]]",
            )
        )
    if scenario.repeat > 1:
        problems.append(
            Problem(
                ("repeat",),
                "repeat is not available with [search]: each probe runs once (leave out "
                "repeat, or repeat the whole search)",
            )
        )
    workers = scenario.load.sender_workers
    for key in ("low", "high"):
        total = getattr(search, key)
        per_worker = total / workers
        if not MIN_RATE <= per_worker <= MAX_RATE:
            problems.append(
                Problem(
                    ("search", key),
                    f"{total:g} msgs/s over {workers} sender worker(s) (load.sender_threads × "
                    f"load.sender_nodes) is {per_worker:g} per worker; a worker's rate is "
                    f"{MIN_RATE:g} to {MAX_RATE:g} msgs/s",
                )
            )
    return problems


def backlog_problems(scenario: Scenario) -> list[Problem]:
    """What a ``[backlog]`` cannot go with: the coordinator of a local run drives its phases
    (not the client machines of an AWS stack, nor a capacity search's probes), and the
    receivers must stop while the senders still send (``at`` within
    ``load.duration``)."""
    backlog = scenario.backlog
    if backlog is None:
        return []
    problems: list[Problem] = []
    if scenario.broker.aws_topology is not None:
        problems.append(
            Problem(
                ("backlog",),
                "a backlog's phases are driven by the coordinator of a local run "
                "(`brokerbench run`); the client machines of an AWS stack do not run them yet",
            )
        )
    if scenario.search is not None:
        problems.append(
            Problem(("backlog",), "a capacity search runs without a backlog: leave out [backlog]")
        )
    shortest = scenario.load.duration  # not swept
    if backlog.at >= shortest:
        problems.append(
            Problem(
                ("backlog", "at"),
                f"receivers would stop at {backlog.at:g} s, when the senders are done "
                f"(load.duration {shortest:g} s): nothing would build up; make it shorter",
            )
        )
    return problems


def drain_problems(scenario: Scenario) -> list[Problem]:
    """With faults declared: receivers that would stop before a received but unacknowledged
    message comes back (its visibility timeout). A fault that cuts a receiver's connection
    between the broker's hiding a message and the reply leaves such a message hidden; a
    receiver that stopped sooner would count it lost although it is still queued."""
    system = registry.get(scenario.broker.system)
    if not scenario.faults or system.redelivery_after is None:
        return []
    found: dict[Problem, None] = {}
    for combo in scenario.sweep.combinations():
        idle = scenario.point_load(combo.load).idle_timeout
        delay = system.redelivery_after(scenario.broker_params(combo.params))
        if idle <= delay:
            message = (
                f"with faults, idle_timeout ({idle:g} s) must be longer than the time {system.title} takes "
                f"to deliver an unacknowledged message again ({delay:g} s, "
                "broker.params.visibility_timeout): receivers would stop before it comes back "
                "and count it lost; raise idle_timeout or lower visibility_timeout"
            )
            found[Problem(("load", "idle_timeout"), message)] = None
    return list(found)


def key_problems(scenario: Scenario) -> list[Problem]:
    """``[load] keys`` on a system that sends no message keys: they would be ignored (and
    no order checked) without a word."""
    system = registry.get(scenario.broker.system)
    if scenario.load.keys is None or system.keys is not None:
        return []
    keyed = ", ".join(name for name, other in registry.systems().items() if other.keys)
    return [
        Problem(
            ("load", "keys"),
            f"{system.title} sends no message keys here, so keys would be ignored; remove "
            f"keys (systems that send them: {keyed})",
        )
    ]


def fault_problems(scenario: Scenario) -> list[Problem]:
    """What the faults ask that this deployment, system and topology cannot do, and faults
    outside the load duration or overlapping each other."""
    if not scenario.faults:
        return []
    found = fault_support(scenario)
    if isinstance(found, Problem):
        return [found]
    support, topology = found
    problems = [
        problem
        for i, fault in enumerate(scenario.faults)
        for problem in _fault_fits(scenario, i, fault, support, topology) + _overlaps(scenario, i)
    ]
    return sorted(problems, key=lambda problem: problem.loc[:2])


def fault_support(scenario: Scenario) -> tuple[FaultSupport, str] | Problem:
    """What faults the scenario's deployment takes and how its topology is named in
    messages, or the one problem that rules faults out (a deployment brokerbench did not
    start, a system without fault support, a topology of one node)."""
    section = scenario.broker
    system = registry.get(section.system)
    first: Loc = ("faults", 0, "action")
    on_aws = section.deployment == "endpoints" and section.aws_topology is not None
    if section.deployment != "local" and not on_aws:
        return Problem(
            first,
            "faults need deployment = 'local' or an AWS stack's brokers: brokerbench acts "
            "only on broker nodes it started itself",
        )
    if on_aws and any(f.action == "power-loss" for f in scenario.faults):
        return Problem(
            first,
            "power-loss is not available on AWS: it needs the lazy filesystem under the nodes "
            "brokerbench starts here (deployment = 'local'; docs/faults.md)",
        )
    if on_aws:
        assert section.aws_topology is not None
        found = aws_fault_support(scenario, section.aws_topology)
        if isinstance(found, Problem):
            return found
        support, topology = found, "of the stack"
    else:
        assert system.local is not None  # checked with the broker section
        local_support = system.local.fault_support(section.topology)
        if local_support is None:
            return Problem(first, f"faults are not supported for {system.title} yet")
        support, topology = local_support, repr(section.topology)
    if support.nodes < 2 and any(f.action != "power-loss" for f in scenario.faults):
        return Problem(
            ("faults", 0, "node"),
            f"topology {topology} has one node: a fault would take the whole "
            "broker down; use a topology with several nodes",
        )
    return support, topology


def _fault_fits(
    scenario: Scenario, i: int, fault: FaultSpec, support: FaultSupport, topology: str
) -> list[Problem]:
    """What fault ``i`` asks that the system, its topology or the load duration cannot give."""
    title = registry.get(scenario.broker.system).title
    duration = scenario.load.duration
    at: Loc = ("faults", i)
    problems: list[Problem] = []
    if fault.action == "isolate" and not support.isolates:
        problems.append(Problem((*at, "action"), isolate_unavailable(title)))
    if fault.action == "power-loss" and not support.power_loss:
        problems.append(
            Problem(
                (*at, "action"),
                f"power-loss is not available for {title} ({topology}) here: its nodes' data "
                "directories are not put on the lazy filesystem yet (docs/faults.md names the "
                "systems whose are)",
            )
        )
    if isinstance(fault.node, int) and fault.node >= support.nodes:
        problems.append(
            Problem(
                (*at, "node"),
                f"node {fault.node} does not exist: topology {topology} has "
                f"{support.nodes} nodes (0 to {support.nodes - 1})",
            )
        )
    if fault.at >= duration:
        problems.append(
            Problem(
                (*at, "at"),
                f"at ({fault.at:g} s) must lie within load.duration ({duration:g} s)",
            )
        )
    if fault.until is not None and fault.until > duration:
        problems.append(
            Problem(
                (*at, "until"),
                f"until ({fault.until:g} s) must not be after load.duration ({duration:g} s)",
            )
        )
    if fault.until is not None and fault.action in ("kill", "stop") and not support.restarts:
        problems.append(
            Problem(
                (*at, "until"),
                f"{title} nodes cannot be restarted here: a {fault.action} lasts "
                "until the point ends (leave out until)",
            )
        )
    problems += _outage(scenario, i, fault, support.nodes)
    if fault.node == "leader" and not support.fails_over:
        # Workers keep failing while nothing leads, and give up after failure_timeout.
        limit = scenario.load.failure_timeout
        if fault.until is None or fault.until - fault.at >= limit:
            problems.append(
                Problem(
                    (*at, "until" if fault.until is not None else "node"),
                    f"{title} does not fail over here, so nothing leads while "
                    f"{support.leader} is down, and workers give up after "
                    f"load.failure_timeout ({limit:g} s) of failing: give an until less "
                    "than that after at",
                )
            )
    return problems


def _outage(scenario: Scenario, i: int, fault: FaultSpec, nodes: int) -> list[Problem]:
    """A power-loss of every node (``"all"``, or the only one) that lasts so long that the
    workers, failing meanwhile, give up (after ``load.failure_timeout``)."""
    limit = scenario.load.failure_timeout
    whole = fault.node == ALL_NODES or nodes == 1
    if fault.action != "power-loss" or not whole or fault.until is None:
        return []
    if fault.until - fault.at < limit:
        return []
    return [
        Problem(
            ("faults", i, "until"),
            f"while every node is down, workers fail and give up after load.failure_timeout "
            f"({limit:g} s): give an until less than that after at",
        )
    ]


def _overlaps(scenario: Scenario, i: int) -> list[Problem]:
    """The later faults that overlap fault ``i``: faults happen one at a time."""
    faults, duration = scenario.faults, scenario.load.duration
    fault = faults[i]

    def end(f: FaultSpec) -> float:  # a power-loss without until is back at once
        return f.until if f.until is not None else f.at if f.action == "power-loss" else duration

    ends = end(fault)
    return [
        Problem(
            ("faults", j, "at"),
            f"fault {j} ({later.describe()}) overlaps fault {i} "
            f"({fault.describe()}): faults happen one at a time",
        )
        for j, later in enumerate(faults[i + 1 :], start=i + 1)
        if fault.at <= later.at < ends or later.at <= fault.at < end(later)
    ]


def aws_fault_support(scenario: Scenario, roles: dict[str, int]) -> FaultSupport | Problem:
    """What faults an AWS stack of ``roles`` takes (from the system's cloud recipe), or the
    one problem that rules them out: no systemd unit declared, or ``"leader"`` and
    ``"follower"`` where a client machine cannot tell which node leads."""
    system = registry.get(scenario.broker.system)
    recipe = system.cloud
    faults = recipe.faults_for(roles) if recipe is not None else None
    if recipe is None or faults is None:
        return Problem(
            ("faults", 0, "action"),
            f"faults on AWS are not supported for {system.title} yet (its cloud recipe names "
            "no systemd unit of the broker for the fault agent)",
        )
    for i, fault in enumerate(scenario.faults):
        if fault.node in FAULT_ROLES and not recipe.finds_leader:
            return Problem(
                ("faults", i, "node"),
                f'on AWS a {system.title} fault names a node index, not "{fault.node}": '
                "a client machine cannot tell which node leads",
            )
    nodes = sum(roles.get(role, 0) for role in faults.roles)
    leader = f"node {faults.leader}" if faults.leader is not None else "the leader"
    return FaultSupport(
        nodes=nodes,
        leader=leader,
        follower="another node",
        fails_over=faults.fails_over,
        isolates=True,  # a firewall rule on the broker machine (workload/engine/aws/fault_agent.py)
    )


def isolate_unavailable(title: str) -> str:
    """Why a system's nodes cannot be isolated here."""
    return (
        f"isolate is not available for {title} here: its nodes started here all share the "
        "loopback interface, and brokerbench does not run them each in a network namespace "
        "of its own yet (docs/faults.md names the systems it does)"
    )
