"""``brokerbench cloud down --stack NAME``: stop what a run bills by the hour, after it.

Everything it touches is the run's: every resource of a run is tagged with its stack and its
run id (:data:`infra.settings.STACK_TAG`, :data:`~infra.settings.RUN_TAG`), and the run is
``--run-id``, or the one the stack's file names (``brokerbench:runId``, which ``pulumi up``
writes there when it makes one). It stops (not terminates) the pending or running machines
tagged with both — broker and client machines alike — and names the machines of the
stack's other runs it leaves running (two people's runs of one stack in one account):
``--all-runs`` stops those too, and a stack whose file names no run asks for one of the
two. ``pulumi destroy`` removes the machines and the rest of the stack. It also stops the
run's EMR Serverless application (cancelling a job still running on it) and waits until it
is STOPPED: EMR Serverless deletes only a STOPPED or CREATED application, so ``pulumi
destroy`` right after ``cloud analyze`` would fail on it. The results bucket — ``--bucket``,
or the stack's bucket that is tagged with the run or holds its results, the newest if
several do (it outlives ``pulumi destroy``) — is kept unless ``--empty-bucket`` is given:
then every object version and delete marker in it is deleted (a versioned bucket cannot be
deleted otherwise), then the bucket.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Iterator
from typing import Any

from infra.settings import RUN_TAG, STACK_TAG, StackConfigError, load_stack_config, stack_path
from workload.model.errors import UserError, one_line
from workload.model.layout import LAYOUT
from workload.shell.cloud_fleet import RUNNING, CloudFailed, Machine, aws_call, by_run, machines
from workload.shell.cloud_run import aws_client

#: S3's limit of keys per DeleteObjects request.
DELETE_BATCH = 1000
#: How often and how long ``down`` waits for the analysis application to stop.
EMR_POLL_S = 5.0
EMR_TIMEOUT_S = 600.0
#: Application states EMR Serverless deletes it in, and the job states still to cancel.
DELETABLE = ("STOPPED", "CREATED", "TERMINATED")
ACTIVE_JOBS = ["SUBMITTED", "PENDING", "SCHEDULED", "RUNNING", "QUEUED"]


def stop_machines(ec2: Any, stack: str, run: str | None) -> tuple[list[str], list[Machine]]:
    """Stop the pending or running machines of the stack's run ``run`` (None: of every run);
    their ids, and the machines of the stack's other runs, left running."""
    running = machines(ec2, stack=stack, states=RUNNING)
    ours = [m for m in running if run is None or m.run == run]
    ids = sorted(m.id for m in ours)
    for start in range(0, len(ids), DELETE_BATCH):
        aws_call(
            "stop the machines", ec2.stop_instances, InstanceIds=ids[start : start + DELETE_BATCH]
        )
    return ids, [m for m in running if m not in ours]


def runs_line(found: list[Machine]) -> str:
    """The runs of ``found`` and how many machines each has."""
    return ", ".join(f"run {run or '(untagged)'} ({len(ms)})" for run, ms in by_run(found).items())


def stack_applications(emr: Any, stack: str, run: str | None = None) -> list[dict[str, Any]]:
    """The EMR Serverless applications tagged with the stack and the run (None: any)."""
    pages = emr.get_paginator("list_applications").paginate()
    found = aws_call("list the EMR Serverless applications", lambda: list(pages))
    apps = []
    for app in (a for page in found for a in page["applications"]):
        detail = aws_call(
            f"describe EMR Serverless application {app['id']}",
            emr.get_application,
            applicationId=app["id"],
        )["application"]
        tags = detail.get("tags") or {}
        if tags.get(STACK_TAG) == stack and (run is None or tags.get(RUN_TAG) == run):
            apps.append(detail)
    return apps


