"""``brokerbench cloud plan`` (stack file, price table, Service Quotas through a stubbed
client) and ``cloud down`` (EC2 and a versioned bucket under moto). No real AWS call."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import boto3
import pytest
from botocore.stub import Stubber
from moto import mock_aws

from analysis.prices import load_prices
from workload.shell import cloud, cloud_down, cloud_plan

REGION = "us-east-1"  # stacks/Pulumi.kafka.yaml's
QUOTAS = {"L-1216C47A": 512.0, "L-F678F1CE": 5.0, "L-0263D0A3": 5.0}
SERVICES = {"L-1216C47A": "ec2", "L-F678F1CE": "vpc", "L-0263D0A3": "ec2"}


@pytest.fixture
def no_credentials(monkeypatch: pytest.MonkeyPatch) -> None:
    """No credentials anywhere boto3 looks (and no instance metadata service asked)."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    monkeypatch.delenv("AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", raising=False)
    monkeypatch.delenv("AWS_CONTAINER_CREDENTIALS_FULL_URI", raising=False)


def stubbed_quotas(monkeypatch: pytest.MonkeyPatch, values: dict[str, float]) -> Stubber:
    client = boto3.client(
        "service-quotas", region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x"
    )
    stubber = Stubber(client)
    for code, value in values.items():
        stubber.add_response(
            "get_service_quota",
            {"Quota": {"QuotaCode": code, "Value": value}},
            {"ServiceCode": SERVICES[code], "QuotaCode": code},
        )
    stubber.activate()
    monkeypatch.setattr(cloud_plan, "quota_client", lambda region: client)
    return stubber


def test_plan_prices_the_fleet_and_its_sweep_and_checks_quotas(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    stubber = stubbed_quotas(monkeypatch, QUOTAS)
    assert cloud.main(["cloud", "plan", "--stack", "kafka"]) == 0
    stubber.assert_no_pending_responses()
    out = capsys.readouterr().out
    # 3 brokers r6i.8xlarge, senders and receivers for the largest point (4 + 8) c6i.8xlarge
    assert "broker         3 × r6i.8xlarge" in out
    assert "sender         4 × c6i.8xlarge" in out and "receiver       8 × c6i.8xlarge" in out
    assert "bandwidth: r6i.8xlarge: network 12.5 Gbit/s, EBS 10,000 Mbit/s" in out
    assert "placement: every machine in one cluster placement group" in out
    assert "ttl: every machine stops itself 12 h after boot (brokerbench:ttlHours); " in out
    prices = load_prices()
    hourly = 3 * prices.hourly(REGION, "r6i.8xlarge") + 12 * prices.hourly(REGION, "c6i.8xlarge")
    assert f"fleet: 15 machines, {hourly:.2f} USD/hour" in out and prices.version in out
    # 9 points × (120 s + 90 s) = 31.5 min
    assert "9 point(s)" in out and "+ 90 s (assumed" in out
    assert f"31.5 min, {hourly * 9 * 210 / 3600:.2f} USD" in out
    assert "Running On-Demand Standard instances, vCPUs (L-1216C47A): 480" in out
    assert "need 480, quota 512: ok" in out and "quotas: checked" in out


def test_plan_fails_on_each_quota_too_small(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    stubbed_quotas(monkeypatch, {**QUOTAS, "L-1216C47A": 64.0, "L-0263D0A3": 0.0})
    assert cloud.main(["cloud", "plan", "--stack", "kafka"]) == 1
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2
    assert "L-1216C47A): the stack needs 480, the quota is 64" in err[0]
    assert "L-0263D0A3): the stack needs 1, the quota is 0" in err[1]


def test_plan_says_why_quotas_are_not_checked(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], no_credentials: None
) -> None:
    assert cloud.main(["cloud", "plan", "--stack", "kafka"]) == 0
    assert "quotas: not checked: no AWS credentials" in capsys.readouterr().out
    client = boto3.client(
        "service-quotas", region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x"
    )
    stubber = Stubber(client)
    stubber.add_client_error("get_service_quota", "AccessDeniedException", "not allowed")
    stubber.activate()
    monkeypatch.setattr(cloud_plan, "quota_client", lambda region: client)
    assert cloud.main(["cloud", "plan", "--stack", "kafka"]) == 0
    (line,) = [x for x in capsys.readouterr().out.splitlines() if x.startswith("quotas:")]
    assert line.startswith("quotas: not checked: L-1216C47A:") and "AccessDenied" in line


def test_plan_of_another_scenario_and_of_an_unknown_stack(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], no_credentials: None
) -> None:
    smoke = cloud_plan.stack_path("kafka").parents[1] / "workload/scenarios/kafka-smoke.toml"
    assert cloud.main(["cloud", "plan", "--stack", "kafka", "--scenario", str(smoke)]) == 0
    out = capsys.readouterr().out
    assert "kafka-smoke.toml" in out and "1 point(s)" in out
    assert cloud.main(["cloud", "plan", "--stack", "nope"]) == 2
    assert "unknown stack 'nope'" in capsys.readouterr().err


