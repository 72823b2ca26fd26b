"""``brokerbench cloud status`` / ``wait``: the progress of a run from its markers in S3
(every node of every sweep point posts one when it is done), until all are in — or until
the run has ended without them (its end marker) or its machines have all stopped (their
time to live, or a failure), which ``wait`` notices rather than waiting on. A machine whose
set-up failed uploads its logs: ``status`` shows their last lines."""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from workload.model.errors import UserError
from workload.model.layout import LAYOUT
from workload.model.manifest import RunManifest
from workload.shell.cloud_fleet import fleet_line, machines
from workload.shell.cloud_run import (
    CloudRun,
    aws_client,
    manifest_object,
    read_manifest,
    resolve_run,
)

#: Lines of a failed machine's log ``status`` shows, and polls of ``wait`` between looks at
#: the machines.
FAILURE_LINES = 5
FLEET_EVERY = 10


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


def run_progress(s3: Any, run: CloudRun) -> Progress:
    """Which nodes of which sweep points have posted their done marker (from the manifest),
    and which nodes still awaited have not started."""
    from workload.engine.aws.store import RunStore

    manifest = read_manifest(s3, run)
    store = RunStore(s3, run.bucket, run.run_id)
    present = store.keys(LAYOUT.markers)
    failed, missing, done = [], [], 0
    awaited: set[tuple[str, int]] = set()
    for point in manifest.points:
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


def ttl_line(s3: Any, run: CloudRun) -> str:
    """When the fleet stops itself: its time to live after boot (from the manifest), the
    moment reckoned from the manifest's upload, which the machines boot around."""
    _, answer = manifest_object(s3, run)
    manifest = RunManifest.model_validate_json(answer["Body"].read())
    if not manifest.ttl_hours:
        return "machines: no time to live (brokerbench:ttlHours 0): they run until cloud down"
    uploaded = answer["LastModified"]
    stops = uploaded + timedelta(hours=manifest.ttl_hours)
    return (
        f"machines: each stops itself {manifest.ttl_hours} h after it booted, at about "
        f"{stops:%Y-%m-%d %H:%M} UTC (brokerbench:ttlHours; the manifest was uploaded at "
        f"{uploaded:%H:%M} UTC, as the machines booted)"
    )


def boot_failures(s3: Any, run: CloudRun, lines: int = FAILURE_LINES) -> list[str]:
    """For each machine whose set-up failed, its name and the last ``lines`` of its node
    log (the whole logs are beside them, under ``logs/boot/``)."""
    from workload.engine.aws.store import RunStore

    store = RunStore(s3, run.bucket, run.run_id)
    shown = []
    for key in sorted(k for k in store.keys(LAYOUT.boot_logs) if k.endswith(".failed.log")):
        machine = key.removeprefix(LAYOUT.boot_logs).removesuffix(".failed.log")
        body = s3.get_object(Bucket=run.bucket, Key=store.prefix + key)["Body"].read()
        tail = body.decode(errors="replace").strip().splitlines()[-lines:]
        shown.append(f"  set-up failed: {machine} (its logs: {store.uri(LAYOUT.boot_logs)}):")
        shown += [f"    {line}" for line in tail]
    return shown


def run_end(s3: Any, run: CloudRun) -> dict[str, Any] | None:
    """The run's end marker (None while the run goes on)."""
    from workload.engine.aws.store import RunStore

    return RunStore(s3, run.bucket, run.run_id).get_json(LAYOUT.ended)


def fleet_state(run: CloudRun) -> tuple[str, bool]:
    """How the run's machines stand (EC2, by the run's tag), and whether all have stopped;
    a line saying why not when EC2 cannot be asked."""
    try:
        return fleet_line(machines(aws_client("ec2", run.region), run=run.run_id))
    except UserError as exc:
        return f"machines: not known ({exc})", False


def cmd_status(args: argparse.Namespace) -> int:
    run = resolve_run(args)
    s3 = aws_client("s3", run.region)
    progress = run_progress(s3, run)
    _print_progress(s3, run, progress)
    ended = run_end(s3, run)
    if ended is not None:
        print(f"the run ended at {ended.get('at')}: every machine stops itself")
    print(fleet_state(run)[0])
    print(ttl_line(s3, run))
    return 1 if progress.failed else 0


def cmd_wait(args: argparse.Namespace) -> int:
    run = resolve_run(args)
    s3 = aws_client("s3", run.region)
    deadline = time.monotonic() + args.timeout
    last, polls, over = -1, 0, ""
    while True:
        progress = run_progress(s3, run)
        if progress.done != last:
            print(f"{run.run_id}: {progress.done}/{progress.expected} node results in", flush=True)
            last = progress.done
        if progress.complete or time.monotonic() >= deadline:
            break
        over = _over(s3, run, polls)
        if over:
            break
        polls += 1
        time.sleep(args.poll)
    _print_progress(s3, run, progress)
    if not progress.complete:
        reason = over or f"gave up waiting after {args.timeout:.0f} s"
        print(f"brokerbench: {reason}", file=sys.stderr)
        return 1
    return 1 if progress.failed else 0


def _over(s3: Any, run: CloudRun, polls: int) -> str:
    """Why the results still missing will not come ("" while they may): the run ended
    without them, or its machines have all stopped (looked at every few polls)."""
    ended = run_end(s3, run)
    if ended is not None:
        return f"the run ended at {ended.get('at')} without these results: they will not come"
    if polls % FLEET_EVERY:
        return ""
    line, stopped = fleet_state(run)
    if stopped:
        return f"{line.removeprefix('machines: ')}: the results still missing will not come"
    return ""


def _print_progress(s3: Any, run: CloudRun, progress: Progress) -> None:
    """How the run's nodes stand, and the last lines of each machine whose set-up failed."""
    print(f"run {run.run_id} ({run.run_uri}): {progress.done}/{progress.expected} node results")
    for line in progress.failed:
        print(f"  failed: {line}")
    for line in progress.not_started:
        print(f"  not started: {line}")
    for line in progress.missing[:20]:
        print(f"  waiting for: {line}")
    if len(progress.missing) > 20:
        print(f"  … and {len(progress.missing) - 20} more")
    for line in boot_failures(s3, run):
        print(line)
