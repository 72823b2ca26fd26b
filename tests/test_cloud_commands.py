"""The client-machine agent and the ``brokerbench cloud`` commands against moto's S3 and EMR
Serverless (no AWS): point barriers across nodes, uploads with retries, progress, analysis
submission and fetching the summary."""

from __future__ import annotations

import csv
import io
import json
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from analysis.records import RunRecords, expected_parts, point_records
from workload.engine.aws.agent import ClientAgent
from workload.engine.aws.store import RunStore, Uploader
from workload.model.layout import LAYOUT
from workload.model.record import PointEntry, RunContext
from workload.model.results import PartKey, parse_status
from workload.shell import cloud, cloud_analyze, cloud_run, cloud_status

REGION = "eu-west-1"
BUCKET = "results-bucket"
RUN = "pg-run-1"


@pytest.fixture
def s3() -> Iterator[object]:
    with mock_aws():
        client = boto3.client("s3", region_name=REGION)
        client.create_bucket(
            Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": REGION}
        )
        yield client


@pytest.fixture
def broker() -> Iterator[str]:
    """Something listening on loopback, standing for the broker endpoint."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    yield f"127.0.0.1:{server.getsockname()[1]}"
    server.close()


def scenario_file(tmp_path: Path, endpoint: str) -> Path:
    path = tmp_path / "scenario.toml"
    path.write_text(
        'name = "pg-cloud"\n\n[broker]\nsystem = "postgresql"\ndeployment = "endpoints"\n'
        f'endpoints = ["{endpoint}"]\n\n[load]\nduration = "1s"\nidle_timeout = "1s"\n\n'
        "[sweep]\nsender_nodes = [1, 2]\n"
    )
    return path


@dataclass
class FakeCommands:
    """Stands for ``brokerbench prepare`` / ``node``: writes what they would, logs the order."""

    role: str
    node: int
    results: Path
    events: list[tuple[str, ...]]
    lock: threading.Lock
    fail_point: int | None = None
    context: dict[str, Any] = field(default_factory=lambda: {"run_id": RUN})

    def _write(self, relative: str, text: str) -> None:
        path = self.results / RUN / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)

    def prepare(self, point: int) -> tuple[bool, str]:
        with self.lock:
            self.events.append(("prepare", str(point)))
        self._write("context.json", json.dumps(self.context))
        return True, "prepared"

    def run_node(self, point: int) -> tuple[bool, str]:
        with self.lock:
            self.events.append(("start", str(point), self.role, str(self.node)))
        name = f"p{point}-{self.role}-{self.node}"
        self._write(f"raw/seconds/{name}.parquet", "records")
        self._write(f"nodes/{name}.json", json.dumps({"ok": point != self.fail_point}))
        with self.lock:
            self.events.append(("end", str(point), self.role, str(self.node)))
        if point == self.fail_point:
            return False, "sender 1 failed: broker went away"
        return True, "ok"


@dataclass
class Fleet:
    s3: object
    scenario: Path
    root: Path
    events: list[tuple[str, ...]] = field(default_factory=list)
    logs: list[str] = field(default_factory=list)
    #: What the coordinator's prepare writes as the run context.
    context: dict[str, Any] = field(default_factory=lambda: {"run_id": RUN})
    #: The S3 client of each node (default: the fleet's).
    clients: dict[tuple[str, int], object] = field(default_factory=dict)

    def agent(
        self, role: str, node: int, fail_point: int | None = None, wait: float = 30, **options: Any
    ) -> ClientAgent:
        results = self.root / f"{role}-{node}"
        commands = FakeCommands(
            role, node, results, self.events, threading.Lock(), fail_point, self.context
        )
        store = RunStore(self.clients.get((role, node), self.s3), BUCKET, RUN)  # type: ignore[arg-type]
        options.setdefault("point_slack", 30)
        return ClientAgent(
            role, node, store, self.scenario, results, commands,
            log=self.logs.append, broker_wait=wait, poll=0.02, **options,
        )  # fmt: skip

    def run(self, agents: list[ClientAgent], coordinator_delay: float = 0.0) -> list[int]:
        """Run the agents side by side (the coordinator ``coordinator_delay`` s after the
        others); their exit codes."""
        codes = [-1] * len(agents)

        def work(i: int) -> None:
            if agents[i].coordinator:
                time.sleep(coordinator_delay)
            codes[i] = agents[i].run()

        threads = [threading.Thread(target=work, args=(i,)) for i in range(len(agents))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        return codes


def keys(s3: object) -> set[str]:
    return set(RunStore(s3, BUCKET, RUN).keys(""))  # type: ignore[arg-type]


def test_nodes_run_the_points_in_step_and_upload_everything(
    s3: object, broker: str, tmp_path: Path
) -> None:
    fleet = Fleet(s3, scenario_file(tmp_path, broker), tmp_path)
    roles = [("sender", 0), ("sender", 1)] + [("receiver", n) for n in range(4)]
    codes = fleet.run([fleet.agent(r, n) for r, n in roles])
    assert codes == [0] * 6, fleet.logs

    # point 0 has 1 sender + 2 receivers, point 1 has 2 senders + 4 receivers
    starts = {(e[1], e[2], e[3]) for e in fleet.events if e[0] == "start"}
    assert starts == {("0", "sender", "0"), ("0", "receiver", "0"), ("0", "receiver", "1")} | {
        ("1", r, str(n)) for r, n in roles
    }
    order = [e for e in fleet.events if e[0] in ("prepare", "start", "end")]
    prepare_1 = order.index(("prepare", "1"))
    assert order[0] == ("prepare", "0")
    assert all(e[1] == "0" for e in order[:prepare_1])  # point 0 finished before point 1 began
    assert all(e[1] == "1" for e in order[prepare_1:])

    stored = keys(s3)
    assert {LAYOUT.ready(0), LAYOUT.ready(1), "context.json"} <= stored
    # the run's end, posted by the coordinator: the broker machines stop themselves
    ended = RunStore(s3, BUCKET, RUN).get_json(LAYOUT.ended)  # type: ignore[arg-type]
    assert ended is not None and ended["ok"] is True
    for point, role, node in starts:
        name = f"p{point}-{role}-{node}"
        assert {
            f"raw/seconds/{name}.parquet",
            f"nodes/{name}.json",
            LAYOUT.done(int(point), role, int(node)),
        } <= stored


def test_a_failed_node_is_reported_and_the_run_goes_on(
    s3: object, broker: str, tmp_path: Path
) -> None:
    fleet = Fleet(s3, scenario_file(tmp_path, broker), tmp_path)
    agents = [fleet.agent("sender", 0), fleet.agent("sender", 1, fail_point=1)]
    agents += [fleet.agent("receiver", n) for n in range(4)]
    assert fleet.run(agents) == [0, 1, 0, 0, 0, 0]
    marker = RunStore(s3, BUCKET, RUN).get_json(LAYOUT.done(1, "sender", 1))  # type: ignore[arg-type]
    assert marker is not None and marker["ok"] is False and "broker went away" in marker["error"]
    # its records are uploaded all the same
    assert "raw/seconds/p1-sender-1.parquet" in keys(s3)


def test_unreachable_brokers_fail_every_point_of_the_node(s3: object, tmp_path: Path) -> None:
    fleet = Fleet(s3, scenario_file(tmp_path, "127.0.0.1:9"), tmp_path)
    assert fleet.agent("receiver", 3, wait=0.2).run() == 1
    marker = RunStore(s3, BUCKET, RUN).get_json(LAYOUT.done(1, "receiver", 3))  # type: ignore[arg-type]
    assert (
        marker is not None
        and "brokers not reachable" in marker["error"]
        and "127.0.0.1:9" in marker["error"]
    )
    assert LAYOUT.done(0, "receiver", 3) not in keys(s3)  # receiver 3 is not part of point 0


def test_a_coordinator_that_cannot_run_still_posts_the_runs_end(s3: object, tmp_path: Path) -> None:
    fleet = Fleet(s3, scenario_file(tmp_path, "127.0.0.1:9"), tmp_path)
    assert fleet.agent("sender", 0, wait=0.2).run() == 1
    ended = RunStore(s3, BUCKET, RUN).get_json(LAYOUT.ended)  # type: ignore[arg-type]
    assert ended is not None and ended["ok"] is False
    assert fleet.agent("receiver", 0, wait=0.2).run() == 1  # only the coordinator posts it
    assert RunStore(s3, BUCKET, RUN).get_json(LAYOUT.ended) == ended  # type: ignore[arg-type]


def test_a_node_without_room_for_results_fails_its_points_before_waiting(
    s3: object, tmp_path: Path
) -> None:
    fleet = Fleet(s3, scenario_file(tmp_path, "127.0.0.1:9"), tmp_path)
    (tmp_path / "receiver-3").write_text("a file where the results directory should be")
    assert fleet.agent("receiver", 3, wait=60).run() == 1  # fails at once: no broker wait
    marker = RunStore(s3, BUCKET, RUN).get_json(LAYOUT.done(1, "receiver", 3))  # type: ignore[arg-type]
    assert marker is not None and "cannot create the results directory" in marker["error"]


def test_a_node_that_never_starts_is_waited_for_once_and_named(
    s3: object, broker: str, tmp_path: Path
) -> None:
    fleet = Fleet(s3, scenario_file(tmp_path, broker), tmp_path)
    loads = [{"sender_nodes": 1, "receiver_nodes": 2}, {"sender_nodes": 2, "receiver_nodes": 4}]
    points = [{"point": i, "processes_per_node": 2, "load": load} for i, load in enumerate(loads)]
    fleet.context = {"run_id": RUN, "points": points}
    roles = [("sender", 0), ("sender", 1), ("receiver", 0), ("receiver", 2), ("receiver", 3)]
    began = time.monotonic()  # receiver 1, in both points, never starts
    codes = fleet.run([fleet.agent(r, n, start_grace=0.5) for r, n in roles])
    assert codes == [0] * 5, fleet.logs
    assert time.monotonic() - began < 10  # a point's budget is 32 s
    store = RunStore(s3, BUCKET, RUN)  # type: ignore[arg-type]
    statuses = {}
    for point in (0, 1):
        marker = store.get_json(LAYOUT.done(point, "receiver", 1))
        assert marker is not None and marker["ok"] is False and marker["posted_by"] == "sender-0"
        assert marker["error"].startswith("never started: no control/receiver-1.started marker")
        for part in (0, 1):
            status = parse_status(
                "", json.dumps(store.get_json(f"nodes/p{point}-receiver-1.{part}.json"))
            )
            assert status is not None and status.error == marker["error"]
            statuses[status.key] = status
    manifest(s3)
    progress = cloud_status.run_progress(s3, cloud_run.CloudRun(BUCKET, RUN))
    assert progress.complete and progress.done == 9 and len(progress.failed) == 2
    assert "point 1 receiver 1: never started" in progress.failed[1]

    # the analysis names the node: every other node part left its records
    present = {
        (table, key)
        for point in points
        for key in expected_parts(PointEntry.model_validate(point))
        if key.node != 1 or key.role != "receiver"
        for table in key.tables
    }
    records = point_records(RunContext.of({"points": points}), RunRecords(statuses, present))
    assert [r.state for r in records] == ["incomplete", "incomplete"]
    assert records[1].delivery == (
        "incomplete: receiver node 1 process 0 wrote no results "
        f"({statuses[PartKey(1, 'receiver', 1)].error}); 1 more node process(es) likewise"
    )

    # started after all, it skips the points closed without it
    late = fleet.agent("receiver", 1)
    assert late.run() == 1
    assert not [e for e in fleet.events if e[2:] == ("receiver", "1")]
    assert sum("skipped, already closed (never started" in line for line in fleet.logs) == 2
    assert store.get_json(LAYOUT.started("receiver", 1)) is not None


def test_a_used_run_id_is_refused(s3: object, broker: str, tmp_path: Path) -> None:
    RunStore(s3, BUCKET, RUN).put_json(LAYOUT.ready(0), {"ok": True})  # type: ignore[arg-type]
    fleet = Fleet(s3, scenario_file(tmp_path, broker), tmp_path)
    assert fleet.agent("sender", 0).run() == 1
    assert any("already has results" in line for line in fleet.logs)


class FlakyStore:
    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.uploaded: list[str] = []
        self.bucket, self.run_id = BUCKET, RUN

    def upload(self, path: Path, key: str) -> None:
        if self.failures > 0:
            self.failures -= 1
            raise ConnectionError("connection reset")
        self.uploaded.append(key)

    def uri(self, key: str) -> str:
        return f"s3://{BUCKET}/runs/{RUN}/{key}"


def test_uploads_are_retried_and_a_lost_upload_keeps_the_local_copy(tmp_path: Path) -> None:
    run_dir = tmp_path / RUN
    (run_dir / "raw").mkdir(parents=True)
    (run_dir / "raw" / "a.parquet").write_text("a")
    logs: list[str] = []
    sleeps: list[float] = []
    flaky = FlakyStore(failures=2)
    uploader = Uploader(flaky, run_dir, logs.append, attempts=3, sleep=sleeps.append)  # type: ignore[arg-type]
    assert uploader.upload_new() == [] and flaky.uploaded == ["raw/a.parquet"]
    assert sleeps == [2.0, 4.0]
    assert uploader.upload_new() == []  # unchanged files are not sent twice

    (run_dir / "raw" / "b.parquet").write_text("b")
    broken = FlakyStore(failures=99)
    uploader = Uploader(broken, run_dir, logs.append, attempts=3, sleep=sleeps.append)  # type: ignore[arg-type]
    assert uploader.upload_new() == ["raw/a.parquet", "raw/b.parquet"]
    assert (
        "failed after 3 attempts" in logs[-1] and f"the local copy stays at {run_dir}" in logs[-1]
    )
    assert (run_dir / "raw" / "b.parquet").exists()


# -- brokerbench cloud … ------------------------------------------------------------------


def put(s3: object, key: str, body: str) -> None:
    s3.put_object(Bucket=BUCKET, Key=key, Body=body.encode())  # type: ignore[attr-defined]


def manifest(s3: object) -> None:
    points = [{"index": 0, "senders": 1, "receivers": 2, "label": "a"},
              {"index": 1, "senders": 2, "receivers": 4, "label": "b"}]  # fmt: skip
    put(s3, f"artifacts/{RUN}/manifest.json", json.dumps({"run_id": RUN, "points": points}))


TARGET = ["--bucket", BUCKET, "--run-id", RUN, "--region", REGION]


def test_status_and_wait_follow_the_done_markers(
    s3: object, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest(s3)
    store = RunStore(s3, BUCKET, RUN)  # type: ignore[arg-type]
    store.put_json(LAYOUT.done(0, "sender", 0), {"ok": True})
    store.put_json(LAYOUT.done(0, "receiver", 0), {"ok": False, "error": "receiver crashed"})
    assert cloud.main(["cloud", "status", *TARGET]) == 1
    out = capsys.readouterr().out
    assert "2/9 node results" in out and "point 0 receiver 0: receiver crashed" in out
    assert "waiting for: point 1 sender 1" in out
    assert "not started: receiver 3 (no control/receiver-3.started marker)" in out
    assert cloud.main(["cloud", "wait", *TARGET, "--timeout", "0.2", "--poll", "0.05"]) == 1
    assert "gave up waiting" in capsys.readouterr().err

    for role, count, point in (("receiver", 2, 0), ("sender", 2, 1), ("receiver", 4, 1)):
        for node in range(count):
            store.put_json(LAYOUT.done(point, role, node), {"ok": True})
    store.put_json(LAYOUT.done(0, "sender", 0), {"ok": True})
    assert cloud.main(["cloud", "wait", *TARGET, "--timeout", "5", "--poll", "0.05"]) == 0
    out = capsys.readouterr().out
    assert "9/9 node results" in out and "not started" not in out


def test_status_says_when_the_fleet_stops_itself(
    s3: object, capsys: pytest.CaptureFixture[str]
) -> None:
    points = [{"index": 0, "senders": 1, "receivers": 1, "label": "a"}]
    put(s3, f"artifacts/{RUN}/manifest.json",
        json.dumps({"run_id": RUN, "points": points, "ttl_hours": 12}))  # fmt: skip
    uploaded = s3.head_object(Bucket=BUCKET, Key=f"artifacts/{RUN}/manifest.json")  # type: ignore[attr-defined]
    stops = uploaded["LastModified"] + timedelta(hours=12)
    cloud.main(["cloud", "status", *TARGET])
    out = capsys.readouterr().out
    assert f"each stops itself 12 h after it booted, at about {stops:%Y-%m-%d %H:%M} UTC" in out
    put(s3, f"artifacts/{RUN}/manifest.json", json.dumps({"run_id": RUN, "points": points}))
    cloud.main(["cloud", "status", *TARGET])
    assert "no time to live (brokerbench:ttlHours 0)" in capsys.readouterr().out


def test_analyze_submits_the_job_with_the_run_and_the_wheel(
    s3: object, capsys: pytest.CaptureFixture[str]
) -> None:
    emr = boto3.client("emr-serverless", region_name=REGION)
    app = emr.create_application(name="analysis", releaseLabel="emr-7.5.0", type="SPARK")
    run = cloud_run.CloudRun(
        BUCKET, RUN, REGION, app["applicationId"], "arn:aws:iam::123456789012:role/job"
    )
    job = cloud_analyze.submit_analysis(emr, run, python="/usr/bin/python3.11")
    driver = emr.get_job_run(applicationId=run.emr_application_id, jobRunId=job)["jobRun"][
        "jobDriver"
    ]
    assert driver["sparkSubmit"]["entryPoint"] == f"s3://{BUCKET}/artifacts/{RUN}/analysis_entry.py"
    assert driver["sparkSubmit"]["entryPointArguments"] == [f"s3://{BUCKET}/runs/{RUN}/"]
    parameters = driver["sparkSubmit"]["sparkSubmitParameters"]
    assert f"--py-files s3://{BUCKET}/artifacts/{RUN}/brokerbench.zip" in parameters
    assert "spark.emr-serverless.driverEnv.PYSPARK_PYTHON=/usr/bin/python3.11" in parameters
    manifest(s3)
    args = [
        "--emr-application",
        run.emr_application_id,
        "--emr-role",
        run.emr_execution_role_arn,
        "--poll",
        "0.05",
    ]
    # An application without a custom image cannot run the job: nothing is submitted.
    assert cloud.main(["cloud", "analyze", *TARGET, *args]) == 2
    assert "has no custom image" in capsys.readouterr().err
    assert cloud.main(["cloud", "analyze", *TARGET]) == 2  # no application named


def test_fetch_downloads_the_analysis_and_prints_the_table(
    s3: object, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest(s3)
    put(s3, f"runs/{RUN}/context.json", "{}")
    put(s3, f"runs/{RUN}/raw/seconds/p0-sender-0.parquet", "big")
    summary = (
        "broker,threads,sender_nodes,receiver_nodes,send_msgs_per_s,receive_msgs_per_s,"
        "processing_latency_p95_ms,send_latency_p95_ms,lost,duplicated,not_drained,delivery\n"
        "postgresql,1,1,2,1500.0,1499.5,12.5,3.1,0,0,12,not drained: the run was interrupted\n"
        "postgresql,2,1,2,2500.0,2400.0,13.5,3.2,,0,,incomplete: no records of receiver 1\n"
    )
    put(s3, f"runs/{RUN}/analysis/summary.csv", summary)
    put(s3, f"runs/{RUN}/analysis/report.html", "<html></html>")
    assert cloud.main(["cloud", "fetch", *TARGET, "--results", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "1,500" in out and "report: " in out
    table = out.splitlines()
    assert "not drained" in next(
        line for line in table if "lost" in line
    )  # the column, since a point was stopped early
    interrupted = next(line for line in table if "1,500" in line)
    assert interrupted.endswith("← not drained: the run was interrupted")
    missing = next(line for line in table if "2,500" in line)
    assert " incomplete " in missing  # never a loss figure for a point with missing records
    run_dir = tmp_path / RUN
    assert (run_dir / "analysis" / "summary.csv").read_text() == summary
    assert (run_dir / "context.json").exists() and (run_dir / "cloud-manifest.json").exists()
    assert not (run_dir / "raw").exists()
    assert cloud.main(["cloud", "fetch", *TARGET, "--results", str(tmp_path), "--raw"]) == 0
    assert (run_dir / "raw" / "seconds" / "p0-sender-0.parquet").read_text() == "big"


def test_fetch_writes_the_report_the_emr_job_leaves_to_it(
    s3: object, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The job on EMR writes the summary and the tables behind the report; fetch draws the
    report from them, as a local run's is, and says where it is."""
    from analysis.columns import SUMMARY_COLUMNS
    from tests.test_report_render import context, summary_row

    manifest(s3)
    put(s3, f"runs/{RUN}/context.json", json.dumps(context(RUN, "postgresql", "PostgreSQL")))
    lines = io.StringIO()
    writer = csv.DictWriter(lines, fieldnames=SUMMARY_COLUMNS)
    writer.writeheader()
    writer.writerows([summary_row(0, 1, 1, 1500.0, 1499.5, 12.5)])
    put(s3, f"runs/{RUN}/analysis/summary.csv", lines.getvalue())
    assert cloud.main(["cloud", "fetch", *TARGET, "--results", str(tmp_path)]) == 0
    report = tmp_path / RUN / "analysis" / "report.html"
    assert f"report: {report}" in capsys.readouterr().out
    assert report.read_text().startswith("<!doctype html>") and RUN in report.read_text()


