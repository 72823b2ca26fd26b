"""The "On AWS" sequence of docs/aws.md, followed as written from a clean clone, with nothing
reaching AWS: ``pulumi config set`` writes the stack's file, ``cloud plan`` prices it,
``pulumi up`` runs the program under Pulumi's mocks, what it declared is stood up in moto
(the bucket with the run's manifest, the machines with their tags, the EMR application),
the machines' part is played by writing the markers and results they would, and ``cloud
wait``, ``status``, ``analyze``, ``fetch`` and ``down`` run against moto — none refuses."""

from __future__ import annotations

import csv
import io
import json
import runpy
import subprocess
from pathlib import Path
from typing import Any

import boto3
import pulumi
import pytest
import yaml
from moto import mock_aws

from infra import checks, program, stack_plan
from infra.mocking import AMI, deploy
from infra.settings import ROOT, stack_path
from infra.source import source_state
from tests.test_infra_stacks import no_packed_python, with_recipes
from workload.model.layout import LAYOUT
from workload.shell import cloud, cloud_down, cloud_plan

pytestmark = pytest.mark.filterwarnings(
    "ignore:.*has been deprecated in favor of:DeprecationWarning"  # pulumi_aws's own aliases
)
__all__ = ["no_packed_python"]  # the fixture, autouse here too
REGION = "us-east-1"
RUN = "kafka-2026-11-21"


def config_set(stack_file: Path, key: str, value: str) -> None:
    """``pulumi config set KEY VALUE``: the stack's file (``stackConfigDir: stacks``)."""
    document = yaml.safe_load(stack_file.read_text()) or {}
    document.setdefault("config", {})[key] = value
    stack_file.write_text(yaml.safe_dump(document, sort_keys=False))


