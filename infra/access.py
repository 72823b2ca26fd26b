"""Least-privilege identities of one run.

* Client machines (instance profile): read ``artifacts/<run-id>/*``; read and write
  ``runs/<run-id>/*`` (results and the point barriers); list only those two prefixes; and,
  with a managed service (:mod:`infra.queue`), call the actions its declaration names on
  it and on the resources whose ARN starts with its ARN (the run's per-point queues).
  They read the broker password of the stack (its parameter only, see :mod:`infra.secrets`).
* Broker machines (instance profile): read the stack's secrets and the wheel (their agents
  run from it), write telemetry batches (``runs/<run-id>/raw/telemetry-stream/**.jsonl``,
  :mod:`workload.engine.aws.telemetry_agent`; the role is every broker machine's, so it cannot
  tell one machine's keys from another's) and their logs (``runs/<run-id>/logs/boot/*``),
  see whether the run's end marker is there (a listing of exactly its key); with faults,
  also list ``runs/<run-id>/control/faults/``, read the fault markers there (``*.begin``,
  ``*.end``) and write only acknowledgements (``*.ack``), see
  :mod:`workload.engine.aws.fault_agent`.
* The analysis job (EMR Serverless execution role): read the results and artifacts of every
  run in the stack's bucket — an earlier run stays analysable (``cloud analyze --run-id``) —
  and write only their analyses (``runs/*/analysis/*``).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field

import pulumi
import pulumi_aws as aws

from brokers.cloud import BROKER_PASSWORD
from infra.plan import BucketLayout
from workload.model.layout import BEGIN, END, LAYOUT

BEGIN_SUFFIX, END_SUFFIX = f".{BEGIN}", f".{END}"


@dataclass(frozen=True)
class RunAccessArgs:
    bucket: pulumi.Input[str]
    layout: BucketLayout
    tags: dict[str, str]
    #: ARN of the managed service; clients may call ``managed_actions`` on the resources
    #: whose ARN starts with it.
    managed_arn: pulumi.Input[str] | None = None
    #: What the system's :class:`~brokers.cloud.ManagedService` lets clients call.
    managed_actions: tuple[str, ...] = ()
    #: Secret name → ARN of its parameter (:class:`infra.secrets.StackSecrets`).
    secret_arns: dict[str, pulumi.Output[str]] = field(default_factory=dict)
    #: The scenario declares faults: broker machines run a fault agent (:func:`broker_s3_policy`).
    faults: bool = False


class RunAccess(pulumi.ComponentResource):
    client_profile: pulumi.Output[str]
    broker_profile: pulumi.Output[str]
    client_role_arn: pulumi.Output[str]
    analysis_role_arn: pulumi.Output[str]

    def __init__(
        self, name: str, args: RunAccessArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("brokerbench:infra:RunAccess", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        layout = args.layout

        def role(
            who: str, service: str, what: str, policies: dict[str, pulumi.Input[str] | None]
        ) -> aws.iam.Role:
            """A role only ``service`` may assume, with its inline policies (None: left out)."""
            created = aws.iam.Role(
                f"{name}-{who}",
                assume_role_policy=_trust(service),
                description=f"brokerbench {what} of run {layout.run_id}",
                tags=args.tags,
                opts=child,
            )
            for suffix, policy in policies.items():
                if policy is not None:
                    aws.iam.RolePolicy(
                        f"{name}-{who}-{suffix}", role=created.id, policy=policy, opts=child
                    )
            return created

        bucket = pulumi.Output.from_input(args.bucket)
        client_role = role(
            "client", "ec2.amazonaws.com", "client machines", _client_policies(args, bucket)
        )
        profile = aws.iam.InstanceProfile(
            f"{name}-client", role=client_role.name, tags=args.tags, opts=child
        )
        broker_role = role(
            "broker", "ec2.amazonaws.com", "broker machines", _broker_policies(args, bucket)
        )
        broker_profile = aws.iam.InstanceProfile(
            f"{name}-broker", role=broker_role.name, tags=args.tags, opts=child
        )
        analysis_role = role(
            "analysis",
            "emr-serverless.amazonaws.com",
            "analysis job",
            {"s3": bucket.apply(analysis_s3_policy)},
        )

        self.client_profile = profile.name
        self.broker_profile = broker_profile.name
        self.client_role_arn = client_role.arn
        self.analysis_role_arn = analysis_role.arn
        self.register_outputs(
            {
                "client_profile": self.client_profile,
                "broker_profile": self.broker_profile,
                "client_role_arn": self.client_role_arn,
                "analysis_role_arn": self.analysis_role_arn,
            }
        )


def _client_policies(
    args: RunAccessArgs, bucket: pulumi.Output[str]
) -> dict[str, pulumi.Input[str] | None]:
    """What client machines may do: the run's objects, the managed service (if any), the
    broker password."""
    password = args.secret_arns.get(BROKER_PASSWORD.name)
    return {
        "s3": bucket.apply(lambda b: client_s3_policy(b, args.layout)),
        "managed": None
        if args.managed_arn is None or not args.managed_actions
        else pulumi.Output.from_input(args.managed_arn).apply(
            lambda arn: client_managed_policy(arn, args.managed_actions)
        ),
        "secrets": password.apply(lambda arn: read_parameters_policy([arn]))
        if password is not None
        else None,
    }


def _broker_policies(
    args: RunAccessArgs, bucket: pulumi.Output[str]
) -> dict[str, pulumi.Input[str] | None]:
    """What broker machines may do: read the stack's secrets, and their agents' objects."""
    return {
        "secrets": pulumi.Output.all(*args.secret_arns.values()).apply(read_parameters_policy)
        if args.secret_arns
        else None,
        "s3": bucket.apply(lambda b: broker_s3_policy(b, args.layout, args.faults)),
    }


def policy_document(*statements: dict[str, object]) -> str:
    """An IAM policy document of ``statements``, as JSON text."""
    return json.dumps({"Version": "2012-10-17", "Statement": list(statements)})


def _allow(sid: str, action: str | list[str], resource: str | list[str]) -> dict[str, object]:
    return {"Sid": sid, "Effect": "Allow", "Action": action, "Resource": resource}


def _list_statement(sid: str, bucket: str, prefixes: list[str]) -> dict[str, object]:
    """List ``bucket``, but only under ``prefixes``."""
    return {
        **_allow(sid, "s3:ListBucket", f"arn:aws:s3:::{bucket}"),
        "Condition": {"StringLike": {"s3:prefix": prefixes}},
    }


def _trust(service: str) -> str:
    return policy_document(
        {"Effect": "Allow", "Principal": {"Service": service}, "Action": "sts:AssumeRole"}
    )


def client_s3_policy(bucket: str, layout: BucketLayout) -> str:
    objects = f"arn:aws:s3:::{bucket}/"
    return policy_document(
        _allow("ReadArtifacts", "s3:GetObject", f"{objects}{layout.artifacts_prefix}*"),
        _allow(
            "WriteResults",
            ["s3:PutObject", "s3:GetObject", "s3:AbortMultipartUpload"],
            f"{objects}{layout.run_prefix}*",
        ),
        _list_statement(
            "ListThisRun", bucket, [f"{layout.run_prefix}*", f"{layout.artifacts_prefix}*"]
        ),
    )


def fault_markers_prefix(layout: BucketLayout) -> str:
    """Where the run's fault markers and their acknowledgements are."""
    return f"{layout.run_prefix}{LAYOUT.fault_markers}"