def test_fetch_without_analysis_says_what_to_do(
    s3: object, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    put(s3, f"runs/{RUN}/context.json", "{}")
    assert cloud.main(["cloud", "fetch", *TARGET, "--results", str(tmp_path)]) == 1
    assert "brokerbench cloud analyze" in capsys.readouterr().err


def test_a_run_must_be_named() -> None:
    assert cloud.main(["cloud", "status"]) == 2


def test_a_stack_names_its_run_through_pulumi_outputs(
    s3: object, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    outputs = {"bucket": BUCKET, "run_id": RUN, "region": REGION, "emr_application_id": "app"}
    fake = tmp_path / "pulumi"
    fake.write_text(
        "#!/bin/sh\n"
        '[ "$*" = "stack output --json --stack kafka" ] || exit 3\n'
        f"echo '{json.dumps(outputs)}'\n"
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    manifest(s3)
    assert cloud.main(["cloud", "status", "--stack", "kafka"]) == 0
    assert f"run {RUN} (s3://{BUCKET}/runs/{RUN}/): 0/9" in capsys.readouterr().out
    assert cloud.main(["cloud", "status", "--stack", "other"]) == 2


def test_a_local_stack_without_its_passphrase_says_what_to_set(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """No output of a stack is a secret, so none is asked for; a stack of pulumi login
    --local still needs its passphrase to be read, and the error says how to give it."""
    fake = tmp_path / "pulumi"
    fake.write_text(
        "#!/bin/sh\n"
        'case "$*" in *--show-secrets*) exit 3;; esac\n'
        'echo "error: constructing secrets manager of type \\"passphrase\\": unable to find '
        "either \\`PULUMI_CONFIG_PASSPHRASE\\` or \\`PULUMI_CONFIG_PASSPHRASE_FILE\\` when "
        'trying to access the Passphrase Secrets Provider" >&2\n'
        "exit 255\n"
    )
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{tmp_path}:/usr/bin:/bin")
    assert cloud.main(["cloud", "status", "--stack", "kafka"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert "export PULUMI_CONFIG_PASSPHRASE (or PULUMI_CONFIG_PASSPHRASE_FILE)" in line
    assert "--bucket and --run-id" in line


def run_machines(state: str, count: int = 3) -> list[str]:
    """Machines of the run (tagged with it, as the stack tags them), in ``state``."""
    ec2 = boto3.client("ec2", region_name=REGION)
    tags = [{"Key": "brokerbench:run", "Value": RUN}, {"Key": "brokerbench:stack", "Value": "pg"}]
    answer = ec2.run_instances(
        ImageId="ami-12c6146b", MinCount=count, MaxCount=count, InstanceType="c5.large",
        TagSpecifications=[{"ResourceType": "instance", "Tags": tags}],
    )  # fmt: skip
    ids = [i["InstanceId"] for i in answer["Instances"]]
    if state == "stopped":
        ec2.stop_instances(InstanceIds=ids)
    return ids


def test_wait_notices_a_stopped_fleet_instead_of_waiting_on(
    s3: object, capsys: pytest.CaptureFixture[str]
) -> None:
    """Results that never came from a fleet that has stopped (its ttl, or a failure) will
    not come: wait says so at once rather than polling until its own timeout."""
    manifest(s3)
    RunStore(s3, BUCKET, RUN).put_json(LAYOUT.done(0, "sender", 0), {"ok": True})  # type: ignore[arg-type]
    run_machines("stopped")
    began = time.monotonic()
    assert cloud.main(["cloud", "wait", *TARGET, "--timeout", "60", "--poll", "0.05"]) == 1
    assert time.monotonic() - began < 20
    (line,) = capsys.readouterr().err.splitlines()
    assert line == (
        "brokerbench: 3 stopped — the fleet has stopped: the results still missing will not come"
    )


def test_wait_and_status_see_the_runs_end(s3: object, capsys: pytest.CaptureFixture[str]) -> None:
    manifest(s3)
    run_machines("running")
    store = RunStore(s3, BUCKET, RUN)  # type: ignore[arg-type]
    store.put_json(LAYOUT.ended, {"ok": False, "at": "2026-11-21T15:00:00Z"})
    assert cloud.main(["cloud", "wait", *TARGET, "--timeout", "60", "--poll", "0.05"]) == 1
    assert capsys.readouterr().err.splitlines() == [
        "brokerbench: the run ended at 2026-11-21T15:00:00Z without these results: they will "
        "not come"
    ]
    cloud.main(["cloud", "status", *TARGET])
    out = capsys.readouterr().out
    assert "the run ended at 2026-11-21T15:00:00Z: every machine stops itself" in out
    assert "machines: 3 running" in out


def test_status_shows_the_last_lines_of_a_failed_set_up(
    s3: object, capsys: pytest.CaptureFixture[str]
) -> None:
    """A machine whose set-up failed uploads its logs (user-data's failure trap): status
    shows the last lines of its node log, where the whole logs are."""
    manifest(s3)
    log = "".join(f"brokerbench: step {i}\n" for i in range(10))
    log += "E: Unable to locate package kafka\nbrokerbench: node broker-1 setup FAILED (line 42)\n"
    put(s3, f"runs/{RUN}/{LAYOUT.boot_failure('broker-1')}", log)
    put(s3, f"runs/{RUN}/{LAYOUT.boot_logs}broker-1.cloud-init-output.log", "…")
    cloud.main(["cloud", "status", *TARGET])
    out = capsys.readouterr().out
    assert (
        f"  set-up failed: broker-1 (its logs: s3://{BUCKET}/runs/{RUN}/logs/boot/):\n"
        "    brokerbench: step 7\n    brokerbench: step 8\n    brokerbench: step 9\n"
        "    E: Unable to locate package kafka\n"
        "    brokerbench: node broker-1 setup FAILED (line 42)\n"
    ) in out