def test_plan_says_which_types_burst_and_where_machines_are_placed() -> None:
    roles = [cloud_plan.MachineRole("broker", 3, "r5.2xlarge")]
    assert cloud_plan.machine_lines(roles, placement_group=False) == [
        "bandwidth: r5.2xlarge: network up to 10 Gbit/s, EBS up to 4,750 Mbit/s: burstable, "
        "a long sweep slows down when its credits run out",
        "placement: no placement group (brokerbench:placementGroup false)",
    ]


def test_quota_needs_count_an_eip_only_for_the_nat_gateway() -> None:
    prices = load_prices()
    roles = [
        cloud_plan.MachineRole("broker", 2, "m5.large"),
        cloud_plan.MachineRole("x", 1, "p3.2xlarge"),
    ]
    needs, notes = cloud_plan.quota_needs(roles, prices, nat_gateway=False)
    assert [n.need for n in needs] == [4, 1, 0]
    assert notes == ["p3.2xlarge: not a standard family; its vCPUs are not counted"]
    needs, _ = cloud_plan.quota_needs(roles, prices, nat_gateway=True)
    assert needs[2].need == 1


# -- cloud down ------------------------------------------------------------------------------

BUCKET = "kafka-results-1"


@pytest.fixture
def aws() -> Iterator[dict[str, Any]]:
    """Four machines of stack kafka, one of another stack, and a versioned bucket of the
    stack with several versions and delete markers (plus a bucket of another stack)."""
    with mock_aws():
        ec2 = boto3.client("ec2", region_name=REGION)
        s3 = boto3.client("s3", region_name=REGION)

        def machines(stack: str, count: int) -> list[str]:
            tags = [{"Key": "brokerbench:stack", "Value": stack}]
            answer = ec2.run_instances(
                ImageId="ami-12c6146b",
                MinCount=count,
                MaxCount=count,
                InstanceType="c5.large",
                TagSpecifications=[{"ResourceType": "instance", "Tags": tags}],
            )
            return [i["InstanceId"] for i in answer["Instances"]]

        ours, theirs = machines("kafka", 4), machines("redis", 1)
        emr = boto3.client("emr-serverless", region_name=REGION)
        apps = {
            stack: emr.create_application(
                name="analysis", releaseLabel="emr-7.5.0", type="SPARK",
                tags={"brokerbench:stack": stack},
            )["applicationId"]
            for stack in ("kafka", "redis")
        }  # fmt: skip
        emr.start_job_run(  # the analysis of the run, still on the application
            applicationId=apps["kafka"],
            executionRoleArn="arn:aws:iam::123456789012:role/job",
            jobDriver={"sparkSubmit": {"entryPoint": "s3://b/analysis_entry.py"}},
        )
        for bucket, stack in ((BUCKET, "kafka"), ("redis-results", "redis")):
            s3.create_bucket(Bucket=bucket)
            s3.put_bucket_tagging(
                Bucket=bucket, Tagging={"TagSet": [{"Key": "brokerbench:stack", "Value": stack}]}
            )
            s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
        for key in ("runs/r/a", "runs/r/b", "artifacts/r/c"):
            for body in (b"1", b"2", b"3"):
                s3.put_object(Bucket=BUCKET, Key=key, Body=body)
        s3.delete_object(Bucket=BUCKET, Key="runs/r/a")
        s3.delete_object(Bucket=BUCKET, Key="runs/r/b")
        s3.delete_object(Bucket=BUCKET, Key="runs/r/b")  # two markers on one key
        yield {"ec2": ec2, "s3": s3, "ours": ours, "theirs": theirs, "emr": emr, "apps": apps}


