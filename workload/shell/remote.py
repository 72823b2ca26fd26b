"""The two steps a client machine on AWS runs for each sweep point (``workload/engine/aws/agent.py``
calls them): ``brokerbench prepare`` creates the point's destination (and, for point 0,
writes the run context), ``brokerbench node`` runs this machine's sender or receiver node.

Every machine derives the same names from the run id alone, so they need not talk to
each other; the local runner uses the same naming.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import threading
from pathlib import Path

from brokers import registry
from workload.engine.clock import read_clock
from workload.engine.context import broker_entry, build_context, clock_entry, now_iso
from workload.engine.node import NodeSpec, prepare_point, run_node_processes
from workload.model.errors import UserError
from workload.model.record import CostRecord, write_context
from workload.model.scenario import Scenario, expand
from workload.model.scenario_file import load_scenario
from workload.model.sweep import SweepPoint


def _point(scenario: Scenario, index: int, source: Path) -> SweepPoint:
    points = expand(scenario)
    if not 0 <= index < len(points):
        raise UserError(f"{source}: --point {index} is out of range (0…{len(points) - 1})")
    if scenario.broker.deployment != "endpoints":
        raise UserError(f"{source}: broker.deployment must be 'endpoints' on a client machine")
    return points[index]


def cmd_prepare(args: argparse.Namespace) -> int:
    scenario = load_scenario(args.scenario)
    point = _point(scenario, args.point, args.scenario)
    system = registry.get(scenario.broker.system)
    endpoints = scenario.broker.given_endpoints()
    prepare_point(system, endpoints, args.run_id, point)
    if point.index == 0:
        run_dir = args.results / args.run_id
        run_dir.mkdir(parents=True, exist_ok=True)
        broker = broker_entry(scenario, system, endpoints, "reference")  # deployment: endpoints
        context = build_context(
            args.run_id, scenario, str(args.scenario), system, expand(scenario), broker
        )
        context.clock = clock_entry(read_clock(), "the client machine that prepared point 0")
        fleet = os.environ.get("BROKERBENCH_FLEET")
        if fleet:
            context.cost = CostRecord(
                region=os.environ.get("AWS_DEFAULT_REGION", ""), instances=json.loads(fleet)
            )
        write_context(run_dir, context)
    print(f"prepared point {point.index} ({point.label})")
    return 0


def cmd_node(args: argparse.Namespace) -> int:
    scenario = load_scenario(args.scenario)
    point = _point(scenario, args.point, args.scenario)
    spec = NodeSpec.of_point(
        point,
        args.role,
        args.node,
        run_dir=args.results / args.run_id,
        run_id=args.run_id,
        system=scenario.broker.system,
        endpoints=scenario.broker.given_endpoints(),
        flush_interval=scenario.measurement.flush_interval,
    )
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    statuses = run_node_processes(spec, stop)
    print(
        f"{args.role} {args.node} point {point.index}: sent {sum(s.sent for s in statuses):,} "
        f"received {sum(s.received for s in statuses):,} "
        f"errors {sum(s.errors for s in statuses):,} in {len(statuses)} process(es) "
        f"(finished {now_iso()})"
    )
    failed = [s for s in statuses if not s.ok]
    for status in failed:
        print(f"process {status.part}: {status.error}")
    return 1 if failed else 0


def register(subparsers: argparse._SubParsersAction) -> None:
    """Add ``prepare`` and ``node`` (used by client machines) to the command line."""
    for name, handler, text in (
        ("prepare", cmd_prepare, "(client machine) create a sweep point's queue/topic"),
        ("node", cmd_node, "(client machine) run one sender or receiver node of a sweep point"),
    ):
        parser = subparsers.add_parser(name, help=text, description=text)
        parser.add_argument("scenario", type=Path, help="scenario with deployment = 'endpoints'")
        parser.add_argument("--run-id", required=True)
        parser.add_argument("--point", type=int, required=True, help="sweep point index")
        parser.add_argument("--results", type=Path, required=True, help="results directory")
        if name == "node":
            parser.add_argument("--role", choices=("sender", "receiver"), required=True)
            parser.add_argument("--node", type=int, required=True, help="node index in its role")
        parser.set_defaults(handler=handler)
