"""A run's id: made unique by default, kept in the stack's file, never deployed twice.

Without ``brokerbench:runId`` the program makes one, :func:`new_run_id`: the scenario's name,
the UTC time and four random hex digits (``kafka-sweep-20261121-1405-7f3a``), and writes it
into the stack's file (:func:`remember_run_id`), where ``pulumi preview`` and the update of
the same ``pulumi up`` — and every later ``up`` — find it, so that a second ``up`` of an
unchanged stack changes nothing. ``pulumi config rm brokerbench:runId`` asks for a new one.

A run id names one deployment of the run's machines: once the run has begun (its control
markers are in the bucket), an ``up`` that would deploy it anew — another scenario, other
settings, other code, which the manifest's :func:`fingerprint` tells apart — is refused in
one line (:func:`refuse_reuse`) before any machine is replaced.
"""

from __future__ import annotations

import hashlib
import json
import re
import secrets
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pulumi
import pulumi_aws as aws

from infra.plan import BucketLayout
from infra.settings import NAMESPACE, StackConfigError, StackSettings
from workload.model.layout import LAYOUT

#: The longest run id (``infra.settings.RUN_ID``); the scenario's part gives way.
MAX_RUN_ID = 48
#: Settings that change nothing the machines run (the analysis job's, the cost cap, how the
#: code is found): a new ``up`` with another of these deploys the same run.
NOT_MACHINES = ("run_id", "wheel", "allow_dirty", "analysis_module", "max_usd")
_CONFIG_LINE = re.compile(r"^config:\s*(\{\s*\})?\s*$", re.MULTILINE)


def new_run_id(scenario: str, now: datetime | None = None, token: str | None = None) -> str:
    """``<scenario>-<yyyymmdd>-<hhmm>-<4 hex>``, the time in UTC."""
    stamp = (now or datetime.now(UTC)).astimezone(UTC).strftime("%Y%m%d-%H%M")
    tail = f"-{stamp}-{token or secrets.token_hex(2)}"
    name = re.sub(r"[^a-z0-9-]+", "-", scenario.lower()).strip("-") or "run"
    return name[: MAX_RUN_ID - len(tail)].rstrip("-") + tail


def remembered_run_id(stack_file: Path) -> str | None:
    """The ``brokerbench:runId`` the stack's file holds now (None without one)."""
    import yaml

    if not stack_file.is_file():
        return None
    document = yaml.safe_load(stack_file.read_text()) or {}
    value = (document.get("config") or {}).get(f"{NAMESPACE}:runId")
    return str(value) if value else None


def remember_run_id(stack_file: Path, run_id: str) -> bool:
    """Write ``brokerbench:runId`` into the stack's file (as ``pulumi config set`` would);
    False when there is no such file."""
    if not stack_file.is_file():
        return False
    text = stack_file.read_text()
    line = f"  {NAMESPACE}:runId: {run_id}\n"
    found = _CONFIG_LINE.search(text)
    if found is None:
        text = text + ("" if text.endswith("\n") or not text else "\n") + "config:\n" + line
    else:
        end = found.end() + (1 if text[found.end() : found.end() + 1] == "\n" else 0)
        text = text[: found.start()] + "config:\n" + line + text[end:]
    stack_file.write_text(text)
    return True


def run_id_for(settings: StackSettings, scenario: str, stack_file: Path) -> str:
    """The run id of this ``up``: configured, or kept in the stack's file (an earlier program
    run of the same command wrote it), or new — and then kept there."""
    if settings.run_id:
        return settings.run_id
    kept = remembered_run_id(stack_file)
    if kept:
        return kept
    made = new_run_id(scenario)
    if remember_run_id(stack_file, made):
        pulumi.log.info(f"a new run: {NAMESPACE}:runId {made}, kept in {stack_file.name}")
    else:
        pulumi.log.warn(f"a new run: {NAMESPACE}:runId {made} (no {stack_file.name} to keep it)")
    return made


def fingerprint(settings: StackSettings, scenario_text: str, wheel: Path, stack: str) -> str:
    """A digest of what the run's machines run: the settings that reach them, the scenario,
    the code (the wheel's bytes) and the stack."""
    machine_settings = {
        key: value
        for key, value in settings.model_dump(mode="json").items()
        if key not in NOT_MACHINES and not key.startswith("emr_")
    }
    document = {
        "settings": machine_settings,
        "scenario": scenario_text,
        "code": hashlib.sha256(wheel.read_bytes()).hexdigest(),
        "stack": stack,
    }
    return hashlib.sha256(json.dumps(document, sort_keys=True).encode()).hexdigest()[:16]


def refuse_reuse(bucket: pulumi.Output[str], run_id: str, digest: str) -> pulumi.Output[str]:
    """The bucket's name once it is sure this ``up`` does not deploy a begun run anew: a
    run whose control markers are in the bucket and whose kept manifest has another
    fingerprint fails the deployment with one line (everything the run's machines and
    artifacts take waits for this name)."""
    layout = BucketLayout(run_id, wheel_name="")
    prefix, manifest_key = layout.run_prefix, layout.manifest_key

    def begun(name: str) -> pulumi.Output[str]:
        markers = aws.s3.get_objects_output(bucket=name, prefix=prefix + LAYOUT.markers, max_keys=1)
        kept = aws.s3.get_objects_output(bucket=name, prefix=manifest_key, max_keys=1)
        return pulumi.Output.all(markers.keys, kept.keys).apply(lambda v: judged(name, *v))

    def judged(name: str, markers: list[str], kept: list[str]) -> pulumi.Output[str] | str:
        if not markers:
            return name
        if manifest_key not in kept:
            return _refused(name, run_id, "")
        body = aws.s3.get_object_output(bucket=name, key=manifest_key).body
        return body.apply(lambda text: name if _digest_of(text) == digest else _refused(
            name, run_id, _digest_of(text)))  # fmt: skip

    return bucket.apply(begun)


def _digest_of(text: str) -> str:
    try:
        value: Any = json.loads(text).get("fingerprint", "")
    except (ValueError, AttributeError):
        return ""
    return str(value)


def _refused(bucket: str, run_id: str, other: str) -> str:
    what = f"deployed as {other}" if other else "deployed before"
    raise StackConfigError(
        [
            f"{NAMESPACE}:runId {run_id}: this run has begun (its markers are in "
            f"s3://{bucket}/{LAYOUT.prefix(run_id)}{LAYOUT.markers}, {what}) and this pulumi up "
            "would deploy it anew with another scenario, settings or code: a new run needs "
            f"its own id: pulumi config rm {NAMESPACE}:runId (pulumi up makes one), or pulumi "
            f"config set {NAMESPACE}:runId <new id>"
        ]
    )
