"""One deployed AWS run as the ``cloud`` commands name it (:class:`CloudRun`, from ``--stack``
or ``--bucket`` and ``--run-id``), the clients they reach it with, and its manifest."""

from __future__ import annotations

import argparse
import json
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from workload.model.errors import UserError, one_line
from workload.model.layout import LAYOUT
from workload.model.manifest import RunManifest

if TYPE_CHECKING:
    from infra.plan import BucketLayout

#: The Pulumi project (``Pulumi.yaml``) the ``--stack`` option refers to.
PROJECT_DIR = Path(__file__).resolve().parents[2]


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

    @property
    def manifest_keys(self) -> tuple[str, str]:
        """Where the manifest is: beside the results, or (a run deployed before it moved
        there) among the artifacts."""
        return self.manifest_key, self.bucket_layout.legacy_manifest_key


#: What Pulumi says when a stack's passphrase is needed and not given.
PASSPHRASE_ERRORS = ("passphrase", "PULUMI_CONFIG_PASSPHRASE")


def stack_outputs(stack: str) -> dict[str, Any]:
    """``pulumi stack output --json`` of a stack of this project (none of its outputs is a
    secret, so none is asked for; a stack of ``pulumi login --local`` still needs its
    passphrase to be read: the error says how to give it)."""
    try:
        done = subprocess.run(
            ["pulumi", "stack", "output", "--json", "--stack", stack],
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
        error = one_line(done.stderr.strip())
        if any(word in error for word in PASSPHRASE_ERRORS):
            raise UserError(
                f"pulumi stack output --stack {stack}: {error}: the stack's secrets are "
                "encrypted with the passphrase given at pulumi stack init: export "
                "PULUMI_CONFIG_PASSPHRASE (or PULUMI_CONFIG_PASSPHRASE_FILE), or name the run "
                "with --bucket and --run-id"
            )
        raise UserError(f"pulumi stack output --stack {stack}: {error}")
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


def aws_client(service: str, region: str | None) -> Any:
    """A client from a session of its own: credentials are looked up now, never taken
    from a session an earlier call of this process resolved with other ones."""
    import boto3

    return boto3.session.Session(region_name=region).client(service)


def manifest_object(s3: Any, run: CloudRun) -> tuple[str, Any]:
    """The key of the run's manifest and S3's answer to getting it (:attr:`manifest_keys`)."""
    error: Exception | None = None
    for key in run.manifest_keys:
        try:
            return key, s3.get_object(Bucket=run.bucket, Key=key)
        except Exception as exc:
            error = error or exc
    raise UserError(
        f"s3://{run.bucket}/{run.manifest_key}: cannot read the manifest ({error})"
    ) from None


def read_manifest(s3: Any, run: CloudRun) -> RunManifest:
    """The run manifest the stack uploaded (nodes, sweep points, instance types …)."""
    key, answer = manifest_object(s3, run)
    try:
        return RunManifest.model_validate_json(answer["Body"].read())
    except ValidationError as exc:
        raise UserError(
            f"s3://{run.bucket}/{key}: not a run manifest ({one_line(str(exc))})"
        ) from None