def stop_application(
    emr: Any,
    application_id: str,
    poll: float = EMR_POLL_S,
    timeout: float = EMR_TIMEOUT_S,
    sleep: Callable[[float], None] = time.sleep,
) -> tuple[str, int]:
    """Cancel the application's active jobs, stop it and wait until it is in a state EMR
    Serverless deletes it in; that state and how many jobs were cancelled."""
    what = f"EMR Serverless application {application_id}"
    state = aws_call(f"describe {what}", emr.get_application, applicationId=application_id)[
        "application"
    ]["state"]
    if state in DELETABLE:
        return state, 0
    jobs = aws_call(
        f"list the jobs of {what}",
        lambda: [
            j["id"]
            for page in emr.get_paginator("list_job_runs").paginate(
                applicationId=application_id, states=ACTIVE_JOBS
            )
            for j in page["jobRuns"]
        ],
    )
    for job in jobs:
        aws_call(f"cancel job {job} of {what}", emr.cancel_job_run,
                  applicationId=application_id, jobRunId=job)  # fmt: skip
    waited = 0.0
    while True:
        if state in ("CREATING", "STARTING", "STARTED"):
            _stop(emr, what, application_id)  # refused while a job still ends: asked again
        state = aws_call(f"describe {what}", emr.get_application, applicationId=application_id)[
            "application"
        ]["state"]
        if state in DELETABLE:
            return state, len(jobs)
        if waited >= timeout:
            raise CloudFailed(
                f"{what} is still {state} after {timeout:.0f} s; pulumi destroy deletes it "
                "only once it is STOPPED: run cloud down again later"
            )
        sleep(poll)
        waited += poll


def _stop(emr: Any, what: str, application_id: str) -> None:
    """Ask the application to stop; EMR refuses while a job is still ending (asked again)."""
    try:
        aws_call(f"stop {what}", _raw_stop, emr=emr, application_id=application_id)
    except _NotYet:
        pass


class _NotYet(Exception):
    """EMR Serverless refused to stop the application for now (jobs still ending)."""


def _raw_stop(emr: Any, application_id: str) -> None:
    from botocore.exceptions import ClientError

    try:
        emr.stop_application(applicationId=application_id)
    except ClientError as exc:
        if exc.response.get("Error", {}).get("Code") in (
            "ValidationException",
            "ConflictException",
        ):
            raise _NotYet() from None
        raise


def stack_buckets(s3: Any, stack: str) -> list[tuple[str, dict[str, str], Any]]:
    """The buckets tagged with the stack: name, tags and creation time, oldest first (a
    bucket without tags, or out of reach, is not)."""
    from botocore.exceptions import ClientError

    listed = aws_call("list the buckets", s3.list_buckets)["Buckets"]
    found = []
    for bucket in sorted(listed, key=lambda b: b.get("CreationDate") or 0):
        try:
            tags = s3.get_bucket_tagging(Bucket=bucket["Name"])["TagSet"]
        except ClientError:  # no tags, another region's rules, no permission: not ours
            continue
        values = {t["Key"]: t["Value"] for t in tags}
        if values.get(STACK_TAG) == stack:
            found.append((bucket["Name"], values, bucket.get("CreationDate")))
    return found


def run_buckets(s3: Any, stack: str, run: str | None) -> list[str]:
    """The stack's buckets of ``run``, oldest first: tagged with it (the bucket's tag names
    the last run deployed into it), else holding its results; every one of the stack's
    without a run."""
    found = stack_buckets(s3, stack)
    if run is None:
        return [name for name, _, _ in found]
    tagged = [name for name, tags, _ in found if tags.get(RUN_TAG) == run]
    return tagged or [
        name
        for name, _, _ in found
        if s3.list_objects_v2(Bucket=name, Prefix=LAYOUT.prefix(run), MaxKeys=1).get("KeyCount")
    ]


def _versions(s3: Any, bucket: str, page_size: int) -> Iterator[dict[str, str]]:
    """Every object version and delete marker of ``bucket``, page after page."""
    paginator = s3.get_paginator("list_object_versions")
    pages = paginator.paginate(Bucket=bucket, PaginationConfig={"PageSize": page_size})
    for page in pages:
        for entry in page.get("Versions", []) + page.get("DeleteMarkers", []):
            yield {"Key": entry["Key"], "VersionId": entry["VersionId"]}