def broker_s3_policy(bucket: str, layout: BucketLayout, faults: bool = True) -> str:
    """A broker machine's agents: the wheel they run from and the telemetry batches to
    write (:mod:`workload.engine.aws.telemetry_agent`); with ``faults``, the run's fault markers to
    list and read and acknowledgements to write — nothing else of the bucket."""
    objects = f"arn:aws:s3:::{bucket}/"
    statements = [
        _allow("ReadWheel", "s3:GetObject", f"{objects}{layout.wheel_key}"),
        _allow(
            "WriteTelemetryAndLogs",
            "s3:PutObject",
            [
                f"{objects}{layout.run_prefix}{LAYOUT.telemetry_stream}/*.jsonl",
                f"{objects}{layout.run_prefix}{LAYOUT.boot_logs}*",
            ],
        ),
        _list_statement("SeeTheRunsEnd", bucket, [f"{layout.run_prefix}{LAYOUT.ended}"]),
    ]
    if faults:
        statements += fault_statements(bucket, layout)
    return policy_document(*statements)


def fault_statements(bucket: str, layout: BucketLayout) -> list[dict[str, object]]:
    """A broker machine's fault agent: the run's fault markers to list and read,
    acknowledgements to write."""
    faults = fault_markers_prefix(layout)
    markers = f"arn:aws:s3:::{bucket}/{faults}*"
    return [
        _allow("ReadFaultMarkers", "s3:GetObject", [markers + BEGIN_SUFFIX, markers + END_SUFFIX]),
        _allow("WriteFaultAcks", "s3:PutObject", markers + LAYOUT.ack_suffix),
        _list_statement("ListFaultMarkers", bucket, [f"{faults}*"]),
    ]


def analysis_s3_policy(bucket: str) -> str:
    """The analysis job: read every run's results and artifacts in the stack's bucket,
    write only their analyses."""
    objects = f"arn:aws:s3:::{bucket}/"
    runs, artifacts = f"{LAYOUT.runs}/", "artifacts/"
    return policy_document(
        _allow("ReadRuns", "s3:GetObject", [f"{objects}{runs}*", f"{objects}{artifacts}*"]),
        _allow(
            "WriteAnalyses",
            ["s3:PutObject", "s3:DeleteObject", "s3:AbortMultipartUpload"],
            f"{objects}{runs}*/{LAYOUT.analysis}/*",
        ),
        _list_statement("ListRuns", bucket, [f"{runs}*", f"{artifacts}*"]),
    )


def read_parameters_policy(arns: Sequence[str]) -> str:
    """Read (and decrypt) exactly these parameters."""
    return policy_document(_allow("ReadStackSecrets", "ssm:GetParameter", sorted(arns)))


def client_managed_policy(arn: str, actions: Sequence[str]) -> str:
    """Call ``actions`` on the run's managed service and the resources named after it."""
    return policy_document(_allow("UseRunManagedService", list(actions), f"{arn}*"))