def states(ec2: Any) -> dict[str, str]:
    pages = ec2.describe_instances()["Reservations"]
    return {i["InstanceId"]: i["State"]["Name"] for r in pages for i in r["Instances"]}


def versions(s3: Any, bucket: str) -> int:
    page = s3.list_object_versions(Bucket=bucket)
    return len(page.get("Versions", [])) + len(page.get("DeleteMarkers", []))


def test_down_stops_the_stack_and_deletes_every_version_of_its_bucket(
    aws: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    assert versions(aws["s3"], BUCKET) == 12  # 9 versions, 3 delete markers
    assert cloud.main(["cloud", "down", "--stack", "kafka", "--empty-bucket"]) == 0
    found = states(aws["ec2"])
    assert {found[i] for i in aws["ours"]} == {"stopped"}
    assert {found[i] for i in aws["theirs"]} == {"running"}
    buckets = {b["Name"] for b in aws["s3"].list_buckets()["Buckets"]}
    assert buckets == {"redis-results"}
    out = capsys.readouterr().out
    assert "stopped 4 machine(s) of stack kafka" in out
    assert f"deleted s3://{BUCKET}: 12 object version(s) and delete marker(s)" in out
    # the stack's analysis application is stopped (pulumi destroy can delete it), not another's
    emr, apps = aws["emr"], aws["apps"]
    state = {
        s: emr.get_application(applicationId=a)["application"]["state"] for s, a in apps.items()
    }
    assert state == {"kafka": "STOPPED", "redis": "STARTED"}
    assert f"EMR Serverless application {apps['kafka']}: STOPPED (pulumi destroy can" in out


def emr_app(state: str) -> dict[str, Any]:
    when = datetime(2026, 1, 1, tzinfo=UTC)
    return {"application": {
        "applicationId": "app1", "arn": "arn:aws:emr-serverless:us-east-1:123456789012:/applications/app1",
        "releaseLabel": "emr-7.5.0", "type": "Spark", "state": state,
        "createdAt": when, "updatedAt": when,
    }}  # fmt: skip


def test_down_cancels_the_running_job_and_waits_until_the_application_is_stopped() -> None:
    emr = boto3.client(
        "emr-serverless", region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x"
    )
    app = {"applicationId": "app1"}
    when = datetime(2026, 1, 1, tzinfo=UTC)
    job = {
        "applicationId": "app1", "id": "job1", "arn": "arn:aws:emr-serverless:us-east-1:123456789012:/applications/app1/jobruns/job1",
        "createdBy": "arn:aws:iam::123456789012:user/me",
        "createdAt": when, "updatedAt": when, "executionRole": "arn:aws:iam::123456789012:role/job",
        "state": "RUNNING", "stateDetails": "running", "releaseLabel": "emr-7.5.0",
    }  # fmt: skip
    stubber = Stubber(emr)
    stubber.add_response("get_application", emr_app("STARTED"), app)
    stubber.add_response("list_job_runs", {"jobRuns": [job]},
                         {**app, "states": cloud_down.ACTIVE_JOBS})  # fmt: skip
    stubber.add_response("cancel_job_run", {"applicationId": "app1", "jobRunId": "job1"},
                         {**app, "jobRunId": "job1"})  # fmt: skip
    # EMR refuses to stop while the cancelled job still ends: asked again
    stubber.add_client_error("stop_application", "ValidationException", "jobs running")
    stubber.add_response("get_application", emr_app("STARTED"), app)
    stubber.add_response("stop_application", {}, app)
    stubber.add_response("get_application", emr_app("STOPPING"), app)
    stubber.add_response("get_application", emr_app("STOPPED"), app)
    sleeps: list[float] = []
    with stubber:
        assert cloud_down.stop_application(emr, "app1", poll=2, sleep=sleeps.append) == (
            "STOPPED",
            1,
        )
    stubber.assert_no_pending_responses()
    assert sleeps == [2, 2]
    # one still stopping after the timeout: one line saying to run down again
    stubber = Stubber(emr)
    stubber.add_response("get_application", emr_app("STOPPING"), app)
    stubber.add_response(
        "list_job_runs", {"jobRuns": []}, {**app, "states": cloud_down.ACTIVE_JOBS}
    )
    for _ in range(3):
        stubber.add_response("get_application", emr_app("STOPPING"), app)
    with stubber, pytest.raises(cloud_down.CloudFailed, match="still STOPPING after 2 s"):
        cloud_down.stop_application(emr, "app1", poll=1, timeout=2, sleep=lambda s: None)


def test_emptying_pages_through_versions_and_deletes_in_batches(aws: dict[str, Any]) -> None:
    s3 = aws["s3"]
    calls: list[int] = []
    delete = s3.delete_objects

    def counting(**kwargs: Any) -> Any:
        calls.append(len(kwargs["Delete"]["Objects"]))
        return delete(**kwargs)

    s3.delete_objects = counting
    assert cloud_down.empty_and_delete(s3, BUCKET, batch=5, page_size=4) == 12
    assert calls == [5, 5, 2]
    assert BUCKET not in {b["Name"] for b in s3.list_buckets()["Buckets"]}


def test_down_without_the_flag_keeps_the_bucket_and_every_version(
    aws: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    assert cloud.main(["cloud", "down", "--stack", "kafka"]) == 0
    assert versions(aws["s3"], BUCKET) == 12
    assert {b["Name"] for b in aws["s3"].list_buckets()["Buckets"]} == {BUCKET, "redis-results"}
    assert {states(aws["ec2"])[i] for i in aws["ours"]} == {"stopped"}
    out = capsys.readouterr().out
    assert f"kept s3://{BUCKET}" in out and "--empty-bucket deletes it" in out
    # a second time: nothing left running, the bucket still kept
    assert cloud.main(["cloud", "down", "--stack", "kafka"]) == 0
    assert "no running machine tagged brokerbench:stack=kafka" in capsys.readouterr().out


def test_down_errors_are_one_line(capsys: pytest.CaptureFixture[str], no_credentials: None) -> None:
    assert cloud.main(["cloud", "down", "--stack", "nope"]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    assert cloud.main(["cloud", "down", "--stack", "kafka", "--empty-bucket"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no AWS credentials" in err


def test_down_never_uses_credentials_resolved_before(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A process whose default boto3 session once resolved credentials (another command, a
    test) still looks them up afresh: without any, nothing is sent anywhere."""
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "earlier")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "earlier")
    boto3.setup_default_session()
    assert boto3.client("s3", region_name=REGION)._request_signer._credentials is not None
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_CONFIG_FILE", "/nonexistent")
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    try:
        assert cloud.main(["cloud", "down", "--stack", "kafka", "--empty-bucket"]) == 2
        assert "no AWS credentials" in capsys.readouterr().err
    finally:
        boto3.DEFAULT_SESSION = None
