"""``brokerbench cloud plan`` (stack file, price table, Service Quotas through a stubbed
client) and ``cloud down`` (EC2 and a versioned bucket under moto). No real AWS call."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
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


@pytest.fixture
def region() -> Iterator[Any]:
    """The region's EC2 as moto has it: its default VPC and two running c5.large (4 vCPUs
    of the standard quota in use), no Elastic IP."""
    with mock_aws():
        ec2 = boto3.client("ec2", region_name=REGION)
        ec2.run_instances(ImageId="ami-12c6146b", MinCount=2, MaxCount=2, InstanceType="c5.large")
        yield ec2


def stubbed_quotas(monkeypatch: pytest.MonkeyPatch, values: dict[str, float], ec2: Any) -> Stubber:
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
    clients = {"service-quotas": client, "ec2": ec2}
    monkeypatch.setattr(
        cloud_plan, "quota_client", lambda region, service="service-quotas": clients[service]
    )
    return stubber


def test_plan_prices_the_fleet_and_its_sweep_and_checks_quotas(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], region: Any
) -> None:
    stubber = stubbed_quotas(monkeypatch, QUOTAS, region)
    assert cloud.main(["cloud", "plan", "--stack", "kafka"]) == 0
    stubber.assert_no_pending_responses()
    out = capsys.readouterr().out
    # 3 brokers r6i.8xlarge, senders and receivers for the largest point (4 + 8) c6i.8xlarge
    assert "broker         3 × r6i.8xlarge" in out
    assert "sender         4 × c6i.8xlarge" in out and "receiver       8 × c6i.8xlarge" in out
    assert "bandwidth: r6i.8xlarge: network 12.5 Gbit/s, EBS 10,000 Mbit/s" in out
    assert "placement: every machine in one cluster placement group" in out
    prices = load_prices()
    hourly = 3 * prices.hourly(REGION, "r6i.8xlarge") + 12 * prices.hourly(REGION, "c6i.8xlarge")
    assert f"fleet: 15 machines, {hourly:.2f} USD/hour" in out and prices.version in out
    # 9 points × (120 s + 90 s) = 31.5 min
    assert "9 point(s)" in out and "+ 90 s (assumed" in out
    assert f"31.5 min, {hourly * 9 * 210 / 3600:.2f} USD" in out
    # how the fleet stops, and the most it costs until then
    assert "auto-stop: every machine stops itself when the run ends" in out
    assert "ttl: every machine stops itself 12 h after boot at the latest" in out
    assert f"worst case: {hourly * 12:.2f} USD for the machines" in out
    assert "cost cap: none (brokerbench:maxUsd, or --max-usd)" in out
    assert "Running On-Demand Standard instances, vCPUs (L-1216C47A): 480" in out
    assert "need 480, in use 4, quota 512: ok" in out and "quotas: checked" in out
    assert "VPCs per region (L-F678F1CE): need 1, in use 1, quota 5: ok" in out


def test_plan_fails_on_each_quota_too_small(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], region: Any
) -> None:
    stubbed_quotas(monkeypatch, {**QUOTAS, "L-1216C47A": 64.0, "L-0263D0A3": 0.0}, region)
    assert cloud.main(["cloud", "plan", "--stack", "kafka"]) == 1
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2
    assert "L-1216C47A): the stack needs 480, 4 are in use in the region, the quota is 64" in err[0]
    assert "L-0263D0A3): the stack needs 1, 0 are in use in the region, the quota is 0" in err[1]


def test_plan_counts_what_already_runs_in_the_region(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], region: Any
) -> None:
    """The limits alone would fit (480 of 482 vCPUs, a second VPC of 2): what already runs
    there does not leave room."""
    region.create_vpc(CidrBlock="10.9.0.0/16")
    stubbed_quotas(monkeypatch, {**QUOTAS, "L-1216C47A": 482.0, "L-F678F1CE": 2.0}, region)
    assert cloud.main(["cloud", "plan", "--stack", "kafka"]) == 1
    err = capsys.readouterr().err
    assert "the stack needs 480, 4 are in use in the region, the quota is 482" in err
    assert "VPCs per region (L-F678F1CE): the stack needs 1, 2 are in use" in err


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
    monkeypatch.setattr(cloud_plan, "quota_client", lambda region, service="": client)
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
    assert cloud.main(["cloud", "plan", "--stack", "kafka", "--scenario", "nope.toml"]) == 2
    assert cloud.main(["cloud", "plan", "--stack", "nope"]) == 2
    assert "unknown stack 'nope'" in capsys.readouterr().err


def soak(tmp_path: Path, duration: str) -> Path:
    """A kafka scenario of one point that sends for ``duration``."""
    path = tmp_path / "kafka-soak.toml"
    path.write_text(
        'name = "kafka-soak"\n\n[broker]\nsystem = "kafka"\ntopology = "cluster"\n\n'
        f'[load]\nduration = "{duration}"\n'
    )
    return path


def test_plan_refuses_a_sweep_longer_than_the_ttl_and_a_fleet_above_the_cost_cap(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], no_credentials: None
) -> None:
    # A 13-hour soak on the 12-hour ttl: the machines would stop in the middle of it.
    assert (
        cloud.main(["cloud", "plan", "--stack", "kafka", "--scenario", str(soak(tmp_path, "13h"))])
        == 1
    )
    (line,) = capsys.readouterr().err.splitlines()
    assert line == (
        "brokerbench:ttlHours 12: the sweep of kafka-soak takes about 13.0 h, so the machines "
        "would stop themselves before it ends: pulumi config set brokerbench:ttlHours 14"
    )
    # The cost cap holds the most the machines may cost before they stop themselves.
    prices = load_prices()
    hourly = 3 * prices.hourly(REGION, "r6i.8xlarge") + 12 * prices.hourly(REGION, "c6i.8xlarge")
    assert cloud.main(["cloud", "plan", "--stack", "kafka", "--max-usd", "100"]) == 1
    captured = capsys.readouterr()
    assert "cost cap: 100 USD (--max-usd)" in captured.out
    assert captured.err.splitlines() == [
        f"cost cap 100 USD: the machines may cost up to {hourly * 12:.2f} USD ({hourly:.2f} "
        "USD/h × brokerbench:ttlHours 12) before they stop themselves: lower "
        "brokerbench:ttlHours to 4 or raise the cap"
    ]
    assert cloud.main(["cloud", "plan", "--stack", "kafka", "--max-usd", "300"]) == 0


def test_plan_says_which_types_burst_and_where_machines_are_placed() -> None:
    roles = [cloud_plan.MachineRole("broker", 3, "r5.2xlarge")]
    assert cloud_plan.machine_lines(roles, placement_group=False) == [
        "bandwidth: r5.2xlarge: network up to 10 Gbit/s, EBS up to 4,750 Mbit/s: burstable, "
        "a long sweep slows down when its credits run out",
        "placement: no placement group (brokerbench:placementGroup false)",
    ]


def test_quota_needs_count_an_eip_only_for_the_nat_gateway_and_no_unknown_type_as_0() -> None:
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
    # a standard type the table does not know: its need is unknown, not 0
    needs, notes = cloud_plan.quota_needs(
        [cloud_plan.MachineRole("broker", 3, "m7i.8xlarge")], prices, nat_gateway=True
    )
    assert needs[0].need is None and notes == [
        f"m7i.8xlarge: no vCPU count in table {prices.version}: the stack's vCPU need is "
        "unknown (see EC2's instance types) and not checked"
    ]


def test_an_old_price_table_is_said_to_be_old() -> None:
    prices = load_prices()
    year, month = int(prices.version[-7:-3]), int(prices.version[-2:])
    assert cloud_plan.prices_age_line(prices, datetime(year, month, 20, tzinfo=UTC)) is None
    line = cloud_plan.prices_age_line(prices, datetime(year + 2, month, 1, tzinfo=UTC))
    assert line is not None and line.startswith(f"prices: table {prices.version} is 2.0 years old")


# -- cloud down ------------------------------------------------------------------------------

BUCKET = "kafka-results-1"
#: A bucket a destroyed deployment of the stack left (buckets are kept), of an older run.
KEPT = "kafka-results-0"


@pytest.fixture
def aws() -> Iterator[dict[str, Any]]:
    """Four machines of run r of stack kafka, two of another run (q) of the same stack —
    someone else's, in the same account —, one of another stack; an analysis application
    of each; a versioned bucket of run r with several versions and delete markers, the
    kept bucket of an earlier deployment of the stack and a bucket of another stack."""
    with mock_aws():
        ec2 = boto3.client("ec2", region_name=REGION)
        s3 = boto3.client("s3", region_name=REGION)

        def tags(stack: str, run: str) -> list[dict[str, str]]:
            return [{"Key": "brokerbench:stack", "Value": stack},
                    {"Key": "brokerbench:run", "Value": run}]  # fmt: skip

        def machines(stack: str, run: str, count: int) -> list[str]:
            answer = ec2.run_instances(
                ImageId="ami-12c6146b",
                MinCount=count,
                MaxCount=count,
                InstanceType="c5.large",
                TagSpecifications=[{"ResourceType": "instance", "Tags": tags(stack, run)}],
            )
            return [i["InstanceId"] for i in answer["Instances"]]

        ours, other_run = machines("kafka", "r", 4), machines("kafka", "q", 2)
        theirs = machines("redis", "s", 1)
        emr = boto3.client("emr-serverless", region_name=REGION)
        apps = {
            (stack, run): emr.create_application(
                name="analysis", releaseLabel="emr-7.5.0", type="SPARK",
                tags={"brokerbench:stack": stack, "brokerbench:run": run},
            )["applicationId"]
            for stack, run in (("kafka", "r"), ("kafka", "q"), ("redis", "s"))
        }  # fmt: skip
        for run in ("r", "q"):  # the analysis of each run, still on its application
            emr.start_job_run(
                applicationId=apps["kafka", run],
                executionRoleArn="arn:aws:iam::123456789012:role/job",
                jobDriver={"sparkSubmit": {"entryPoint": "s3://b/analysis_entry.py"}},
            )
        for bucket, stack, run in ((KEPT, "kafka", "old"), (BUCKET, "kafka", "r"),
                                   ("redis-results", "redis", "s")):  # fmt: skip
            s3.create_bucket(Bucket=bucket)
            s3.put_bucket_tagging(Bucket=bucket, Tagging={"TagSet": tags(stack, run)})
            s3.put_bucket_versioning(Bucket=bucket, VersioningConfiguration={"Status": "Enabled"})
        for key in ("runs/r/a", "runs/r/b", "artifacts/r/c"):
            for body in (b"1", b"2", b"3"):
                s3.put_object(Bucket=BUCKET, Key=key, Body=body)
        s3.delete_object(Bucket=BUCKET, Key="runs/r/a")
        s3.delete_object(Bucket=BUCKET, Key="runs/r/b")
        s3.delete_object(Bucket=BUCKET, Key="runs/r/b")  # two markers on one key
        yield {"ec2": ec2, "s3": s3, "ours": ours, "other_run": other_run, "theirs": theirs,
               "emr": emr, "apps": apps}  # fmt: skip


def states(ec2: Any) -> dict[str, str]:
    pages = ec2.describe_instances()["Reservations"]
    return {i["InstanceId"]: i["State"]["Name"] for r in pages for i in r["Instances"]}


def versions(s3: Any, bucket: str) -> int:
    page = s3.list_object_versions(Bucket=bucket)
    return len(page.get("Versions", [])) + len(page.get("DeleteMarkers", []))


def test_down_stops_its_run_and_deletes_every_version_of_its_bucket(
    aws: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    assert versions(aws["s3"], BUCKET) == 12  # 9 versions, 3 delete markers
    assert cloud.main(["cloud", "down", "--stack", "kafka", "--run-id", "r", "--empty-bucket"]) == 0
    found = states(aws["ec2"])
    assert {found[i] for i in aws["ours"]} == {"stopped"}
    # the stack's other run (someone else's) and the other stack keep running
    assert {found[i] for i in aws["other_run"] + aws["theirs"]} == {"running"}
    buckets = {b["Name"] for b in aws["s3"].list_buckets()["Buckets"]}
    assert buckets == {KEPT, "redis-results"}
    out = capsys.readouterr().out
    assert "stopped 4 machine(s) of stack kafka, run r" in out
    assert "left running, of other runs of stack kafka: run q (2); --all-runs stops them too" in out
    assert f"deleted s3://{BUCKET}: 12 object version(s) and delete marker(s)" in out
    # the run's analysis application is stopped (pulumi destroy can delete it), no other
    emr, apps = aws["emr"], aws["apps"]
    state = {key: emr.get_application(applicationId=a)["application"]["state"]
             for key, a in apps.items()}  # fmt: skip
    assert state == {("kafka", "r"): "STOPPED", ("kafka", "q"): "STARTED",
                     ("redis", "s"): "STARTED"}  # fmt: skip
    assert f"EMR Serverless application {apps['kafka', 'r']}: STOPPED (pulumi destroy can" in out


def test_down_takes_the_run_the_stack_file_names_or_asks_for_one(
    aws: dict[str, Any], capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
) -> None:  # fmt: skip
    # The stack's file names no run: down says which runs run and stops nothing.
    assert cloud.main(["cloud", "down", "--stack", "kafka"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line == (
        "brokerbench: stack kafka: which run? its file names none (brokerbench:runId): --run-id "
        "RUN stops one run's machines, --all-runs every run's (run q (2), run r (4))"
    )
    assert set(states(aws["ec2"]).values()) == {"running"}
    # As pulumi up (or pulumi config set) leaves it: the file names run r.
    stack_file = tmp_path / "Pulumi.kafka.yaml"
    stack_file.write_text(cloud_down.stack_path("kafka").read_text() + "  brokerbench:runId: r\n")
    monkeypatch.setattr(cloud_down, "stack_path", lambda name: stack_file)
    assert cloud.main(["cloud", "down", "--stack", "kafka"]) == 0
    assert {states(aws["ec2"])[i] for i in aws["ours"] + aws["other_run"]} == {"stopped", "running"}
    assert "stopped 4 machine(s) of stack kafka, run r" in capsys.readouterr().out
    # Every run of the stack, when asked: the other stack's machine still runs.
    assert cloud.main(["cloud", "down", "--stack", "kafka", "--all-runs"]) == 0
    found = states(aws["ec2"])
    assert {found[i] for i in aws["ours"] + aws["other_run"]} == {"stopped"}
    assert found[aws["theirs"][0]] == "running"
    assert "stopped 2 machine(s) of stack kafka, every run" in capsys.readouterr().out


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
    """Two buckets carry the stack's tag (a destroyed deployment's is kept): the run's is
    the one tagged with it."""
    assert cloud.main(["cloud", "down", "--stack", "kafka", "--run-id", "r"]) == 0
    assert versions(aws["s3"], BUCKET) == 12
    assert {b["Name"] for b in aws["s3"].list_buckets()["Buckets"]} == {
        KEPT,
        BUCKET,
        "redis-results",
    }
    assert {states(aws["ec2"])[i] for i in aws["ours"]} == {"stopped"}
    out = capsys.readouterr().out
    assert f"kept s3://{BUCKET}" in out and "--empty-bucket deletes it" in out
    # a second time: nothing of the run left running, the bucket still kept
    assert cloud.main(["cloud", "down", "--stack", "kafka", "--run-id", "r"]) == 0
    assert "no running machine of stack kafka, run r" in capsys.readouterr().out
    # a run the bucket's tag no longer names is found by its results in the bucket
    aws["s3"].put_object(Bucket=BUCKET, Key="runs/r/manifest.json", Body=b"{}")
    assert cloud_down.run_buckets(aws["s3"], "kafka", "r") == [BUCKET]
    aws["s3"].put_bucket_tagging(Bucket=BUCKET, Tagging={"TagSet": [
        {"Key": "brokerbench:stack", "Value": "kafka"}, {"Key": "brokerbench:run", "Value": "n"}
    ]})  # fmt: skip
    assert cloud_down.run_buckets(aws["s3"], "kafka", "r") == [BUCKET]


def test_down_errors_are_one_line(capsys: pytest.CaptureFixture[str], no_credentials: None) -> None:
    assert cloud.main(["cloud", "down", "--stack", "nope"]) == 2
    assert capsys.readouterr().err.count("\n") == 1
    assert cloud.main(["cloud", "down", "--stack", "kafka", "--run-id", "r", "--empty-bucket"]) == 2
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
        assert (
            cloud.main(["cloud", "down", "--stack", "kafka", "--all-runs", "--empty-bucket"]) == 2
        )
        assert "no AWS credentials" in capsys.readouterr().err
    finally:
        boto3.DEFAULT_SESSION = None