def pulumi_up(clone: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """``pulumi up`` of the kafka stack in ``clone``: its program under mocks, on the
    clone's checkout and stack files (the wheel and the analysis environment stand-ins)."""
    with_recipes(monkeypatch)
    wheel = tmp_path / "brokerbench-0.1.0-py3-none-any.whl"
    wheel.write_bytes(b"PK\x05\x06" + b"\0" * 18)
    environment = tmp_path / "pyenv.tar.gz"
    environment.write_bytes(b"packed")
    monkeypatch.setattr(stack_plan, "build_wheel", lambda source=None: wheel)
    monkeypatch.setattr(program, "analysis_environment", lambda settings, target: environment)
    monkeypatch.setattr(program, "STACKS_DIR", clone / "stacks")
    monkeypatch.setattr(program, "source_state", lambda root: source_state(clone))
    monkeypatch.setattr(pulumi, "export", lambda key, value: None)
    stack = yaml.safe_load((clone / "stacks" / "Pulumi.kafka.yaml").read_text())["config"]
    config = {key: str(value) for key, value in stack.items()}
    _, resources = deploy(
        lambda: runpy.run_path(str(ROOT / "stacks" / "__main__.py")), "kafka", config, REGION
    )
    return resources


def stand_up(resources: list[Any]) -> dict[str, Any]:
    """What ``pulumi up`` created, in moto: the bucket and the objects it uploaded, the
    machines with their tags, the analysis application; the stack's outputs."""
    (bucket,) = checks.of_type(resources, "s3/bucket:Bucket")
    s3 = boto3.client("s3", region_name=REGION)
    s3.create_bucket(Bucket=bucket.id)
    s3.put_bucket_tagging(
        Bucket=bucket.id,
        Tagging={"TagSet": [{"Key": k, "Value": v} for k, v in bucket.inputs["tags"].items()]},
    )
    for item in checks.of_type(resources, "s3/bucketObjectv2:BucketObjectv2"):
        body = item.inputs.get("content", "stand-in")
        s3.put_object(Bucket=bucket.id, Key=item.inputs["key"], Body=body.encode())
    ec2 = boto3.client("ec2", region_name=REGION)
    for machine in checks.of_type(resources, "ec2/instance:Instance"):
        tags = [{"Key": k, "Value": v} for k, v in machine.inputs["tags"].items()]
        ec2.run_instances(
            ImageId="ami-12c6146b", MinCount=1, MaxCount=1,
            InstanceType=machine.inputs["instanceType"],
            TagSpecifications=[{"ResourceType": "instance", "Tags": tags}],
        )  # fmt: skip
    (app,) = checks.of_type(resources, "emrserverless/application:Application")
    emr = boto3.client("emr-serverless", region_name=REGION)
    application = emr.create_application(
        name="analysis", releaseLabel=app.inputs["releaseLabel"], type="SPARK",
        tags=app.inputs["tags"],
    )["applicationId"]  # fmt: skip
    (role,) = [r for r in checks.of_type(resources, "iam/role:Role") if "analysis" in r.name]
    return {
        "bucket": bucket.id, "run_id": bucket.inputs["tags"]["brokerbench:run"],
        "region": REGION, "emr_application_id": application,
        "emr_execution_role_arn": role.outputs["arn"],
    }  # fmt: skip


def play_the_run(bucket: str) -> None:
    """What the machines do: every node posts its results, the coordinator the run's end,
    and the client machines stop (the brokers have not seen the end yet)."""
    s3 = boto3.client("s3", region_name=REGION)
    prefix = LAYOUT.prefix(RUN)
    manifest = json.loads(s3.get_object(Bucket=bucket, Key=f"{prefix}manifest.json")["Body"].read())
    for point in manifest["points"]:
        for role, count in (("sender", point["senders"]), ("receiver", point["receivers"])):
            for node in range(count):
                key = prefix + LAYOUT.done(point["index"], role, node)
                s3.put_object(Bucket=bucket, Key=key, Body=b'{"ok": true}')
    s3.put_object(Bucket=bucket, Key=prefix + LAYOUT.ended, Body=b'{"ok": true, "at": "now"}')
    ec2 = boto3.client("ec2", region_name=REGION)
    clients = ec2.describe_instances(
        Filters=[{"Name": "tag:brokerbench:role", "Values": ["sender", "receiver"]}]
    )
    ids = [i["InstanceId"] for r in clients["Reservations"] for i in r["Instances"]]
    ec2.stop_instances(InstanceIds=ids)


def analysed(bucket: str) -> None:
    """What the analysis job writes (moto's EMR runs nothing): the context and summary."""
    from analysis.columns import SUMMARY_COLUMNS
    from tests.test_report_render import context, summary_row

    s3 = boto3.client("s3", region_name=REGION)
    prefix = LAYOUT.prefix(RUN)
    body = json.dumps(context(RUN, "kafka", "Apache Kafka")).encode()
    s3.put_object(Bucket=bucket, Key=prefix + LAYOUT.context, Body=body)
    lines = io.StringIO()
    writer = csv.DictWriter(lines, fieldnames=SUMMARY_COLUMNS)
    writer.writeheader()
    writer.writerows([summary_row(0, 1, 1, 1500.0, 1499.5, 12.5)])
    s3.put_object(Bucket=bucket, Key=prefix + LAYOUT.summary, Body=lines.getvalue().encode())


def test_the_readme_on_aws_reaches_cloud_down_with_no_refusal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True)
    stack_file = clone / "stacks" / "Pulumi.kafka.yaml"
    for key, value in (
        ("aws:region", REGION),
        ("brokerbench:ami", AMI),  # $(brokerbench cloud ami --region us-east-1)
        ("brokerbench:runId", RUN),
        ("brokerbench:adminCidr", "203.0.113.7/32"),
    ):
        config_set(stack_file, key, value)
    for module in (cloud_plan, cloud_down):
        monkeypatch.setattr(module, "stack_path", lambda name: stack_path(name, clone / "stacks"))
    # brokerbench cloud plan --stack kafka (no credentials here: the quotas go unchecked)
    monkeypatch.setattr(cloud_plan, "quota_client", _no_credentials)
    assert cloud.main(["cloud", "plan", "--stack", "kafka"]) == 0
    plan = capsys.readouterr().out
    assert f"run {RUN}" in plan and "auto-stop: every machine stops itself" in plan
    assert "cost cap: none" in plan and "worst case:" in plan
    # pulumi up: the clone is clean though its stack file changed
    resources = pulumi_up(clone, tmp_path, monkeypatch)
    with mock_aws():
        outputs = stand_up(resources)
        assert outputs["run_id"] == RUN
        fake = tmp_path / "bin" / "pulumi"
        fake.parent.mkdir()
        fake.write_text(f"#!/bin/sh\necho '{json.dumps(outputs)}'\n")
        fake.chmod(0o755)
        monkeypatch.setenv("PATH", f"{fake.parent}:/usr/bin:/bin")
        play_the_run(outputs["bucket"])
        assert cloud.main(["cloud", "wait", "--stack", "kafka"]) == 0
        assert cloud.main(["cloud", "status", "--stack", "kafka"]) == 0
        status = capsys.readouterr().out
        assert "machines: 3 running, 12 stopped" in status and "the run ended" in status
        assert cloud.main(["cloud", "analyze", "--stack", "kafka"]) == 0
        assert "analysis job" in capsys.readouterr().out
        analysed(outputs["bucket"])
        monkeypatch.chdir(tmp_path)
        assert cloud.main(["cloud", "fetch", "--stack", "kafka"]) == 0
        assert (tmp_path / "results" / RUN / "analysis" / "report.html").exists()
        assert cloud.main(["cloud", "down", "--stack", "kafka"]) == 0
        down = capsys.readouterr().out
        assert f"stopped 3 machine(s) of stack kafka, run {RUN}" in down
        assert f"kept s3://{outputs['bucket']}" in down
        assert cloud.main(["cloud", "down", "--stack", "kafka", "--empty-bucket"]) == 0
        assert f"deleted s3://{outputs['bucket']}" in capsys.readouterr().out


def _no_credentials(region: str | None, service: str = "service-quotas") -> Any:
    raise LookupError("no AWS credentials")
