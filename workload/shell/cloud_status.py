"""``brokerbench cloud status`` / ``wait``: the progress of a run from its markers in S3
(every node of every sweep point posts one when it is done), until all are in."""

from __future__ import annotations

import argparse
import sys
import time
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from workload.model.layout import LAYOUT
from workload.shell.cloud_run import CloudRun, aws_client, read_manifest, resolve_run


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
    manifest = read_manifest(s3, run)
    if not manifest.ttl_hours:
        return "machines: no time to live (brokerbench:ttlHours 0): they run until cloud down"
    uploaded = s3.head_object(Bucket=run.bucket, Key=run.manifest_key)["LastModified"]
    stops = uploaded + timedelta(hours=manifest.ttl_hours)
    return (
        f"machines: each stops itself {manifest.ttl_hours} h after it booted, at about "
        f"{stops:%Y-%m-%d %H:%M} UTC (brokerbench:ttlHours; the manifest was uploaded at "
        f"{uploaded:%H:%M} UTC, as the machines booted)"
    )


def cmd_status(args: argparse.Namespace) -> int:
    run = resolve_run(args)
    s3 = aws_client("s3", run.region)
    progress = run_progress(s3, run)
    _print_progress(run, progress)
    print(ttl_line(s3, run))
    return 1 if progress.failed else 0


def cmd_wait(args: argparse.Namespace) -> int:
    run = resolve_run(args)
    s3 = aws_client("s3", run.region)
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
