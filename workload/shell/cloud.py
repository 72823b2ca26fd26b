"""``brokerbench cloud``: what follows ``pulumi up`` — and what the client machines run.

* ``status`` / ``wait``: progress of a run from its markers in S3 (every node of every
  sweep point posts one when it is done), until all are in.
* ``analyze``: submit the analysis job to the stack's EMR Serverless application and
  follow it to the end.
* ``fetch``: download the analysis (and with ``--raw`` the raw records) into
  ``results/<run-id>/`` and print the summary table.
* ``plan``: before ``pulumi up``, a stack's machines, its price per hour, the estimated
  cost of its sweep, how the fleet stops and what it may cost until then (against a cost
  cap), and the account quotas it needs (checked where credentials allow).
* ``down``: after the run, stop the run's machines; keep the results bucket, or with
  ``--empty-bucket`` delete all its versions and then it.
* ``ami``: the current Debian 12 image of a region, to pin in a stack (``brokerbench:ami``).
* ``client``: the client-machine agent (:mod:`workload.engine.aws.agent`), started by cloud-init.

A run is named by ``--stack NAME`` (read from ``pulumi stack output``) or by ``--bucket``
and ``--run-id`` (plus ``--emr-application`` and ``--emr-role`` for ``analyze``).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

from workload.model.bounds import parse_duration
from workload.model.errors import UserError
from workload.model.layout import LAYOUT
from workload.model.sections import PASSWORD_ENV
from workload.shell.cloud_ami import cmd_ami
from workload.shell.cloud_analyze import cmd_analyze
from workload.shell.cloud_down import cmd_down
from workload.shell.cloud_fetch import cmd_fetch
from workload.shell.cloud_plan import cmd_plan
from workload.shell.cloud_run import aws_client
from workload.shell.cloud_status import cmd_status, cmd_wait


def cmd_client(args: argparse.Namespace) -> int:
    from workload.engine.aws.agent import (
        PASSWORD_PARAMETER_ENV,
        CliCommands,
        ClientAgent,
        RunStore,
        read_parameter,
    )

    def log(line: str) -> None:
        print(f"{time.strftime('%H:%M:%S')} {line}", flush=True)

    parameter = os.environ.get(PASSWORD_PARAMETER_ENV, "")
    if parameter:  # the stack's broker password, for the prepare and node subprocesses
        password = read_parameter(aws_client("ssm", args.region), parameter, log)
        if password is None:
            return 1
        os.environ[PASSWORD_ENV] = password
    store = RunStore(aws_client("s3", args.region), args.bucket, args.run_id)
    commands = CliCommands(args.role, args.node, args.run_id, args.scenario, args.results, log)
    agent = ClientAgent(
        args.role,
        args.node,
        store,
        args.scenario,
        args.results,
        commands,
        log,
        broker_wait=args.broker_wait,
    )
    code = agent.run()
    if args.log_file and args.log_file.exists():
        try:
            store.upload(args.log_file, LAYOUT.agent_log(args.role, args.node))
        except Exception as exc:
            log(f"could not upload {args.log_file}: {exc}")
    return code


# -- argument parsing --------------------------------------------------------------------


def _seconds(value: str) -> float:
    try:
        return float(parse_duration(value))
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _target(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--stack", help="Pulumi stack of this project (reads its outputs)")
    parser.add_argument("--bucket", help="results bucket (instead of --stack)")
    parser.add_argument("--run-id", help="run id (instead of --stack)")
    parser.add_argument("--region", help="AWS region (default: the stack's, or AWS_REGION)")


def register(subparsers: Any) -> None:
    """Add the ``cloud`` command group (handlers: ``args.handler(args) -> exit code``)."""
    cloud = subparsers.add_parser(
        "cloud",
        help="AWS runs: plan and pin the image, wait for results, analyse on EMR, fetch the "
        "report, stop the stack",
    )
    sub = cloud.add_subparsers(dest="cloud_command", required=True, metavar="CLOUD_COMMAND")
    _before(sub)
    _during(sub)
    _after(sub)


def _before(sub: Any) -> None:
    """``plan`` and ``ami``: before ``pulumi up``."""
    plan = sub.add_parser(
        "plan",
        help="before pulumi up: a stack's machines, $/hour, the sweep's cost, how it stops, "
        "quota needs",
    )
    plan.add_argument("--stack", required=True, help="stack name (stacks/Pulumi.NAME.yaml)")
    plan.add_argument(
        "--scenario",
        type=Path,
        help="price this scenario instead of the stack's brokerbench:scenario",
    )
    plan.add_argument(
        "--max-usd",
        type=float,
        help="cost cap: refuse a fleet that may cost more before it stops itself "
        "(default: the stack's brokerbench:maxUsd)",
    )
    plan.add_argument("--region", help="region of the quota check (default: the stack's)")
    plan.set_defaults(handler=cmd_plan)

    ami = sub.add_parser(
        "ami", help="print the current Debian 12 image id of a region (for brokerbench:ami)"
    )
    ami.add_argument("--region", required=True, help="AWS region, e.g. us-east-1")
    ami.set_defaults(handler=cmd_ami)


def _during(sub: Any) -> None:
    """``status``, ``wait``, and ``client`` (what a client machine runs)."""
    status = sub.add_parser("status", help="show which nodes of a run have posted results")
    _target(status)
    status.set_defaults(handler=cmd_status)

    wait = sub.add_parser("wait", help="wait until every node of a run has posted its results")
    _target(wait)
    wait.add_argument("--timeout", type=_seconds, default=6 * 3600.0, help='e.g. "3h" (default 6h)')
    wait.add_argument("--poll", type=_seconds, default=30.0, help="seconds between checks")
    wait.set_defaults(handler=cmd_wait)

    client = sub.add_parser("client", help="(on a client machine) run this node's part of a run")
    client.add_argument("scenario", type=Path, help="the scenario TOML written by cloud-init")
    client.add_argument("--role", choices=("sender", "receiver"), required=True)
    client.add_argument("--node", type=int, required=True)
    client.add_argument("--run-id", required=True)
    client.add_argument("--bucket", required=True)
    client.add_argument("--region")
    client.add_argument("--results", type=Path, default=Path("/var/lib/brokerbench/results"))
    client.add_argument("--broker-wait", type=_seconds, default=1800.0)
    client.add_argument("--log-file", type=Path, default=Path("/var/log/brokerbench-client.log"))
    client.set_defaults(handler=cmd_client)


def _after(sub: Any) -> None:
    """``analyze``, ``fetch`` and ``down``: after the run."""
    analyze = sub.add_parser("analyze", help="run the analysis job of a run on EMR Serverless")
    _target(analyze)
    analyze.add_argument("--emr-application", help="EMR Serverless application id")
    analyze.add_argument("--emr-role", help="execution role ARN of the job")
    analyze.add_argument("--no-wait", action="store_true", help="submit and return")
    analyze.add_argument("--timeout", type=_seconds, default=2 * 3600.0)
    analyze.add_argument("--poll", type=_seconds, default=15.0)
    analyze.set_defaults(handler=cmd_analyze)

    fetch = sub.add_parser("fetch", help="download a run's analysis and print its summary")
    _target(fetch)
    fetch.add_argument("--results", type=Path, default=Path("results"), help="default: results/")
    fetch.add_argument("--raw", action="store_true", help="also the raw records (large)")
    fetch.set_defaults(handler=cmd_fetch)

    down = sub.add_parser(
        "down",
        help="after a run: stop its machines; keep the results bucket, or empty and delete it",
    )
    down.add_argument("--stack", required=True, help="stack name (stacks/Pulumi.NAME.yaml)")
    down.add_argument("--run-id", help="the run (default: the stack's brokerbench:runId)")
    down.add_argument(
        "--all-runs", action="store_true", help="stop the machines of every run of the stack"
    )
    down.add_argument(
        "--empty-bucket",
        action="store_true",
        help="delete every object version and delete marker of the results bucket, then it",
    )
    down.add_argument("--bucket", help="the results bucket (default: the run's, by its tags)")
    down.add_argument("--region", help="AWS region (default: the stack's aws:region)")
    down.set_defaults(handler=cmd_down)


def main(argv: list[str] | None = None) -> int:
    """``python -m workload.shell.cloud …``: the same commands without the rest of the CLI."""
    parser = argparse.ArgumentParser(prog="brokerbench")
    register(parser.add_subparsers(dest="command", required=True))
    args = parser.parse_args(argv)
    try:
        code: int = args.handler(args)
        return code
    except UserError as exc:
        print(f"brokerbench: {exc}", file=sys.stderr)
        return exc.exit_code


if __name__ == "__main__":
    sys.exit(main())
