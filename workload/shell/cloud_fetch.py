"""``brokerbench cloud fetch``: download the analysis (and with ``--raw`` the raw records)
into ``results/<run-id>/``, print the summary table and write the report: the job on EMR
writes the summary and the tables the report is drawn from, and the report is rendered
here from them, as a local run's is (:func:`analysis.report.write_html`)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from workload.model.errors import RunFailed, UserError, one_line
from workload.model.layout import LAYOUT
from workload.shell.cloud_run import CloudRun, aws_client, manifest_object, resolve_run


def fetch_run(s3: Any, run: CloudRun, results: Path, raw: bool) -> Path:
    """Download the run's context, node statuses, fault timelines, analysis (and raw
    records) to ``results``; with the raw records, ``brokerbench report`` on the download
    analyses it here, the faults' gaps and losses included."""
    from workload.engine.aws.store import RunStore

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
        _, answer = manifest_object(s3, run)
        (run_dir / "cloud-manifest.json").write_bytes(answer["Body"].read())
    except UserError as exc:
        print(f"note: no manifest ({exc})", file=sys.stderr)
    print(f"fetched {len(keys)} file(s) of {run.run_uri} into {run_dir}")
    return run_dir


def print_summary(run_dir: Path) -> bool:
    """The fetched run's table, as a local run prints it (incomplete and not-drained points
    say so), and its report written unless the download brought one; False when the run
    has no analysis yet."""
    from analysis.console import run_summary
    from analysis.summary_row import read_summary_csv
    from workload.model.record import BrokerRecord, RunContext

    summary = run_dir / LAYOUT.summary
    if not summary.exists():
        return False
    rows = read_summary_csv(summary)
    context_file = run_dir / LAYOUT.context
    recorded = json.loads(context_file.read_text()) if context_file.exists() else {}
    context = RunContext.of(recorded)
    if context.broker == BrokerRecord():  # none recorded: the summary's broker, or the run
        context.broker = BrokerRecord(
            title=rows[0].get("broker", run_dir.name) if rows else run_dir.name
        )
    print(run_summary(context, rows))
    report = run_dir / LAYOUT.report
    if not report.exists():
        _write_report(run_dir, recorded or context, rows)
    if report.exists():
        print(f"report: {report}")
    return True


def _write_report(run_dir: Path, context: Any, rows: Any) -> None:
    """The run's report from the fetched analysis; one line on stderr when it cannot be
    written (plotly missing: the ``analysis`` extra)."""
    from analysis.report import write_html

    try:
        write_html(run_dir, context, rows)
    except (UserError, RunFailed, OSError) as exc:
        print(f"brokerbench: no report: {one_line(str(exc))}", file=sys.stderr)


def cmd_fetch(args: argparse.Namespace) -> int:
    run = resolve_run(args)
    run_dir = fetch_run(aws_client("s3", run.region), run, args.results, args.raw)
    if print_summary(run_dir):
        return 0
    hint = "brokerbench report " + str(run_dir) if args.raw else "brokerbench cloud fetch --raw …"
    print(
        f"brokerbench: no analysis in {run.run_uri}{LAYOUT.analysis}/ yet: run 'brokerbench cloud analyze', "
        f"or analyse here with: {hint}",
        file=sys.stderr,
    )
    return 1
