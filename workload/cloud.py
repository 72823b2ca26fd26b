"""``brokerbench cloud``: what follows ``pulumi up`` — and what the client machines run.

* ``status`` / ``wait``: progress of a run from its markers in S3 (every node of every
  sweep point posts one when it is done), until all are in.
* ``analyze``: submit the analysis job to the stack's EMR Serverless application and
  follow it to the end.
* ``fetch``: download the analysis (and with ``--raw`` the raw records) into
  ``results/<run-id>/`` and print the summary table.
* ``client``: the client-machine agent (:mod:`workload.aws.agent`), started by cloud-init.

A run is named by ``--stack NAME`` (read from ``pulumi stack output``) or by ``--bucket``
and ``--run-id`` (plus ``--emr-application`` and ``--emr-role`` for ``analyze``).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from workload.model.bounds import parse_duration
from workload.model.errors import UserError
from workload.model.layout import LAYOUT
from workload.model.record import ManifestPoint
from workload.model.sections import PASSWORD_ENV

if TYPE_CHECKING:
    from infra.plan import BucketLayout

TERMINAL_JOB_STATES = {"SUCCESS", "FAILED", "CANCELLED"}
#: The Pulumi project (``Pulumi.yaml``) the ``--stack`` option refers to.
PROJECT_DIR = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class CloudRun:
    """One deployed run: where its files are and what analyses it."""

    bucket: str
    run_id: str
    region: str | None = None
    emr_application_id: str = ""
    emr_execution_role_arn: str = ""

    @property
    def run_prefix(self) -> str:
        return LAYOUT.prefix(self.run_id)

    @property
    def run_uri(self) -> str:
        return f"s3://{self.bucket}/{self.run_prefix}"

    @property
    def bucket_layout(self) -> BucketLayout:
        """Its keys in the bucket (only the fixed artifact names are read: no wheel name)."""
        from infra.plan import BucketLayout

        return BucketLayout(self.run_id, wheel_name="")

    @property
    def manifest_key(self) -> str:
        return self.bucket_layout.manifest_key


def stack_outputs(stack: str) -> dict[str, Any]:
    """``pulumi stack output --json`` of a stack of this project."""
    try:
        done = subprocess.run(
            ["pulumi", "stack", "output", "--json", "--show-secrets", "--stack", stack],
            capture_output=True,
            text=True,
            check=False,
            timeout=120,
            cwd=PROJECT_DIR if (PROJECT_DIR / "Pulumi.yaml").exists() else None,
        )
    except FileNotFoundError:
        raise UserError(
            "the pulumi CLI is not installed; give --bucket and --run-id instead of --stack"
        ) from None
    if done.returncode != 0:
        raise UserError(f"pulumi stack output --stack {stack}: {done.stderr.strip()}")
    outputs: dict[str, Any] = json.loads(done.stdout or "{}")
    return outputs


def resolve_run(args: argparse.Namespace) -> CloudRun:
    outputs = stack_outputs(args.stack) if args.stack else {}
    bucket = args.bucket or outputs.get("bucket")
    run_id = args.run_id or outputs.get("run_id")
    if not bucket or not run_id:
        raise UserError("name the run: --stack NAME, or --bucket BUCKET --run-id RUN_ID")
    return CloudRun(
        bucket=bucket,
        run_id=run_id,
        region=args.region or outputs.get("region"),
        emr_application_id=getattr(args, "emr_application", None)
        or outputs.get("emr_application_id", ""),
        emr_execution_role_arn=getattr(args, "emr_role", None)
        or outputs.get("emr_execution_role_arn", ""),
    )


def _client(service: str, region: str | None) -> Any:
    import boto3

    return boto3.client(service, region_name=region)


# -- status / wait -----------------------------------------------------------------------


@dataclass(frozen=True)
class Progress:
    expected: int
    done: int
    failed: list[str]
    missing: list[str]
    #: Nodes still awaited that have not posted their started marker (not booted or not
    #: installed yet, or never will: the coordinator then closes their points).
    not_started: list[str] = field(default_factory=list)

    @property
    def complete(self) -> bool:
        return not self.missing


def read_manifest(s3: Any, run: CloudRun) -> dict[str, Any]:
    """The run manifest the stack uploaded (nodes, sweep points, instance types …)."""
    try:
        body = s3.get_object(Bucket=run.bucket, Key=run.manifest_key)["Body"].read()
    except Exception as exc:
        raise UserError(
            f"s3://{run.bucket}/{run.manifest_key}: cannot read the manifest ({exc})"
        ) from None
    manifest: dict[str, Any] = json.loads(body)
    return manifest


def run_progress(s3: Any, run: CloudRun) -> Progress:
    """Which nodes of which sweep points have posted their done marker (from the manifest),
    and which nodes still awaited have not started."""
    from workload.aws.store import RunStore

    manifest = read_manifest(s3, run)
    store = RunStore(s3, run.bucket, run.run_id)
    present = store.keys(LAYOUT.markers)
    failed, missing, done = [], [], 0
    awaited: set[tuple[str, int]] = set()
    for point in (ManifestPoint.model_validate(p) for p in manifest["points"]):
        for role, count in (("sender", point.senders), ("receiver", point.receivers)):
            for node in range(count):
                key = LAYOUT.done(point.index, role, node)
                if key not in present:
                    missing.append(f"point {point.index} {role} {node}")
                    awaited.add((role, node))
                    continue
                done += 1
                marker = store.read_json(key) or {}
                if not marker.get("ok"):
                    failed.append(
                        f"point {point.index} {role} {node}: {marker.get('error') or 'failed'}"
                    )
    not_started = [
        f"{role} {node} (no {LAYOUT.started(role, node)} marker)"
        for role, node in sorted(awaited)
        if LAYOUT.started(role, node) not in present
    ]
    return Progress(done + len(missing), done, failed, missing, not_started)


def cmd_status(args: argparse.Namespace) -> int:
    run = resolve_run(args)
    progress = run_progress(_client("s3", run.region), run)
    _print_progress(run, progress)
    return 1 if progress.failed else 0


def cmd_wait(args: argparse.Namespace) -> int:
    run = resolve_run(args)
    s3 = _client("s3", run.region)
    deadline = time.monotonic() + args.timeout
    last = -1
    while True:
        progress = run_progress(s3, run)
        if progress.done != last:
            print(f"{run.run_id}: {progress.done}/{progress.expected} node results in", flush=True)
            last = progress.done
        if progress.complete or time.monotonic() >= deadline:
            break
        time.sleep(args.poll)
    _print_progress(run, progress)
    if not progress.complete:
        print(f"brokerbench: gave up waiting after {args.timeout:.0f} s", file=sys.stderr)
        return 1
    return 1 if progress.failed else 0


def _print_progress(run: CloudRun, progress: Progress) -> None:
    print(f"run {run.run_id} ({run.run_uri}): {progress.done}/{progress.expected} node results")
    for line in progress.failed:
        print(f"  failed: {line}")
    for line in progress.not_started:
        print(f"  not started: {line}")
    for line in progress.missing[:20]:
        print(f"  waiting for: {line}")
    if len(progress.missing) > 20:
        print(f"  … and {len(progress.missing) - 20} more")


# -- analyze -----------------------------------------------------------------------------


#: What the analysis job imports beyond PySpark; EMR's own images are not documented to
#: provide them (nor Python ≥ 3.11), so the job runs only on a custom image that does.
ANALYSIS_NEEDS = "Python ≥ 3.11 with pyarrow, pydantic and boto3"


def analysis_job_driver(run: CloudRun, python: str = "") -> dict[str, Any]:
    """The ``sparkSubmit`` job driver of a run's analysis, as EMR Serverless takes it.

    The entry script and the code (the wheel, named ``.zip`` for ``--py-files``) are the
    ones the stack uploaded; the argument is the run's S3 prefix; ``python`` (the image's
    interpreter, the stack's ``emrPython``) runs driver and executors. ``cloud analyze``
    submits exactly this, and the local test of the job runs spark-submit with it.
    """
    layout = run.bucket_layout
    parameters = [f"--py-files s3://{run.bucket}/{layout.py_files_key}"]
    if python:
        parameters += [
            f"--conf spark.emr-serverless.driverEnv.PYSPARK_PYTHON={python}",
            f"--conf spark.executorEnv.PYSPARK_PYTHON={python}",
        ]
    return {
        "entryPoint": f"s3://{run.bucket}/{layout.entry_key}",
        "entryPointArguments": [run.run_uri],
        "sparkSubmitParameters": " ".join(parameters),
    }


def _require_application(run: CloudRun) -> None:
    if not run.emr_application_id or not run.emr_execution_role_arn:
        raise UserError("no EMR application/role: use --stack, or --emr-application and --emr-role")


def analysis_image(emr: Any, run: CloudRun) -> str:
    """The custom image of the run's EMR Serverless application; a :class:`UserError`
    saying what to do when it has none (the job cannot run on EMR's own image)."""
    _require_application(run)
    try:
        application = emr.get_application(applicationId=run.emr_application_id)["application"]
    except Exception as exc:
        raise UserError(
            f"EMR Serverless application {run.emr_application_id}: cannot read it ({exc})"
        ) from None
    image = str((application.get("imageConfiguration") or {}).get("imageUri") or "")
    if not image:
        raise UserError(
            f"EMR Serverless application {run.emr_application_id} has no custom image, and "
            f"the analysis job needs {ANALYSIS_NEEDS}: build the image README.md describes "
            "(On AWS, the analysis image), set brokerbench:emrImage to its URI and run "
            "pulumi up, then analyze again"
        )
    return image


def submit_analysis(emr: Any, run: CloudRun, python: str = "") -> str:
    """Start the analysis job run on EMR Serverless; its job run id.

    ``python`` is the job's interpreter (the stack's ``emrPython``, from the manifest).
    """
    _require_application(run)
    response = emr.start_job_run(
        applicationId=run.emr_application_id,
        executionRoleArn=run.emr_execution_role_arn,
        name=f"brokerbench-{run.run_id}",
        jobDriver={"sparkSubmit": analysis_job_driver(run, python)},
        configurationOverrides={
            "monitoringConfiguration": {
                "s3MonitoringConfiguration": {"logUri": f"{run.run_uri}{LAYOUT.analysis_logs}"}
            }
        },
    )
    job_run_id: str = response["jobRunId"]
    return job_run_id


def follow_job(emr: Any, run: CloudRun, job_run_id: str, poll: float, timeout: float) -> str:
    """Print state changes until the job ends (or ``timeout``); its final state."""
    deadline = time.monotonic() + timeout
    state = ""
    while True:
        job = emr.get_job_run(applicationId=run.emr_application_id, jobRunId=job_run_id)["jobRun"]
        if job["state"] != state:
            state = job["state"]
            detail = f" ({job['stateDetails']})" if job.get("stateDetails") else ""
            print(f"analysis job {job_run_id}: {state}{detail}", flush=True)
        if state in TERMINAL_JOB_STATES or time.monotonic() >= deadline:
            return state
        time.sleep(poll)


def cmd_analyze(args: argparse.Namespace) -> int:
    run = resolve_run(args)
    emr = _client("emr-serverless", run.region)
    image = analysis_image(emr, run)  # refuse before submitting a job that cannot run
    manifest = read_manifest(_client("s3", run.region), run)
    job_run_id = submit_analysis(emr, run, str(manifest.get("emr_python", "")))
    print(
        f"submitted the analysis of {run.run_id} to EMR Serverless (image {image}): "
        f"job run {job_run_id}"
    )
    if args.no_wait:
        return 0
    state = follow_job(emr, run, job_run_id, args.poll, args.timeout)
    if state != "SUCCESS":
        print(
            f"brokerbench: analysis job ended {state or 'unknown'}; logs: {run.run_uri}{LAYOUT.analysis_logs}",
            file=sys.stderr,
        )
        return 1
    print(
        f"analysis written to {run.run_uri}{LAYOUT.analysis}/ — fetch it with: brokerbench cloud fetch"
    )
    return 0


# -- fetch -------------------------------------------------------------------------------


def fetch_run(s3: Any, run: CloudRun, results: Path, raw: bool) -> Path:
    """Download the run's context, node statuses, fault timelines, analysis (and raw
    records) to ``results``; with the raw records, ``brokerbench report`` on the download
    analyses it here, the faults' gaps and losses included."""
    from workload.aws.store import RunStore

    store = RunStore(s3, run.bucket, run.run_id)
    run_dir = results / run.run_id
    folders = [LAYOUT.nodes, LAYOUT.faults, LAYOUT.analysis, LAYOUT.logs] + (
        [LAYOUT.raw] if raw else []
    )
    wanted = (LAYOUT.context, *(f"{folder}/" for folder in folders))
    keys = sorted(
        k for k in store.keys("") if k.startswith(wanted) and not k.startswith(LAYOUT.analysis_logs)
    )
    for key in keys:
        target = run_dir / key
        target.parent.mkdir(parents=True, exist_ok=True)
        s3.download_file(run.bucket, store.prefix + key, str(target))
    try:
        s3.download_file(run.bucket, run.manifest_key, str(run_dir / "cloud-manifest.json"))
    except Exception as exc:
        print(f"note: no manifest ({exc})", file=sys.stderr)
    print(f"fetched {len(keys)} file(s) of {run.run_uri} into {run_dir}")
    return run_dir


def print_summary(run_dir: Path) -> bool:
    """The fetched run's table, as a local run prints it (incomplete and not-drained points
    say so); False when the run has no analysis yet."""
    from analysis.columns import read_summary_csv
    from analysis.console import run_summary
    from workload.model.record import BrokerRecord, RunContext

    summary = run_dir / LAYOUT.summary
    if not summary.exists():
        return False
    rows = read_summary_csv(summary)
    context_file = run_dir / LAYOUT.context
    context = RunContext.of(json.loads(context_file.read_text()) if context_file.exists() else {})
    if context.broker == BrokerRecord():  # none recorded: the summary's broker, or the run
        context.broker = BrokerRecord(
            title=rows[0].get("broker", run_dir.name) if rows else run_dir.name
        )
    print(run_summary(context, rows))
    return True


def cmd_fetch(args: argparse.Namespace) -> int:
    run = resolve_run(args)
    run_dir = fetch_run(_client("s3", run.region), run, args.results, args.raw)
    if print_summary(run_dir):
        report = run_dir / LAYOUT.report
        if report.exists():
            print(f"report: {report}")
        return 0
    hint = "brokerbench report " + str(run_dir) if args.raw else "brokerbench cloud fetch --raw …"
    print(
        f"brokerbench: no analysis in {run.run_uri}{LAYOUT.analysis}/ yet: run 'brokerbench cloud analyze', "
        f"or analyse here with: {hint}",
        file=sys.stderr,
    )
    return 1


# -- client (on the client machines) -----------------------------------------------------


def cmd_client(args: argparse.Namespace) -> int:
    from workload.aws.agent import (
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
        password = read_parameter(_client("ssm", args.region), parameter, log)
        if password is None:
            return 1
        os.environ[PASSWORD_ENV] = password
    store = RunStore(_client("s3", args.region), args.bucket, args.run_id)
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
        "cloud", help="AWS runs: wait for results, analyse on EMR, fetch the report"
    )
    sub = cloud.add_subparsers(dest="cloud_command", required=True, metavar="CLOUD_COMMAND")

    status = sub.add_parser("status", help="show which nodes of a run have posted results")
    _target(status)
    status.set_defaults(handler=cmd_status)

    wait = sub.add_parser("wait", help="wait until every node of a run has posted its results")
    _target(wait)
    wait.add_argument("--timeout", type=_seconds, default=6 * 3600.0, help='e.g. "3h" (default 6h)')
    wait.add_argument("--poll", type=_seconds, default=30.0, help="seconds between checks")
    wait.set_defaults(handler=cmd_wait)

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


def main(argv: list[str] | None = None) -> int:
    """``python -m workload.cloud …``: the same commands without the rest of the CLI."""
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
