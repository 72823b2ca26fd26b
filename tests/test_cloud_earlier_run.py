"""An earlier run of a stack stays analysable after the next run's ``up``: its manifest is
kept beside its results and its artifacts are kept (Pulumi's mocks), the analysis role of
the later deployment may read it (the policy it declares), and ``cloud analyze --run-id``
submits the earlier run's job with the earlier run's code (moto's EMR Serverless)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from infra import access_checks, checks
from infra.mocking import deploy
from infra.program import build
from infra.source import SourceState
from tests.test_infra_stacks import REGION, deployable, no_packed_python, with_recipes
from workload.shell import cloud

pytestmark = pytest.mark.filterwarnings(
    "ignore:.*has been deprecated in favor of:DeprecationWarning"  # pulumi_aws's own aliases
)
__all__ = ["no_packed_python"]  # the fixture, autouse here too
CLEAN = SourceState("0123456789abcdef0123456789abcdef01234567", False, 1_700_000_000)
OBJECT = "aws:s3/bucketObjectv2:BucketObjectv2"


@pytest.fixture
def wheel(tmp_path: Path) -> Path:
    path = tmp_path / "brokerbench-0.1.0-py3-none-any.whl"
    path.write_bytes(b"PK\x05\x06" + b"\0" * 18)
    return path


def deployed(run_id: str, wheel: Path, monkeypatch: pytest.MonkeyPatch) -> list[checks.Declared]:
    with_recipes(monkeypatch)
    settings = deployable("redis").model_copy(update={"run_id": run_id})
    _, resources = deploy(lambda: build(settings, "redis", REGION, wheel=wheel, source=CLEAN))
    return resources


def test_the_next_runs_up_leaves_the_earlier_run_analysable(
    wheel: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    first = deployed("redis-run-1", wheel, monkeypatch)
    second = deployed("redis-run-2", wheel, monkeypatch)
    # The manifest is kept with the run's results, and every artifact of a run (the wheel,
    # the entry script, the packed environment …) outlives the declaration the next run's
    # up replaces (another key) or pulumi destroy drops.
    objects = {o.inputs["key"]: o for o in checks.of_type(first, OBJECT)}
    manifest = json.loads(objects["runs/redis-run-1/manifest.json"].inputs["content"])
    assert manifest["run_id"] == "redis-run-1" and manifest["source"]["commit"] == CLEAN.commit
    assert manifest["settings"]["system"] == "redis" and "wheel" not in manifest["settings"]
    assert "artifacts/redis-run-1/manifest.json" not in objects
    assert all(o.options.retain_on_delete for o in objects.values())
    assert {o.inputs["key"] for o in checks.of_type(second, OBJECT)}.isdisjoint(objects)
    # The second deployment's analysis role reads every run of the bucket, writes only
    # analyses; the machines' roles stay scoped to the second run.
    (bucket,) = checks.of_type(second, "s3/bucket:Bucket")
    assert access_checks.iam_problems(second, bucket.id, "redis-run-2") == []
    (role,) = [r for r in checks.of_type(second, "iam/role:Role") if "analysis" in r.name]
    (policy,) = [p for p in checks.of_type(second, "iam/rolePolicy:RolePolicy")
                 if p.inputs["role"] == role.id]  # fmt: skip
    statements = checks.statements(policy.inputs["policy"])
    reads = next(s for s in statements if s["Action"] == "s3:GetObject")["Resource"]
    assert f"arn:aws:s3:::{bucket.id}/runs/*" in reads


@pytest.fixture
def earlier() -> Iterator[dict[str, Any]]:
    """The bucket after two runs (moto): the earlier run's manifest kept beside its results,
    its artifacts kept; an analysis application."""
    with mock_aws():
        s3 = boto3.client("s3", region_name=REGION)
        s3.create_bucket(Bucket="results", CreateBucketConfiguration={"LocationConstraint": REGION})
        for run in ("run-1", "run-2"):
            manifest: dict[str, Any] = {
                "run_id": run,
                "points": [],
                "emr_environment": f"artifacts/{run}/pyenv.tar.gz",
            }
            s3.put_object(
                Bucket="results", Key=f"runs/{run}/manifest.json", Body=json.dumps(manifest)
            )
        emr = boto3.client("emr-serverless", region_name=REGION)
        app = emr.create_application(name="analysis", releaseLabel="emr-7.5.0", type="SPARK")
        yield {"emr": emr, "app": app["applicationId"]}


def test_analyze_run_id_submits_the_earlier_runs_job(
    earlier: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    """``--stack`` names the application and its role (the stack's outputs, of the latest
    run), ``--run-id`` the earlier run whose job is submitted."""
    outputs = {
        "bucket": "results", "run_id": "run-2", "region": REGION,
        "emr_application_id": earlier["app"],
        "emr_execution_role_arn": "arn:aws:iam::123456789012:role/analysis",
    }  # fmt: skip
    fake = tmp_path / "pulumi"
    fake.write_text(f"#!/bin/sh\necho '{json.dumps(outputs)}'\n")
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    argv = ["cloud", "analyze", "--stack", "redis", "--run-id", "run-1", "--no-wait"]
    assert cloud.main(argv) == 0
    out = capsys.readouterr().out
    assert "packed environment s3://results/artifacts/run-1/pyenv.tar.gz" in out
    job = out.strip().rsplit("job run ", 1)[1]
    driver = earlier["emr"].get_job_run(applicationId=earlier["app"], jobRunId=job)["jobRun"][
        "jobDriver"
    ]["sparkSubmit"]
    assert driver["entryPoint"] == "s3://results/artifacts/run-1/analysis_entry.py"
    assert driver["entryPointArguments"] == ["s3://results/runs/run-1/"]
    assert (
        "--py-files s3://results/artifacts/run-1/brokerbench.zip" in driver["sparkSubmitParameters"]
    )
