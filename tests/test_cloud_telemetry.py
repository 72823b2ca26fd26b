"""Telemetry on AWS without AWS: the broker machines' telemetry agent against a mocked S3
and against the local S3 server that enforces the stack's IAM policies (it may write only
telemetry batches), its unit in every broker node's user-data, the client agent's sampler,
and the analysis placing streamed rows in the points by their seconds."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from brokers import registry
from infra import userdata_checks
from infra.access import broker_s3_policy
from infra.plan import BrokerNode
from infra.userdata import TELEMETRY_AGENT_UNIT, RunContext, broker_user_data
from tests import test_agent_iam as iam_tests
from tests import test_cloud_faults as fault_tests
from tests.test_agent_iam import Account, answers
from tests.test_cloud_commands import BUCKET, RUN
from tests.test_cloud_faults import BUCKET_LAYOUT, CLUSTER, CONTEXT
from workload.engine.aws import telemetry_agent
from workload.engine.aws.store import RunStore, StoreDenied
from workload.engine.aws.telemetry_agent import TelemetryAgent, unit_processes
from workload.model.layout import LAYOUT

server, account, s3 = iam_tests.server, iam_tests.account, fault_tests.s3


def agent(store: RunStore, processes: Any, **more: Any) -> TelemetryAgent:
    return TelemetryAgent(
        store,
        "broker-1",
        "kafka.service",
        Path("/tmp"),
        interval=0.2,
        batch=0.5,
        log=lambda _: None,
        processes=processes,
        **more,
    )


def run_for(found: TelemetryAgent, seconds: float) -> None:
    thread = threading.Thread(target=found.run)
    thread.start()
    time.sleep(seconds)
    found.stop.set()
    thread.join(timeout=10)
    assert not thread.is_alive()


def run_until(found: TelemetryAgent, done: Any, bound: float = 30.0) -> None:
    """Run the agent until ``done()`` (an event, however slow the machine), then stop it."""
    thread = threading.Thread(target=found.run)
    thread.start()
    deadline = time.monotonic() + bound
    while not done() and time.monotonic() < deadline:
        time.sleep(0.05)
    found.stop.set()
    thread.join(timeout=10)
    assert not thread.is_alive() and done(), f"not done within {bound:g} s"


def test_the_agent_streams_the_units_processes_and_the_machine_in_batches(s3: Any) -> None:
    store = RunStore(s3, BUCKET, RUN)
    asked: list[str] = []

    def processes(unit: str) -> tuple[int, ...]:
        asked.append(unit)
        return (os.getpid(),)

    # batches uploaded while it runs (every 0.5 s; then the last one on stopping)
    run_until(agent(store, processes), lambda: len(store.keys(LAYOUT.telemetry_stream)) >= 2)
    keys = sorted(store.keys(LAYOUT.telemetry_stream))
    assert len(keys) >= 2
    assert all(k.startswith(f"{LAYOUT.telemetry_stream}/broker-1/") for k in keys)
    rows = [
        json.loads(line)
        for k in keys
        for line in s3.get_object(Bucket=BUCKET, Key=store.prefix + k)["Body"].read().splitlines()
    ]
    nodes = {r["node"] for r in rows}
    assert nodes == {"broker-1", "host-broker-1"}
    assert all(r["point"] == -1 and r["run_id"] == RUN for r in rows)
    assert set(asked) == {"kafka.service"}
    mine = [r for r in rows if r["node"] == "broker-1"]
    assert mine and all(r["role"] == "broker" and r["rss_bytes"] > 0 for r in mine)
    assert any(k.endswith(f"/{min(r['second'] for r in rows)}.jsonl") for k in keys)


def test_batches_that_begin_in_the_same_second_are_all_kept(s3: Any) -> None:
    store = RunStore(s3, BUCKET, RUN)
    found = agent(store, lambda _: (os.getpid(),))
    for rows in ([{"second": 5, "n": 0}], [{"second": 5, "n": 1}, {"second": 6, "n": 2}]):
        assert found.upload(rows) == []
    assert found.upload([{"second": 6, "n": 3}]) == []
    keys = sorted(store.keys(LAYOUT.telemetry_stream))
    assert keys == sorted(
        LAYOUT.telemetry_batch("broker-1", s, p) for s, p in ((5, 0), (5, 1), (6, 0))
    )
    kept = [
        json.loads(line)["n"]
        for k in keys
        for line in s3.get_object(Bucket=BUCKET, Key=store.prefix + k)["Body"].read().splitlines()
    ]
    assert sorted(kept) == [0, 1, 2, 3]


def test_a_failed_upload_keeps_the_rows_for_the_next(s3: Any) -> None:
    store = RunStore(s3, BUCKET, RUN)
    found = agent(store, lambda _: (os.getpid(),))
    lines: list[str] = []
    found.log = lines.append
    real = store.put_text
    calls = {"n": 0}

    def flaky(key: str, text: str) -> None:
        calls["n"] += 1
        if calls["n"] == 1:
            raise OSError("connection reset")
        real(key, text)

    store.put_text = flaky  # type: ignore[method-assign]
    rows = [{"second": s, "node": "n"} for s in (5, 6)]
    assert found.upload(rows) == rows
    assert any("failed (connection reset); 2 rows kept" in line for line in lines)
    assert found.upload([*rows, {"second": 7, "node": "n"}]) == []
    (key,) = store.keys(LAYOUT.telemetry_stream)
    assert key == LAYOUT.telemetry_batch("broker-1", 5)


def test_the_units_processes_come_from_its_cgroup(tmp_path: Path) -> None:
    procs = tmp_path / "system.slice" / "kafka.service" / "cgroup.procs"
    procs.parent.mkdir(parents=True)
    procs.write_text("101\n202\n")
    assert unit_processes("kafka.service", tmp_path) == (101, 202)
    assert unit_processes("gone.service", tmp_path) == ()
    everything = unit_processes("")
    assert os.getppid() in everything and os.getpid() not in everything


def test_the_agent_runs_from_the_wheel_with_python_and_psutil_only(tmp_path: Path) -> None:
    """As a broker machine runs it: ``python3 -m`` with the project on PYTHONPATH and no
    pyarrow, pydantic or Spark importable (Debian's python3 has boto3 and psutil)."""
    blocker = tmp_path / "blocker"
    blocker.mkdir()
    for name in ("pyarrow", "pydantic", "pyspark"):
        (blocker / f"{name}.py").write_text(f"raise ImportError('{name} is not on the machine')\n")
    code = (
        "import workload.engine.aws.telemetry_agent as a, sys\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('pyarrow', 'pydantic', 'pyspark')))\n"
    )
    root = Path(__file__).resolve().parent.parent
    done = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "PYTHONPATH": f"{blocker}{os.pathsep}{root}"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_the_runs_end_uploads_what_is_left_and_stops_the_machine(s3: Any) -> None:
    """The broker machine stops itself when the run ends: its agent sees the end marker,
    uploads the rows it still holds and powers the machine off."""
    store = RunStore(s3, BUCKET, RUN)
    stopped: list[float] = []
    found = agent(store, lambda _: (os.getpid(),), end_poll=0.3, at_end=lambda: stopped.append(1))
    thread = threading.Thread(target=found.run)
    thread.start()
    time.sleep(1.2)
    assert thread.is_alive() and not stopped  # the run goes on
    store.put_json(LAYOUT.ended, {"ok": True, "at": "now"})
    thread.join(timeout=10)
    assert not thread.is_alive() and stopped == [1]
    assert store.keys(LAYOUT.telemetry_stream)
    # the unit asks for it
    context = RunContext(**{**vars(CONTEXT), "system": "kafka", "title": "Kafka"})
    cluster = {"broker": ["10.42.1.10", "10.42.1.11", "10.42.1.12"]}
    node = BrokerNode("broker", 1, "10.42.1.11")
    text = broker_user_data(context, node, registry.get("kafka").cloud, cluster, None)
    unit = userdata_checks.written_files(text)[f"/etc/systemd/system/{TELEMETRY_AGENT_UNIT}"]
    assert " --stop-at-end" in unit


def test_a_broker_machine_writes_only_telemetry_batches(account: Account) -> None:
    admin = account.client("s3", account.admin)
    admin.put_object(Bucket=BUCKET, Key=BUCKET_LAYOUT.wheel_key, Body=b"wheel")
    policy = broker_s3_policy(BUCKET, BUCKET_LAYOUT, faults=False)
    machine = account.s3_as(account.role("broker", policy), "broker-1", policy)
    run = f"runs/{RUN}/"
    batch = run + LAYOUT.telemetry_batch("broker-1", 1700000000)
    expected = {
        ("put", batch): "ok",
        ("get", BUCKET_LAYOUT.wheel_key): "ok",
        ("get", batch): "AccessDenied 403",  # it writes, never reads
        ("put", run + LAYOUT.telemetry_file(0, "broker-1")): "AccessDenied 403",
        ("put", run + LAYOUT.raw_file("seconds", 0, "sender", 0)): "AccessDenied 403",
        ("put", run + LAYOUT.summary): "AccessDenied 403",
        ("put", run + LAYOUT.fault_marker("broker-1", 0, 0, "begin") + ".ack"): "AccessDenied 403",
        ("put", f"runs/other-run/{LAYOUT.telemetry_batch('broker-1', 1)}"): "AccessDenied 403",
        ("put", run + LAYOUT.boot_failure("broker-1")): "ok",  # its logs, when set-up fails
        ("put", run + LAYOUT.ended): "AccessDenied 403",  # it sees the run's end, never posts it
    }
    assert answers(machine, list(expected)) == list(expected.values())
    # the agent itself, on that session: it may look for the run's end (a listing of
    # exactly its key), nothing else of the run's control markers
    store = RunStore(machine, BUCKET, RUN)
    assert store.exists(LAYOUT.ended) is False
    with pytest.raises(StoreDenied):
        store.exists(LAYOUT.done(0, "sender", 0))
    found = agent(store, lambda _: (os.getpid(),))
    run_for(found, 1.2)
    listed = admin.list_objects_v2(Bucket=BUCKET, Prefix=run + LAYOUT.telemetry_stream)
    assert len(listed.get("Contents", [])) >= 1


def unit_text(text: str) -> str:
    return userdata_checks.written_files(text).get(
        f"/etc/systemd/system/{TELEMETRY_AGENT_UNIT}", ""
    )


@pytest.mark.parametrize("faults", [True, False])
def test_every_broker_node_runs_the_telemetry_agent(faults: bool) -> None:
    recipe = registry.get("postgresql").cloud
    context = RunContext(**{**vars(CONTEXT), "faults": faults})
    node = BrokerNode("standby", 1, "10.42.1.12")
    text = broker_user_data(context, node, recipe, CLUSTER, params=None)
    unit = unit_text(text)
    (start,) = [line for line in unit.splitlines() if line.startswith("ExecStart=")]
    args = telemetry_agent.arguments().parse_args(shlex.split(start.removeprefix("ExecStart="))[3:])
    assert vars(args) == {
        "bucket": BUCKET, "run_id": RUN, "region": CONTEXT.region, "node": "standby-1",
        "unit": "postgresql@15-main.service", "data_dir": "/var/lib/postgresql", "interval": 1.0,
        "stop_at_end": True,
    }  # fmt: skip
    assert f"[systemctl, enable, --now, {TELEMETRY_AGENT_UNIT}]" in text
    assert "python3-psutil" in text and "python3-boto3" in text
    assert userdata_checks.cloud_config_problems(text) == []
    schema = userdata_checks.cloud_init_schema(text)
    if schema is not None:
        assert schema == []


def test_a_system_without_a_unit_samples_the_machines_processes() -> None:
    recipe = registry.get("pulsar").cloud
    context = RunContext(**{**vars(CONTEXT), "system": "pulsar", "title": "Pulsar"})
    cluster = {"zookeeper": ["10.42.1.10"], "bookie": ["10.42.1.11"], "broker": ["10.42.1.12"]}
    text = broker_user_data(context, BrokerNode("broker", 0, "10.42.1.12"), recipe, cluster, None)
    assert "--unit" not in unit_text(text) and "--node broker-0" in unit_text(text)
