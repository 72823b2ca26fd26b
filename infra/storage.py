"""The results bucket and the run's artifacts in it.

The bucket is private (ACLs disabled, every public-access block on), encrypted by default
(SSE-S3 with bucket keys), versioned, reachable over TLS only, and kept when the stack is
destroyed so that results outlive the fleet — with every one of those protections, each a
resource of its own that is kept with it. The artifacts are what client machines and the
analysis job read: the brokerbench wheel, the pip constraints that pin what client machines
install with it, the scenario and the EMR entry script, all under ``artifacts/<run-id>/``,
and the run's manifest beside its results (``runs/<run-id>/manifest.json``). Every one is
kept when the next run's ``up`` (another run id: other keys) or ``pulumi destroy`` drops it,
so an earlier run stays analysable with the code it ran (``cloud analyze --run-id``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pulumi
import pulumi_aws as aws

from infra.access import policy_document
from infra.constraints import Constraints
from infra.plan import BucketLayout


@dataclass(frozen=True)
class ResultsBucketArgs:
    tags: dict[str, str]
    #: Keep the bucket (and its results) when the stack is destroyed.
    keep_on_destroy: bool = True


class ResultsBucket(pulumi.ComponentResource):
    name: pulumi.Output[str]
    arn: pulumi.Output[str]

    def __init__(
        self, name: str, args: ResultsBucketArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("brokerbench:infra:ResultsBucket", name, None, opts)
        # The bucket and everything that configures it share one fate on pulumi destroy.
        child = pulumi.ResourceOptions(parent=self, retain_on_delete=args.keep_on_destroy)
        bucket = aws.s3.Bucket(name, force_destroy=False, tags=args.tags, opts=child)
        aws.s3.BucketOwnershipControls(
            f"{name}-ownership",
            bucket=bucket.id,
            rule=aws.s3.BucketOwnershipControlsRuleArgs(object_ownership="BucketOwnerEnforced"),
            opts=child,
        )
        block = aws.s3.BucketPublicAccessBlock(
            f"{name}-public-access",
            bucket=bucket.id,
            block_public_acls=True,
            block_public_policy=True,
            ignore_public_acls=True,
            restrict_public_buckets=True,
            opts=child,
        )
        aws.s3.BucketServerSideEncryptionConfiguration(
            f"{name}-encryption",
            bucket=bucket.id,
            rules=[
                aws.s3.BucketServerSideEncryptionConfigurationRuleArgs(
                    apply_server_side_encryption_by_default=aws.s3.BucketServerSideEncryptionConfigurationRuleApplyServerSideEncryptionByDefaultArgs(
                        sse_algorithm="AES256"
                    ),
                    bucket_key_enabled=True,
                )
            ],
            opts=child,
        )
        aws.s3.BucketVersioning(
            f"{name}-versioning",
            bucket=bucket.id,
            versioning_configuration=aws.s3.BucketVersioningVersioningConfigurationArgs(
                status="Enabled"
            ),
            opts=child,
        )
        aws.s3.BucketPolicy(
            f"{name}-tls-only",
            bucket=bucket.id,
            policy=bucket.arn.apply(_tls_only_policy),
            opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=[block])),
        )
        self.name = bucket.bucket
        self.arn = bucket.arn
        self.register_outputs({"name": self.name, "arn": self.arn})


def _tls_only_policy(arn: str) -> str:
    return policy_document(
        {
            "Sid": "DenyInsecureTransport",
            "Effect": "Deny",
            "Principal": "*",
            "Action": "s3:*",
            "Resource": [arn, f"{arn}/*"],
            "Condition": {"Bool": {"aws:SecureTransport": "false"}},
        }
    )


@dataclass(frozen=True)
class RunArtifactsArgs:
    bucket: pulumi.Input[str]
    layout: BucketLayout
    wheel: Path
    scenario_toml: pulumi.Input[str]
    manifest: pulumi.Input[str]
    analysis_entry: str
    #: The versions client machines install with the wheel (:mod:`infra.constraints`).
    constraints: Constraints
    #: The analysis job's packed Python environment (:mod:`infra.pyenv`), if built.
    environment: Path | None = None


class RunArtifacts(pulumi.ComponentResource):
    """Everything the run reads from S3, uploaded before any client machine boots."""

    def __init__(
        self, name: str, args: RunArtifactsArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("brokerbench:infra:RunArtifacts", name, None, opts)
        # A run's files outlive its deployment: the next run's replace the declarations.
        child = pulumi.ResourceOptions(parent=self, retain_on_delete=True)
        layout = args.layout
        wheel = pulumi.FileAsset(str(args.wheel))
        objects: dict[str, dict[str, Any]] = {
            "wheel": dict(key=layout.wheel_key, source=wheel),
            "py-files": dict(key=layout.py_files_key, source=wheel),
            "constraints": dict(
                key=layout.constraints_key,
                content=args.constraints.text(),
                content_type="text/plain",
            ),
            "scenario": dict(
                key=layout.scenario_key, content=args.scenario_toml, content_type="text/plain"
            ),
            "manifest": dict(
                key=layout.manifest_key, content=args.manifest, content_type="application/json"
            ),
            "analysis-entry": dict(
                key=layout.entry_key, content=args.analysis_entry, content_type="text/x-python"
            ),
        }
        if args.environment is not None:
            objects["environment"] = dict(
                key=layout.environment_key, source=pulumi.FileAsset(str(args.environment))
            )
        if args.constraints.unpinned:
            pulumi.log.warn(
                "client machines install these unpinned (the newest their requirements allow; "
                "infra/clients.lock names them): "
                + "; ".join(f"{n}: {why}" for n, why in sorted(args.constraints.unpinned.items())),
                self,
            )
        self.keys = {label: str(spec["key"]) for label, spec in objects.items()}
        for label, spec in objects.items():
            aws.s3.BucketObjectv2(f"{name}-{label}", bucket=args.bucket, opts=child, **spec)
        self.register_outputs({"keys": self.keys})
