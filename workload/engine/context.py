"""The run context (docs/measurement.md §3): what makes two runs comparable, written as ``context.json``.

It holds the resolved scenario and sweep points, the broker's name, version, topology and
settings as read back from the servers, client library versions, the host, the times and
the clock-sync situation: one host's clock state (``workload.engine.clock``); every node records
its own before each sweep point in its status.

Each entry of ``points`` (:func:`point_entry`) is one sweep point as it runs: its index,
label, swept values, resolved load and parameters, and — with ``repeat`` — which run of
which point of the un-repeated sweep it is (``repeat``, ``base``). A capacity search's
points are its probes, added as they start (:mod:`workload.engine.search`; its record is
``search``).

The builders return the typed record (:mod:`workload.model.record`), which the writers fill in
and :func:`workload.model.record.write_context` writes.
"""

from __future__ import annotations

import os
import platform
import socket
from datetime import UTC, datetime
from importlib import metadata
from typing import Any

from brokers.base import BrokerSystem, Endpoints
from workload.engine.clock import SINGLE_HOST, ClockState
from workload.engine.node import processes_for
from workload.model.layout import LAYOUT
from workload.model.record import CoordinatorRecord, PointEntry, PointLoad, RunContext
from workload.model.scenario import Scenario
from workload.model.sweep import SweepPoint


def now_iso() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def package_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def host_info() -> dict[str, Any]:
    try:
        pages = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError):
        pages = 0
    return {
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "memory_bytes": pages,
        "machine_type": os.environ.get("BROKERBENCH_MACHINE_TYPE", "local"),
    }


def recorded_scenario(scenario: Scenario) -> dict[str, Any]:
    """The scenario as the context records it: a password given as a connection option is
    replaced by a note (results are shared; credentials are not)."""
    data = scenario.model_dump(mode="json")
    options = data["broker"]["options"]
    if "password" in options:
        options["password"] = "(given; not recorded)"
    return data


def clock_entry(clock: ClockState, host: str) -> dict[str, Any]:
    """The context's ``clock``: the clock state of ``host``, and where every node's is."""
    return {
        **clock.as_dict(),
        "host": host,
        "nodes": f"each node's before every sweep point, in its status ({LAYOUT.nodes}/*.json)",
    }


def point_entry(system: BrokerSystem[Any], point: SweepPoint) -> PointEntry:
    """One sweep point as the context's ``points`` list records it."""
    return PointEntry(
        point=point.index,
        label=point.label,
        varied=point.varied,
        repeat=point.repeat,
        base=point.base,
        load=PointLoad.model_validate(point.load.model_dump(mode="json")),
        params=point.params,
        client=system.client(system.params_model.model_validate(point.params)),
        # Processes each client node spreads its workers over (on this host).
        processes_per_node=processes_for(point.load, "sender"),
        receiver_processes_per_node=processes_for(point.load, "receiver"),
    )


def broker_entry(
    scenario: Scenario, system: BrokerSystem[Any], endpoints: Endpoints, topology: str
) -> dict[str, Any]:
    """How the run reaches its broker, the broker as read back from its servers, and what
    that means for a confirmed message (``durability``, where the system derives it; from
    the scenario's parameters) — the context's ``broker``, beside what
    :func:`build_context` adds."""
    params = scenario.broker_params()
    described = system.describe(endpoints, params)
    durability = system.durability(described, params) if system.durability else None
    return {
        "deployment": scenario.broker.deployment,
        "topology": topology,
        "endpoints": list(endpoints.hosts),
        **described,
        **({"durability": durability.record()} if durability is not None else {}),
    }


def build_context(
    run_id: str,
    scenario: Scenario,
    scenario_path: str,
    system: BrokerSystem[Any],
    points: list[SweepPoint],
    broker: dict[str, Any],
    coordinator: CoordinatorRecord | None = None,
) -> RunContext:
    """The context of a run of ``points`` (none yet for a capacity search: its probes are
    added with :func:`point_entry` as they start); ``coordinator``: the process that runs
    it, where it runs to the end (a local run), so that a reader can tell it is gone."""
    clients = {system.client(system.params_model.model_validate(p.params)) for p in points}
    if not points:  # a search: every probe uses the scenario's parameters
        clients.add(system.client(scenario.broker_params()))
    return RunContext.model_validate(
        {
            "run_id": run_id,
            "scenario_file": scenario_path,
            "scenario": recorded_scenario(scenario),
            "points": [point_entry(system, p) for p in points],
            "broker": {
                "system": system.name,
                "title": system.title,
                "reference_topology": system.reference_topology.roles,
                "caveats": list(system.caveats),
                "stand_in": system.local.stand_in if system.local else "",
                **({"keys": system.keys.record()} if system.keys is not None else {}),
                **broker,
            },
            "clients": {
                name: package_version(name) for name in ("brokerbench", *sorted(clients)) if name
            },
            "host": host_info(),
            "clock": clock_entry(SINGLE_HOST, "this host: every node of the run runs here"),
            "started": now_iso(),
            "finished": None,
            "status": "running",
            "errors": [],
            "coordinator": coordinator,
        }
    )
