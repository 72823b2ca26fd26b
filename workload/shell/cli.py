"""The ``brokerbench`` command line.

Exit codes: 0 success, 2 invalid input (scenario, arguments), 1 a failed run (broker
unreachable or died, a node failed), 128 + the signal when interrupted (130 Ctrl-C, 143
SIGTERM, 129 SIGHUP). User errors are one line each, never a stack trace.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import signal
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from brokers import registry
from brokers.errors import BrokerError
from workload.model.errors import RunFailed, ScenarioError, UserError
from workload.model.layout import LAYOUT

if TYPE_CHECKING:
    from analysis.session import Session
    from workload.model.host_limits import HostLimits
    from workload.model.scenario import Scenario

DEFAULT_RESULTS = Path("results")


def _say(message: str) -> None:
    print(message, flush=True)


def _err(message: str) -> None:
    print(f"brokerbench: {message}", file=sys.stderr, flush=True)


def _require_spark(alternative: str = "") -> None:
    """Stop with one line naming the extra to install when PySpark is not installed."""
    try:
        importlib.import_module("pyspark")
    except ImportError:
        raise UserError(
            "the analysis needs PySpark, which is not installed: "
            f"pip install 'brokerbench[analysis]'{alternative}"
        ) from None


def cmd_run(args: argparse.Namespace) -> int:
    from workload.engine.runner import run_scenario
    from workload.engine.signals import Stopping, exit_code, signal_name

    if not args.no_analysis:
        _require_spark(" (or record only: --no-analysis)")
    _check_for_host(args)
    stopping = Stopping()
    stopping.install()
    outcome = run_scenario(args.scenario, args.results, console=_say)
    run_dir = outcome.run_dir
    later = f"analyse it with: brokerbench report {run_dir}"
    code = 0
    for error in outcome.errors:
        _err(error)
        code = 1
    if outcome.interrupted:
        kept = "kept" if args.no_analysis or stopping.again else "kept and analysed"
        _err(f"interrupted ({outcome.signal}); what was recorded is {kept}")
        code = exit_code(signal.Signals[outcome.signal])
    if stopping.again:
        name = signal.Signals(stopping.again).name
        _err(f"interrupted again ({name}): not analysed; {later}")
        return exit_code(stopping.again)
    if not args.no_analysis:
        stopping.analysing()
        try:
            with _spark([run_dir]) as spark:
                _report(spark, run_dir)
        except KeyboardInterrupt as exc:
            name = signal_name(exc)
            _err(f"interrupted ({name}) during the analysis: not analysed; {later}")
            return exit_code(signal.Signals[name])
    else:
        _say(f"recorded in {run_dir}; {later}")
    if code == 1:
        _err(f"the run failed; results so far are in {run_dir}")
    return code


@contextlib.contextmanager
def _spark(run_dirs: list[Path]) -> Iterator[Session]:
    """The analysis's Spark session for ``run_dirs``; its local JVM ends with the block."""
    from analysis.session import owned_session, raw_bytes, writes_class_archive

    _say("analysing with Spark (local mode)…")
    with owned_session(raw=raw_bytes(run_dirs)) as spark:
        yield spark
        if writes_class_archive():
            _say("keeping Spark's classes for quicker analyses from now on (once: about 10 s)…")


def _report(spark: Session, run_dir: Path) -> None:
    from analysis.console import run_summary
    from analysis.job import analyse
    from analysis.report import write_html
    from workload.model.record import read_raw_context

    rows = analyse(spark, run_dir)
    context = read_raw_context(run_dir)
    print()
    print(run_summary(context, rows))
    print()
    _say(f"summary: {run_dir / 'analysis' / 'summary.csv'}")
    _say(f"report:  {write_html(run_dir, context, rows)}")


