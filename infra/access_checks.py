"""Checks of who may do what in a declared stack, as plain functions over resource inputs
(:class:`~infra.checks.Declared`): least-privilege IAM (:func:`iam_problems`) and generated
secrets kept only in their parameters (:func:`secret_problems`)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

from infra.checks import Declared, of_type, statements
from infra.plan import BucketLayout
from infra.userdata_checks import readable
from workload.model.layout import LAYOUT

S3_WRITE = {
    "s3:PutObject",
    "s3:DeleteObject",
    "s3:PutObjectAcl",
    "s3:PutObjectTagging",
    "s3:AbortMultipartUpload",
    "s3:DeleteObjectVersion",
}
S3_READ = {"s3:GetObject", "s3:GetObjectVersion"}
#: The one identity that may reach past its run: the analysis job analyses any run of its
#: stack's bucket (``cloud analyze --run-id`` of an earlier run), writing only analyses.
STACK_WIDE = "emr-serverless.amazonaws.com"


class Scope:
    """What a role's S3 statements may name: reads and lists under ``readable`` prefixes,
    writes where ``writable`` allows."""

    def __init__(self, bucket: str, readable: tuple[str, ...], writable: Callable[[str], bool]):
        self.objects = f"arn:aws:s3:::{bucket}/"
        self.prefixes = readable
        self.readable = tuple(self.objects + p for p in readable)
        self.writable = writable


def run_scope(bucket: str, run_id: str) -> Scope:
    """One run: writes under ``runs/<run-id>/``, reads of it and of its artifacts."""
    layout = BucketLayout(run_id, wheel_name="")
    writable = f"arn:aws:s3:::{bucket}/{layout.run_prefix}"
    return Scope(
        bucket, (layout.run_prefix, layout.artifacts_prefix), lambda r: r.startswith(writable)
    )


def stack_scope(bucket: str) -> Scope:
    """Every run of the bucket: reads of runs and artifacts, writes of analyses only."""
    runs = f"arn:aws:s3:::{bucket}/{LAYOUT.runs}/"
    analysis = f"/{LAYOUT.analysis}/"
    return Scope(
        bucket,
        (f"{LAYOUT.runs}/", "artifacts/"),
        lambda r: r.startswith(runs) and analysis in r[len(runs) :],
    )


def iam_problems(resources: Iterable[Declared], bucket: str, run_id: str) -> list[str]:
    """Least privilege: no wildcards, S3 writes only under ``runs/<run-id>/``, reads only of
    this run's results and artifacts, listing only with a prefix condition, roles assumable
    only by AWS services — but for the analysis job's role (:data:`STACK_WIDE`), which may
    read every run of the bucket and write only their analyses."""
    resources = list(resources)
    one_run, every_run = run_scope(bucket, run_id), stack_scope(bucket)
    problems = []
    for r in of_type(resources, "iam/rolePolicyAttachment:RolePolicyAttachment"):
        problems.append(f"{r.name}: managed policy {r.inputs.get('policyArn')} attached")
    services: dict[str, set[str]] = {}
    for r in of_type(resources, "iam/role:Role"):
        trusted: set[str] = set()
        for statement in statements(r.inputs.get("assumeRolePolicy")):
            principal = statement.get("Principal")
            found = principal.get("Service") if isinstance(principal, dict) else None
            if not found or (isinstance(principal, dict) and set(principal) != {"Service"}):
                problems.append(f"{r.name}: assumable by {principal!r}, not only by an AWS service")
            trusted |= set(as_list(found))
        services[r.id] = services[r.name] = trusted
        scope = every_run if trusted == {STACK_WIDE} else one_run
        for inline in r.inputs.get("inlinePolicies") or []:
            problems += _policy_problems(f"{r.name}.inline", inline.get("policy"), scope)
    for r in of_type(resources, "iam/rolePolicy:RolePolicy", "iam/policy:Policy"):
        scope = every_run if services.get(r.inputs.get("role", "")) == {STACK_WIDE} else one_run
        problems += _policy_problems(r.name, r.inputs.get("policy"), scope)
    return problems


def _policy_problems(name: str, document: Any, scope: Scope) -> list[str]:
    problems = []
    for statement in statements(document):
        if statement.get("Effect") != "Allow":
            continue
        actions = as_list(statement.get("Action"))
        resources = as_list(statement.get("Resource"))
        if statement.get("NotAction") or statement.get("NotResource"):
            problems.append(f"{name}: NotAction/NotResource grants more than it names")
        for action in actions:
            if action == "*" or action.endswith(":*"):
                problems.append(f"{name}: wildcard action {action}")
        if "*" in resources:
            problems.append(f"{name}: Resource '*' for {', '.join(actions)}")
        if set(actions) & S3_WRITE:
            for resource in resources:
                if not scope.writable(resource):
                    problems.append(f"{name}: may write {resource}, outside what it may write")
        if set(actions) & S3_READ:
            for resource in resources:
                if not resource.startswith(scope.readable):
                    problems.append(f"{name}: may read {resource}, outside this run")
        if "s3:ListBucket" in actions:
            condition = (statement.get("Condition") or {}).get("StringLike") or {}
            listed = as_list(condition.get("s3:prefix"))
            if not listed or not all(p.startswith(scope.prefixes) for p in listed):
                problems.append(f"{name}: s3:ListBucket not limited to this run's prefixes")
    return problems


def as_list(value: Any) -> list[str]:
    if value is None:
        return []
    return [value] if isinstance(value, str) else list(value)


def secret_problems(resources: Iterable[Declared]) -> list[str]:
    """Generated secrets are stored only as SecureString parameters: no other resource (no
    user-data — packed files unpacked —, no uploaded object, no policy, no tag) carries a
    generated value."""
    resources = list(resources)
    secrets = {
        str(r.outputs.get("result"))
        for r in of_type(resources, "randomPassword:RandomPassword")
        if r.outputs.get("result")
    }
    problems = []
    for r in resources:
        if r.type.endswith("randomPassword:RandomPassword"):
            continue
        for key, value in r.inputs.items():
            text = value if isinstance(value, str) else json.dumps(value, default=str)
            text = readable(text) if key == "userData" else text
            if not any(secret in text for secret in secrets):
                continue
            stored = r.type.endswith("ssm/parameter:Parameter") and key == "value"
            if not stored:
                problems.append(f"{r.name}: a generated secret in {key}")
            elif r.inputs.get("type") != "SecureString":
                problems.append(f"{r.name}: holds a generated secret as {r.inputs.get('type')}")
    return problems