def empty_and_delete(
    s3: Any, bucket: str, batch: int = DELETE_BATCH, page_size: int = DELETE_BATCH
) -> int:
    """Delete every version and delete marker of ``bucket`` (``batch`` per request), then the
    bucket; how many versions and markers were deleted."""
    entries = aws_call(
        f"list the versions in s3://{bucket}", lambda: list(_versions(s3, bucket, page_size))
    )
    for start in range(0, len(entries), batch):
        chunk = entries[start : start + batch]
        answer = aws_call(
            f"empty s3://{bucket}",
            s3.delete_objects,
            Bucket=bucket,
            Delete={"Objects": chunk, "Quiet": True},
        )
        errors = answer.get("Errors", [])
        if errors:
            first = errors[0]
            raise CloudFailed(
                f"empty s3://{bucket}: {len(errors)} not deleted, e.g. {first.get('Key')}: "
                f"{first.get('Code')} {first.get('Message', '')}".rstrip()
            )
    aws_call(f"delete s3://{bucket}", s3.delete_bucket, Bucket=bucket)
    return len(entries)


def _the_bucket(s3: Any, stack: str, run: str | None, named: str | None, empty: bool) -> str | None:
    """The bucket ``down`` keeps or empties: named, or the run's (the newest of several,
    except to empty one)."""
    if named:
        return named
    found = run_buckets(s3, stack, run)
    if len(found) > 1 and empty:
        raise UserError(
            f"{len(found)} buckets of stack {stack} hold run {run} ({', '.join(found)}): "
            "name the one to empty with --bucket"
        )
    return found[-1] if found else None


def _run_of(args: argparse.Namespace, stack: str, named: str | None, region: str | None) -> str:
    """The run ``down`` is about: ``--run-id``, or the one the stack's file names; with
    neither, a :class:`UserError` naming the runs that are running."""
    run = args.run_id or named
    if run:
        return str(run)
    running = machines(aws_client("ec2", region), stack=stack, states=RUNNING)
    found = runs_line(running) if running else "none is running"
    raise UserError(
        f"stack {stack}: which run? its file names none (brokerbench:runId): --run-id RUN "
        f"stops one run's machines, --all-runs every run's ({found})"
    )


def cmd_down(args: argparse.Namespace) -> int:
    try:
        config = load_stack_config(stack_path(args.stack))
    except StackConfigError as exc:
        raise UserError(one_line(str(exc))) from None
    region, stack = args.region or config.region, config.name
    run = None if args.all_runs else _run_of(args, stack, config.settings.run_id, region)
    what = f"stack {stack}" + (f", run {run}" if run else ", every run")
    stopped, others = stop_machines(aws_client("ec2", region), stack, run)
    if stopped:
        print(f"stopped {len(stopped)} machine(s) of {what}: {' '.join(stopped)}")
    else:
        print(f"no running machine of {what} in {region}")
    if others:
        print(f"left running, of other runs of stack {stack}: {runs_line(others)}; "
              "--all-runs stops them too")  # fmt: skip
    print("volumes and the NAT gateway cost until pulumi destroy removes them")
    emr = aws_client("emr-serverless", region)
    for app in stack_applications(emr, stack, run):
        state, cancelled = stop_application(emr, app["applicationId"])
        jobs = f", {cancelled} running job(s) cancelled" if cancelled else ""
        print(
            f"EMR Serverless application {app['applicationId']}: {state}{jobs} "
            "(pulumi destroy can delete it)"
        )
    s3 = aws_client("s3", region)
    bucket = _the_bucket(s3, stack, run, args.bucket, args.empty_bucket)
    if bucket is None:
        print(f"no bucket of {what}: nothing to keep or delete")
    elif args.empty_bucket:
        count = empty_and_delete(s3, bucket)
        print(f"deleted s3://{bucket}: {count} object version(s) and delete marker(s), then it")
    else:
        print(
            f"kept s3://{bucket} with the results; --empty-bucket deletes it and all its versions"
        )
    return 0