def cmd_report(args: argparse.Namespace) -> int:
    from workload.engine.signals import Stopping

    _require_spark()
    run_dirs = (
        [args.results]
        if (args.results / LAYOUT.context).exists()
        else sorted(p.parent for p in args.results.glob(f"*/{LAYOUT.context}"))
    )
    if not run_dirs:
        raise UserError(f"{args.results}: no runs found (a run directory holds {LAYOUT.context})")
    stopping = Stopping()
    stopping.install()
    stopping.analysing()
    with _spark(run_dirs) as spark:
        for run_dir in run_dirs:
            _report(spark, run_dir)
    if len(run_dirs) > 1:
        from analysis.overview import write_overview

        _say(f"overview: {write_overview(args.results)}")
    return 0


def _host_limits(args: argparse.Namespace) -> HostLimits:
    from workload.model.host_limits import HostLimits

    return HostLimits(max_workers=args.max_workers, yes=args.yes)


def _check_for_host(args: argparse.Namespace) -> None:
    """Refuse, before anything starts, a scenario that asks more of this host than it
    runs without a word more (``--max-workers``, ``--yes``): one line each, exit 2."""
    from workload.model.scenario_file import load_scenario

    load_scenario(args.scenario, _host_limits(args))


def cmd_validate(args: argparse.Namespace) -> int:
    from workload.model.scenario import expand
    from workload.model.scenario_file import load_scenario
    from workload.model.sweep import batching_floor

    failed = False
    for path in args.scenarios:
        try:
            scenario = load_scenario(path, _host_limits(args))
            plan = _plan(scenario)
        except ScenarioError as exc:
            failed = True
            for line in exc.lines:
                _err(line)
        else:
            _say(f"{path}: ok ({plan})")
            if scenario.search is None and (note := batching_floor(expand(scenario))):
                _say(f"  note: {note}")
    return 2 if failed else 0


def _plan(scenario: Scenario) -> str:
    """What a run of a valid scenario runs, and about how long it takes."""
    from workload.engine.search import describe_search
    from workload.engine.search import estimated_seconds as search_seconds
    from workload.model.bounds import format_duration
    from workload.model.scenario import expand
    from workload.model.sweep import describe_points, estimated_seconds

    if scenario.search is not None:
        estimate = format_duration(search_seconds(scenario))
        return (
            f"{describe_search(scenario)}; estimated run time up to {estimate}: max_probes × "
            "(duration + idle_timeout), broker start-up not included"
        )
    points = expand(scenario)
    estimate = format_duration(estimated_seconds(points))
    return (
        f"{describe_points(points, scenario.repeat)}; estimated run time about {estimate}: "
        "points × (duration + idle_timeout), broker start-up not included"
    )


def cmd_brokers(args: argparse.Namespace) -> int:
    rows = [("system", "title", "local topologies", "in flight", "keys", "here")]
    for name, system in registry.systems().items():
        if system.local is None:
            where = "AWS only"
        else:
            missing = system.client_missing() or system.local.missing()
            where = f"not installed: {missing}" if missing else "runs locally"
            if system.local.stand_in and not missing:
                where += f" (stand-in: {system.local.stand_in})"
        topologies = ", ".join(system.local.topologies) if system.local else "-"
        in_flight = "max_in_flight" if system.can_pipeline else "1"
        keys = system.keys
        sent = "-" if keys is None else keys.sent_as + (", ordered" if keys.ordered else "")
        rows.append((name, system.title, topologies, in_flight, sent, where))
    width = [max(len(r[i]) for r in rows) for i in range(5)]
    for r in rows:
        print("  ".join(f"{r[i]:<{width[i]}}" for i in range(5)) + f"  {r[5]}")
    one = {n: s.one_in_flight for n, s in registry.systems().items() if not s.can_pipeline}
    if one:
        print("\nin flight 1 — why each of these confirms one batch before the next:")
        for name, why in one.items():
            print(f"  {name}: {why or 'its client cannot pipeline'}")
    return 0


