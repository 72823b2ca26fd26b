"""``brokerbench cloud down --stack NAME``: stop what a stack bills by the hour, after a run.

It stops (not terminates) every pending or running machine tagged
``brokerbench:stack=NAME`` in the stack's region — broker and client machines alike;
``pulumi destroy`` removes them and the rest of the stack. It also stops the stack's EMR
Serverless application (cancelling a job still running on it) and waits until it is
STOPPED: EMR Serverless deletes only a STOPPED or CREATED application, so ``pulumi destroy``
right after ``cloud analyze`` would fail on it. The results bucket is kept
unless ``--empty-bucket`` is given: then every object version and delete marker in it is
deleted (a versioned bucket cannot be deleted otherwise), then the bucket. The bucket is
``--bucket``, or the one bucket tagged with the stack (it outlives ``pulumi destroy``).
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable, Iterator
from typing import Any

from infra.settings import StackConfigError, load_stack_config, stack_path
from workload.model.errors import UserError, one_line
from workload.shell.cloud_run import aws_client

#: The tag every resource of a stack carries (infra/program.py), valued with the stack name.
STACK_TAG = "brokerbench:stack"
#: S3's limit of keys per DeleteObjects request.
DELETE_BATCH = 1000
#: How often and how long ``down`` waits for the analysis application to stop.
EMR_POLL_S = 5.0
EMR_TIMEOUT_S = 600.0
#: Application states EMR Serverless deletes it in, and the job states still to cancel.
DELETABLE = ("STOPPED", "CREATED", "TERMINATED")
ACTIVE_JOBS = ["SUBMITTED", "PENDING", "SCHEDULED", "RUNNING", "QUEUED"]


class CloudFailed(UserError):
    """An AWS call failed: one line, exit 1."""

    exit_code = 1


def _aws_call(what: str, call: Any, **kwargs: Any) -> Any:
    """``call(**kwargs)``; a missing credential or a refused call as one line."""
    from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

    try:
        return call(**kwargs)
    except NoCredentialsError:
        raise UserError(
            f"{what}: no AWS credentials (set AWS_PROFILE, or run aws configure)"
        ) from None
    except (BotoCoreError, ClientError) as exc:
        raise CloudFailed(f"{what}: {one_line(str(exc))}") from None


def stop_machines(ec2: Any, stack: str) -> list[str]:
    """Stop every pending or running instance tagged with the stack; their ids."""
    filters = [
        {"Name": f"tag:{STACK_TAG}", "Values": [stack]},
        {"Name": "instance-state-name", "Values": ["pending", "running"]},
    ]
    pages = ec2.get_paginator("describe_instances").paginate(Filters=filters)
    found = _aws_call("describe the stack's machines", lambda: list(pages))
    ids = sorted(
        i["InstanceId"] for page in found for r in page["Reservations"] for i in r["Instances"]
    )
    for start in range(0, len(ids), DELETE_BATCH):
        _aws_call(
            "stop the machines", ec2.stop_instances, InstanceIds=ids[start : start + DELETE_BATCH]
        )
    return ids


def stack_applications(emr: Any, stack: str) -> list[dict[str, Any]]:
    """The EMR Serverless applications tagged with the stack (id, state)."""
    pages = emr.get_paginator("list_applications").paginate()
    found = _aws_call("list the EMR Serverless applications", lambda: list(pages))
    apps = []
    for app in (a for page in found for a in page["applications"]):
        detail = _aws_call(
            f"describe EMR Serverless application {app['id']}",
            emr.get_application,
            applicationId=app["id"],
        )["application"]
        if (detail.get("tags") or {}).get(STACK_TAG) == stack:
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
    state = _aws_call(f"describe {what}", emr.get_application, applicationId=application_id)[
        "application"
    ]["state"]
    if state in DELETABLE:
        return state, 0
    jobs = _aws_call(
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
        _aws_call(f"cancel job {job} of {what}", emr.cancel_job_run,
                  applicationId=application_id, jobRunId=job)  # fmt: skip
    waited = 0.0
    while True:
        if state in ("CREATING", "STARTING", "STARTED"):
            _stop(emr, what, application_id)  # refused while a job still ends: asked again
        state = _aws_call(f"describe {what}", emr.get_application, applicationId=application_id)[
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
        _aws_call(f"stop {what}", _raw_stop, emr=emr, application_id=application_id)
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


def stack_buckets(s3: Any, stack: str) -> list[str]:
    """The buckets tagged with the stack (a bucket without tags, or out of reach, is not)."""
    from botocore.exceptions import ClientError

    names = [b["Name"] for b in _aws_call("list the buckets", s3.list_buckets)["Buckets"]]
    found = []
    for name in names:
        try:
            tags = s3.get_bucket_tagging(Bucket=name)["TagSet"]
        except ClientError:  # no tags, another region's rules, no permission: not ours
            continue
        if {"Key": STACK_TAG, "Value": stack} in tags:
            found.append(name)
    return found


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
    entries = _aws_call(
        f"list the versions in s3://{bucket}", lambda: list(_versions(s3, bucket, page_size))
    )
    for start in range(0, len(entries), batch):
        chunk = entries[start : start + batch]
        answer = _aws_call(
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
    _aws_call(f"delete s3://{bucket}", s3.delete_bucket, Bucket=bucket)
    return len(entries)


def _the_bucket(s3: Any, stack: str, named: str | None) -> str | None:
    if named:
        return named
    found = stack_buckets(s3, stack)
    if len(found) > 1:
        raise UserError(
            f"{len(found)} buckets are tagged {STACK_TAG}={stack} ({', '.join(found)}): "
            "name one with --bucket"
        )
    return found[0] if found else None


def cmd_down(args: argparse.Namespace) -> int:
    try:
        config = load_stack_config(stack_path(args.stack))
    except StackConfigError as exc:
        raise UserError(one_line(str(exc))) from None
    region = args.region or config.region
    stopped = stop_machines(aws_client("ec2", region), config.name)
    if stopped:
        print(f"stopped {len(stopped)} machine(s) of stack {config.name}: {' '.join(stopped)}")
    else:
        print(f"no running machine tagged {STACK_TAG}={config.name} in {region}")
    print("volumes and the NAT gateway cost until pulumi destroy removes them")
    emr = aws_client("emr-serverless", region)
    for app in stack_applications(emr, config.name):
        state, cancelled = stop_application(emr, app["applicationId"])
        jobs = f", {cancelled} running job(s) cancelled" if cancelled else ""
        print(
            f"EMR Serverless application {app['applicationId']}: {state}{jobs} "
            "(pulumi destroy can delete it)"
        )
    s3 = aws_client("s3", region)
    bucket = _the_bucket(s3, config.name, args.bucket)
    if bucket is None:
        print(f"no bucket tagged {STACK_TAG}={config.name}: nothing to keep or delete")
    elif args.empty_bucket:
        count = empty_and_delete(s3, bucket)
        print(f"deleted s3://{bucket}: {count} object version(s) and delete marker(s), then it")
    else:
        print(
            f"kept s3://{bucket} with the results; --empty-bucket deletes it and all its versions"
        )
    return 0