def cmd_schema(args: argparse.Namespace) -> int:
    from workload.model.scenario import Scenario

    print(json.dumps(Scenario.model_json_schema(), indent=2))
    return 0


def cmd_setup(args: argparse.Namespace) -> int:
    from workload.engine.setup import setup

    return setup(args.systems or list(registry.systems()), console=_say)


Handler = Callable[[argparse.Namespace], int]


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{value} is not a positive number")
    return value


def _host_flags(parser: argparse.ArgumentParser) -> None:
    """The flags that let a run ask more of this host than it starts without asking."""
    from workload.model.bounds import MAX_LOCAL_WORKERS, MAX_UNASKED_POINTS

    parser.add_argument(
        "--max-workers",
        type=_positive,
        default=MAX_LOCAL_WORKERS,
        metavar="N",
        help=f"the most workers a point may run at once on this host (default "
        f"{MAX_LOCAL_WORKERS:,}: sender threads × sender nodes + receiver threads × receiver "
        "nodes); raise it where the host takes more",
    )
    parser.add_argument(
        "--yes",
        action="store_true",
        help=f"start a sweep of more than {MAX_UNASKED_POINTS:,} runs (points × repeat) "
        "without [sweep] max_points",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="brokerbench",
        description="Benchmark message brokers with safe settings: start real brokers, run "
        "sender and receiver workers from a TOML scenario, and analyse the results with Spark.",
        epilog="Example: brokerbench run workload/scenarios/postgresql-smoke.toml",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = sub.add_parser("run", help="run a scenario and print its results table")
    run.add_argument("scenario", type=Path, help="scenario TOML file")
    run.add_argument(
        "--results",
        type=Path,
        default=DEFAULT_RESULTS,
        help="results directory (default: results/)",
    )
    run.add_argument(
        "--no-analysis", action="store_true", help="record only; run 'brokerbench report' later"
    )
    _host_flags(run)
    run.set_defaults(handler=cmd_run)

    validate = sub.add_parser(
        "validate", help="check scenario files without running them (as `run` would here)"
    )
    validate.add_argument("scenarios", type=Path, nargs="+", metavar="SCENARIO")
    _host_flags(validate)
    validate.set_defaults(handler=cmd_validate)

    report = sub.add_parser("report", help="(re)analyse runs and write summary.csv and report.html")
    report.add_argument(
        "results", type=Path, help="a run directory, or a results directory of runs"
    )
    report.set_defaults(handler=cmd_report)

    brokers = sub.add_parser("brokers", help="list the systems and whether each runs locally here")
    brokers.set_defaults(handler=cmd_brokers)

    schema = sub.add_parser("schema", help="print the JSON Schema of the scenario format")
    schema.set_defaults(handler=cmd_schema)

    setup = sub.add_parser(
        "setup", help="install what the local brokers need (Debian packages, jars)"
    )
    setup.add_argument("systems", nargs="*", help="systems to set up (default: all)")
    setup.set_defaults(handler=cmd_setup)

    # Command groups owned by their own modules.
    from analysis.compare_cli import register as register_compare
    from workload.shell.cloud import register as register_cloud
    from workload.shell.remote import register as register_remote

    register_compare(sub)
    register_cloud(sub)
    register_remote(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    handler: Handler = args.handler
    try:
        return handler(args)
    except ScenarioError as exc:
        for line in exc.lines:
            _err(line)
        return exc.exit_code
    except UserError as exc:
        _err(str(exc))
        return exc.exit_code
    except (BrokerError, RunFailed) as exc:
        _err(str(exc))
        return 1
    except KeyboardInterrupt as exc:
        from workload.engine.signals import exit_code, signal_name

        name = signal_name(exc)
        _err(f"interrupted ({name})")
        return exit_code(signal.Signals[name])
    except BrokenPipeError:
        return 1  # the reader went away (e.g. `| head`); nothing left to say


if __name__ == "__main__":
    sys.exit(main())
