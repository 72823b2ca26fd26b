"""Faults on AWS without AWS: the broker machines' fault agent (with a stand-in for
systemctl and iptables) and the coordinator's markers and timelines, against a mocked S3
and against the local S3 server that enforces the stack's IAM policies; the scenario
checks; the fault agent's unit in the broker user-data; the broker role under Pulumi's
mocks."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import threading
import time
import zipfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from brokers import registry
from brokers.cloud import CloudFaults
from infra import access_checks, checks, userdata_checks
from infra.access import RunAccess, RunAccessArgs, broker_s3_policy, client_s3_policy
from infra.mocking import deploy
from infra.plan import BrokerNode, BucketLayout
from infra.userdata import FAULT_AGENT_UNIT, RunContext, broker_user_data
from tests import test_agent_iam as iam_tests
from tests import test_cloud_commands as fleet_tests
from tests.test_agent_iam import Account, answer, answers
from tests.test_cloud_commands import BUCKET, REGION, RUN
from workload.engine.aws import fault_agent
from workload.engine.aws.agent import ClientAgent, RunStore
from workload.engine.aws.fault_agent import FaultAgent, FaultFailed, NodeFaults
from workload.engine.aws.fault_driver import (
    FaultMarkers,
    Leader,
    RunFaults,
    fault_nodes,
    point_clock,
)
from workload.engine.faults import FaultClock, schedule
from workload.model.errors import ScenarioError
from workload.model.faults import FaultSpec, PointTimeline
from workload.model.layout import BEGIN, END, LAYOUT
from workload.model.scenario_file import parse_scenario

ROOT = Path(__file__).resolve().parent.parent
BUCKET_LAYOUT = BucketLayout(RUN, "brokerbench-0.1.0-py3-none-any.whl")
UNIT = "postgresql@15-main.service"
PORTS = [5432]
#: A PostgreSQL stack's fault nodes: the primary leads (node 0), nothing fails over.
SUPPORT = CloudFaults(UNIT, ("primary", "standby"), fails_over=False, leader=0)
ROLES = {"primary": 1, "standby": 2}
NODES = fault_nodes(SUPPORT, ROLES)
server, account, broker = iam_tests.server, iam_tests.account, fleet_tests.broker


@pytest.fixture
def s3() -> Iterator[Any]:
    with mock_aws():
        client = boto3.client("s3", region_name=REGION)
        client.create_bucket(
            Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": REGION}
        )
        yield client


@dataclass
class Machine:
    """Stands for the commands of a broker machine: records them, fails those it is told."""

    failing: str = ""
    commands: list[str] = field(default_factory=list)

    def __call__(self, command: Sequence[str]) -> None:
        line = " ".join(command)
        self.commands.append(line)
        if self.failing and self.failing in line:
            raise FaultFailed(f"{line}: Unit {UNIT} not loaded.")


class Ticks:
    """A wall clock that says 1000, 2000, … (ns), one tick per reading."""

    def __init__(self) -> None:
        self.now = 0

    def __call__(self) -> int:
        self.now += 1000
        return self.now


def agent_of(store: RunStore, node: str, machine: Machine, tmp_path: Path) -> FaultAgent:
    faults = NodeFaults(UNIT, PORTS, machine, address="10.42.1.11", runtime_units=tmp_path)
    return FaultAgent(store, node, faults, log=lambda _: None, poll=0.01, clock=Ticks())


def post(store: RunStore, point: int, fault: int, kind: str, action: str, **extra: Any) -> str:
    key = LAYOUT.fault_marker("standby-0", point, fault, kind)
    store.put_json(key, {"action": action, **extra})
    return key


# -- the fault agent ------------------------------------------------------------------------


def test_the_fault_agent_acts_on_its_markers_in_order_and_acknowledges(
    s3: Any, tmp_path: Path
) -> None:
    store = RunStore(s3, BUCKET, RUN)
    machine = Machine()
    agent = agent_of(store, "standby-0", machine, tmp_path)
    drop_in = tmp_path / f"{UNIT}.d" / fault_agent.DROP_IN
    kill = post(store, 0, 0, BEGIN, "kill")
    store.put_json(LAYOUT.fault_marker("standby-1", 0, 0, BEGIN), {"action": "stop"})  # not its own
    assert agent.step()
    assert machine.commands == [
        "systemctl daemon-reload",
        f"systemctl kill --signal=SIGKILL {UNIT}",
    ]
    assert drop_in.read_text() == "[Service]\nRestart=no\n"  # systemd must not restart it
    assert store.get_json(LAYOUT.fault_ack(kill)) == {
        "acted_ns": 1000, "ok": True, "error": "", "node": "standby-0",
    }  # fmt: skip

    machine.commands.clear()
    for kind, i, action in [
        (END, 0, "kill"), (BEGIN, 1, "stop"), (END, 1, "stop"), (BEGIN, 2, "pause"),
        (END, 2, "pause"), (BEGIN, 3, "isolate"), (END, 3, "isolate"),
    ]:  # fmt: skip
        post(store, 0, i, kind, action)
    assert agent.step()
    chain = fault_agent.CHAIN
    assert machine.commands == [
        "systemctl daemon-reload",
        f"systemctl start {UNIT}",
        f"systemctl stop {UNIT}",
        f"systemctl start {UNIT}",
        f"systemctl kill --signal=SIGSTOP {UNIT}",
        f"systemctl kill --signal=SIGCONT {UNIT}",
        f"iptables -N {chain}",
        f"iptables -A {chain} -s 127.0.0.0/8 -j RETURN",
        f"iptables -A {chain} -s 10.42.1.11 -d 10.42.1.11 -j RETURN",
        f"iptables -A {chain} -p tcp -m multiport --dports 5432 -j DROP",
        f"iptables -A {chain} -p tcp -m multiport --sports 5432 -j DROP",
        f"iptables -I INPUT 1 -j {chain}",
        f"iptables -I OUTPUT 1 -j {chain}",
        f"iptables -D INPUT -j {chain}",
        f"iptables -D OUTPUT -j {chain}",
        f"iptables -F {chain}",
        f"iptables -X {chain}",
    ]
    assert not drop_in.exists()
    machine.commands.clear()
    assert agent.step() and machine.commands == []  # every marker answered once
    acks = sorted(k for k in store.keys("control/faults/") if k.endswith(".ack"))
    assert len(acks) == 8 and all(store.get_json(k)["ok"] for k in acks)  # type: ignore[index]
    store.put_json(LAYOUT.fault_finished("standby-0"), {})
    assert not agent.step()


def test_a_failed_command_is_acknowledged_with_its_one_line(s3: Any, tmp_path: Path) -> None:
    store = RunStore(s3, BUCKET, RUN)
    agent = agent_of(store, "standby-0", Machine(failing="SIGSTOP"), tmp_path)
    key = post(store, 2, 0, BEGIN, "pause")
    agent.step()
    ack = store.get_json(LAYOUT.fault_ack(key))
    assert ack is not None and ack["ok"] is False
    assert ack["error"] == f"systemctl kill --signal=SIGSTOP {UNIT}: Unit {UNIT} not loaded."


def test_isolate_never_cuts_ssh_or_https(tmp_path: Path) -> None:
    machine = Machine()
    faults = NodeFaults("broker.service", [22, 9092], machine, runtime_units=tmp_path)
    with pytest.raises(FaultFailed, match="port 22"):
        faults.begin("isolate")
    assert machine.commands == []


def test_the_fault_agent_runs_from_a_zip_without_site_packages(tmp_path: Path) -> None:
    """What a broker machine does: ``python3 -m workload.engine.aws.fault_agent`` from the wheel,
    with the system's Python only (boto3 is imported once the arguments are read)."""
    wheel = tmp_path / "brokerbench.whl"
    with zipfile.ZipFile(wheel, "w") as archive:
        for name in (
            "__init__.py",
            "model/__init__.py",
            "model/layout.py",
            "engine/__init__.py",
            "engine/aws/__init__.py",
            "engine/aws/store.py",
            "engine/aws/fault_agent.py",
        ):
            archive.write(ROOT / "workload" / name, f"workload/{name}")
    done = subprocess.run(
        [sys.executable, "-S", "-m", "workload.engine.aws.fault_agent", "--help"],
        capture_output=True, text=True, cwd=tmp_path, env={"PYTHONPATH": str(wheel)},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "--unit" in done.stdout and "--ports" in done.stdout


# -- the coordinator -----------------------------------------------------------------------


def test_a_schedule_begins_and_ends_faults_in_time_order() -> None:
    faults = [
        FaultSpec(at=5.0, action="kill", node=1, until=9.0),
        FaultSpec(at=1.0, action="pause", node=2, until=3.0),
        FaultSpec(at=12.0, action="stop", node="leader"),
    ]
    assert schedule(faults) == [
        (1.0, 1, True), (3.0, 1, False), (5.0, 0, True), (9.0, 0, False), (12.0, 2, True),
    ]  # fmt: skip


def clock(
    store: RunStore, point: int, faults: list[FaultSpec], leader: Leader | None, ack_timeout: float
) -> FaultClock:
    """A point's fault clock over S3 markers, answered within ``ack_timeout``."""
    markers = FaultMarkers(store, point, NODES, leader, ack_timeout, poll=0.01)
    return point_clock(point, faults, SUPPORT, markers, lambda _: None)


def answering(agents: list[FaultAgent]) -> tuple[threading.Thread, threading.Event]:
    """The broker machines' fault agents, stepping in a thread until told to stop."""
    stop = threading.Event()

    def work() -> None:
        while not stop.is_set():
            for agent in agents:
                agent.step()
            time.sleep(0.01)

    thread = threading.Thread(target=work, daemon=True)
    thread.start()
    return thread, stop


def test_the_coordinator_posts_markers_no_sooner_than_their_times_and_writes_the_timeline(
    s3: Any, tmp_path: Path
) -> None:
    store = RunStore(s3, BUCKET, RUN)
    machines = {node: Machine() for node in NODES}
    agents = [agent_of(store, n, machines[n], tmp_path / n) for n in NODES]
    faults = [
        FaultSpec(at=0.1, action="kill", node=1, until=0.3),
        FaultSpec(at=0.4, action="pause", node="follower"),
    ]
    point = clock(store, 3, faults, lambda: 0, 30)
    thread, stop = answering(agents)
    point.start()
    keys = [
        LAYOUT.fault_marker("standby-0", 3, 0, BEGIN),
        LAYOUT.fault_marker("standby-0", 3, 0, END),
    ]
    keys.append(LAYOUT.fault_marker("standby-0", 3, 1, BEGIN))  # the first follower that is up
    deadline = time.monotonic() + 30
    while not all(LAYOUT.fault_ack(k) in store.keys("control/faults/") for k in keys):
        assert time.monotonic() < deadline, store.keys("control/faults/")
        time.sleep(0.01)
    timeline = point.finish(restore=True)
    stop.set()
    thread.join()

    assert point.sending_ns is not None
    for key, at in zip(keys, (0.1, 0.3, 0.4), strict=True):
        marker = store.get_json(key)
        assert marker is not None and marker["posted_ns"] - point.sending_ns >= at * 1e9
    kill, pause = timeline.faults
    acks = [store.get_json(LAYOUT.fault_ack(k)) or {} for k in keys]
    assert (kill.node, kill.leader, kill.fails_over) == ("standby-0", False, False)
    assert (kill.began_ns, kill.ended_ns) == (acks[0]["acted_ns"], acks[1]["acted_ns"])
    assert (pause.node, pause.began_ns, pause.ended_ns) == ("standby-0", acks[2]["acted_ns"], None)
    restore = store.get_json(LAYOUT.fault_marker("standby-0", 3, 1, END))
    assert restore is not None and restore["why"] == "restore"
    assert pause.restored_ns is not None and not pause.error and not kill.error
    assert machines["primary-0"].commands == [] and machines["standby-1"].commands == []
    assert machines["standby-0"].commands[-1] == f"systemctl kill --signal=SIGCONT {UNIT}"
    assert PointTimeline.model_validate_json(timeline.model_dump_json()) == timeline


def test_a_fault_nobody_answers_is_an_error_of_the_timeline(s3: Any) -> None:
    store = RunStore(s3, BUCKET, RUN)
    faults = [FaultSpec(at=0.0, action="stop", node=2), FaultSpec(at=50.0, action="kill", node=1)]
    point = clock(store, 0, faults, None, 0.05)
    point.start()
    deadline = time.monotonic() + 30
    while LAYOUT.fault_marker("standby-1", 0, 0, BEGIN) not in store.keys("control/"):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    stop, kill = point.finish(restore=False).faults
    assert stop.began_ns is None and "no answer from the fault agent of standby-1" in stop.error
    assert kill.error == "not performed: the point ended first"


# -- the coordinating client agent ---------------------------------------------------------

FAULT_SCENARIO = """
name = "pg-faults"
[broker]
system = "postgresql"
deployment = "endpoints"
endpoints = ["{endpoint}"]
[broker.aws_topology]
primary = 1
standby = 2
[load]
duration = "2s"
idle_timeout = "40s"
receiver_nodes = 1
[[faults]]
at = "0.1s"
action = "kill"
node = 2
until = "0.2s"
[[faults]]
at = "0.3s"
action = "stop"
node = 1
[sweep]
message_size = [100, 200]
"""


@dataclass
class WaitingCommands:
    """``brokerbench prepare`` / ``node`` of a client machine; the coordinator's node runs
    until the point's faults were acted on (what a real sender node's duration covers)."""

    store: RunStore
    coordinator: bool
    waits_for: list[str] = field(default_factory=list)

    def prepare(self, point: int) -> tuple[bool, str]:
        return True, "prepared"

    def run_node(self, point: int) -> tuple[bool, str]:
        if self.coordinator:
            wanted = [LAYOUT.fault_ack(k.format(point=point)) for k in self.waits_for]
            deadline = time.monotonic() + 30
            while not all(k in self.store.keys("control/faults/") for k in wanted):
                if time.monotonic() > deadline:
                    return False, "faults not acted on"
                time.sleep(0.01)
        return True, "ok"


def test_the_coordinator_runs_each_points_faults_and_uploads_its_timeline(
    s3: Any, broker: str, tmp_path: Path
) -> None:
    scenario = tmp_path / "scenario.toml"
    scenario.write_text(FAULT_SCENARIO.format(endpoint=broker))
    store = RunStore(s3, BUCKET, RUN)
    machines = {node: Machine() for node in NODES}
    agents = [agent_of(store, n, machines[n], tmp_path / n) for n in NODES]
    thread, stop = answering(agents)
    logs: list[str] = []
    waits = [
        "control/faults/standby-1/p{point}-f0.end",
        "control/faults/standby-0/p{point}-f1.begin",
    ]
    clients = [
        ClientAgent(
            role, 0, store, scenario, tmp_path / role, WaitingCommands(store, role == "sender", waits),
            log=logs.append, broker_wait=0, poll=0.01, point_slack=30,
        )
        for role in ("sender", "receiver")
    ]  # fmt: skip
    for client in clients:
        client.fault_ack_timeout = 30
    codes = [0, 0]

    def work(i: int) -> None:
        codes[i] = clients[i].run()

    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    stop.set()
    thread.join()

    assert codes == [0, 0], logs
    for point in (0, 1):
        assert store.get_json(LAYOUT.done(point, "receiver", 0)) is not None
        timeline = PointTimeline.model_validate(store.get_json(f"faults/p{point}.json"))
        kill, stop_ = timeline.faults
        assert (kill.node, kill.action, stop_.node, stop_.action) == (
            "standby-1", "kill", "standby-0", "stop",
        )  # fmt: skip
        assert kill.began_ns and kill.ended_ns and stop_.began_ns and not stop_.error
        assert (stop_.ended_ns is None) and (stop_.restored_ns is not None) == (point == 0)
    # the stopped standby is started again between the points, not after the last one
    assert machines["standby-0"].commands == [
        f"systemctl stop {UNIT}", f"systemctl start {UNIT}", f"systemctl stop {UNIT}",
    ]  # fmt: skip
    assert all(LAYOUT.fault_finished(n) in store.keys("control/faults/") for n in NODES)


# -- the broker role's policy against the IAM-enforcing S3 server ----------------------------


def test_a_broker_machine_reads_only_fault_markers_and_writes_only_acknowledgements(
    account: Account, tmp_path: Path
) -> None:
    admin = account.client("s3", account.admin)
    for key in (BUCKET_LAYOUT.wheel_key, "artifacts/other-run/x.whl"):
        admin.put_object(Bucket=BUCKET, Key=key, Body=b"wheel")
    policy = broker_s3_policy(BUCKET, BUCKET_LAYOUT)
    machine_s3 = account.s3_as(account.role("broker", policy), "standby-0", policy)
    client_policy = client_s3_policy(BUCKET, BUCKET_LAYOUT)
    client = account.s3_as(account.role("client", client_policy), "sender-0", client_policy)
    run = f"runs/{RUN}/"
    begin = run + LAYOUT.fault_marker("standby-0", 0, 0, BEGIN)
    for key in (
        begin,
        run + LAYOUT.fault_marker("standby-0", 0, 0, END),
        run + LAYOUT.done(0, "sender", 0),
    ):
        client.put_object(Bucket=BUCKET, Key=key, Body=b"{}")
    expected = {
        ("get", begin): "ok",
        ("get", run + LAYOUT.fault_marker("standby-0", 0, 0, END)): "ok",
        ("put", run + LAYOUT.fault_ack(LAYOUT.fault_marker("standby-0", 0, 0, BEGIN))): "ok",
        ("get", BUCKET_LAYOUT.wheel_key): "ok",
        ("get", "artifacts/other-run/x.whl"): "AccessDenied 403",
        ("put", begin): "AccessDenied 403",  # markers are the coordinator's
        ("get", run + LAYOUT.done(0, "sender", 0)): "AccessDenied 403",
        ("put", run + LAYOUT.done(0, "sender", 0)): "AccessDenied 403",
        ("put", run + "faults/p0.json"): "AccessDenied 403",
        (
            "put",
            f"runs/other-run/{LAYOUT.fault_marker('standby-0', 0, 0, BEGIN)}.ack",
        ): "AccessDenied 403",
        ("delete", begin): "AccessDenied 403",
    }
    assert answers(machine_s3, list(expected)) == list(expected.values())
    listing = {
        run + "control/faults/standby-0/": "ok",
        run + "control/": "AccessDenied 403",
        run: "AccessDenied 403",
    }
    assert [
        answer(lambda p=prefix: machine_s3.list_objects_v2(Bucket=BUCKET, Prefix=p))
        for prefix in listing
    ] == list(listing.values())

    # the whole exchange, each side with its own role
    machine = Machine()
    agent = agent_of(RunStore(machine_s3, BUCKET, RUN), "standby-1", machine, tmp_path)
    coordinator = RunStore(client, BUCKET, RUN)
    faults = [FaultSpec(at=0.0, action="pause", node=2, until=0.05)]
    point = clock(coordinator, 1, faults, None, 30)
    thread, stop = answering([agent])
    point.start()
    deadline = time.monotonic() + 30
    while LAYOUT.fault_ack(LAYOUT.fault_marker("standby-1", 1, 0, END)) not in coordinator.keys(
        "control/faults/"
    ):
        assert time.monotonic() < deadline
        time.sleep(0.01)
    (pause,) = point.finish(restore=True).faults
    stop.set()
    thread.join()
    assert pause.began_ns and pause.ended_ns and not pause.error
    assert machine.commands == [
        f"systemctl kill --signal=SIGSTOP {UNIT}", f"systemctl kill --signal=SIGCONT {UNIT}",
    ]  # fmt: skip


def test_the_broker_role_gets_the_fault_statements_only_with_faults() -> None:
    def program(faults: bool) -> Any:
        access = RunAccess(
            "access", RunAccessArgs("results-bucket", BUCKET_LAYOUT, {}, faults=faults)
        )
        return access

    for faults in (False, True):
        _, resources = deploy(lambda faults=faults: program(faults))  # type: ignore[misc]
        assert access_checks.iam_problems(resources, "results-bucket", RUN) == []
        policies = {
            r.name: r.inputs["policy"]
            for r in checks.of_type(resources, "iam/rolePolicy:RolePolicy")
        }
        expected = broker_s3_policy("results-bucket", BUCKET_LAYOUT, faults)
        assert policies.get("access-broker-s3") == expected
        sids = [s["Sid"] for s in json.loads(expected)["Statement"]]
        assert ("ListFaultMarkers" in sids) is faults
        # the telemetry agent's, always: the wheel, its batches and the logs, the run's end
        assert sids[:3] == ["ReadWheel", "WriteTelemetryAndLogs", "SeeTheRunsEnd"]


# -- the scenario ----------------------------------------------------------------------------

AWS = """
name = "f"
[broker]
system = "{system}"
deployment = "endpoints"
endpoints = ["10.42.1.10:1"]
[broker.aws_topology]
{roles}
[load]
duration = "30s"
[[faults]]
at = "5s"
action = "{action}"
node = {node}
until = "8s"
"""


def aws_scenario(system: str, node: str, roles: str = "broker = 3", action: str = "kill") -> str:
    return AWS.format(system=system, roles=roles, node=node, action=action)


def problems(text: str) -> str:
    import tomllib

    try:
        parse_scenario(tomllib.loads(text), "f.toml", text)
    except ScenarioError as exc:
        return str(exc)
    return ""


@pytest.mark.parametrize(
    ("system", "node", "roles", "action"),
    [
        ("kafka", '"leader"', "broker = 3", "kill"),  # asked over the network
        ("nats", '"follower"', "server = 3", "stop"),
        ("postgresql", '"leader"', "primary = 1\nstandby = 2", "pause"),  # always node 0
        ("rabbitmq", "2", "broker = 3", "isolate"),  # a firewall rule on AWS
        ("redis", "1", "master = 1\nreplica = 2", "kill"),
    ],
)
def test_aws_stacks_take_faults_whose_recipe_names_a_unit(
    system: str, node: str, roles: str, action: str
) -> None:
    assert problems(aws_scenario(system, node, roles, action)) == ""


@pytest.mark.parametrize(
    ("text", "words"),
    [
        (aws_scenario("rabbitmq", '"leader"'), 'names a node index, not "leader"'),
        (aws_scenario("kafka", "3"), "node 3 does not exist"),
        (aws_scenario("kafka", "0", "broker = 1"), "has one node"),
        (aws_scenario("pulsar", "0", "zookeeper = 3\nbookie = 3\nbroker = 2"), "no systemd unit"),
        (aws_scenario("redis", "0", "master = 3\nreplica = 6"), "no systemd unit"),
        (aws_scenario("kafka", "0").replace("[broker.aws_topology]\nbroker = 3\n", ""), "local"),
        (
            aws_scenario("kafka", "0") + '[search]\nslo_p99 = "50ms"\nlow = 100\nhigh = 1000\n',
            "a capacity search runs without faults",
        ),
    ],
)
def test_aws_faults_are_refused_with_one_line_naming_the_key(text: str, words: str) -> None:
    found = problems(text)
    assert words in found and "faults" in found, found


def test_aws_topology_needs_the_endpoints_of_a_stack() -> None:
    text = aws_scenario("kafka", "0").replace(
        'deployment = "endpoints"\nendpoints = ["10.42.1.10:1"]\n', 'topology = "cluster"\n'
    )
    assert "aws_topology is only used with deployment = 'endpoints'" in problems(text)


# -- the broker user-data ------------------------------------------------------------------

CONTEXT = RunContext(
    system="postgresql",
    title="PostgreSQL",
    run_id=RUN,
    scenario_name="pg-faults",
    bucket=BUCKET,
    region=REGION,
    wheel_key=BUCKET_LAYOUT.wheel_key,
    faults=True,
    secret_parameters={
        "password": f"/brokerbench/{RUN}/password",
        "cluster": f"/brokerbench/{RUN}/cluster",
    },
)
CLUSTER = {"primary": ["10.42.1.10"], "standby": ["10.42.1.11", "10.42.1.12"]}


def unit_of(text: str) -> str:
    return userdata_checks.written_files(text).get(f"/etc/systemd/system/{FAULT_AGENT_UNIT}", "")


def test_broker_nodes_run_the_fault_agent_only_with_faults() -> None:
    recipe = registry.get("postgresql").cloud
    node = BrokerNode("standby", 0, "10.42.1.11")
    text = broker_user_data(CONTEXT, node, recipe, CLUSTER, params=None)
    unit = unit_of(text)
    (start,) = [line for line in unit.splitlines() if line.startswith("ExecStart=")]
    args = fault_agent.arguments().parse_args(shlex.split(start.removeprefix("ExecStart="))[3:])
    assert vars(args) == {
        "bucket": BUCKET, "run_id": RUN, "region": REGION, "node": "standby-0",
        "unit": UNIT, "ports": "5432", "address": "10.42.1.11",
    }  # fmt: skip
    assert f"s3://{BUCKET}/{BUCKET_LAYOUT.wheel_key}" in unit
    assert f"[systemctl, enable, --now, {FAULT_AGENT_UNIT}]" in text
    assert "python3-boto3" in text and "iptables" in text
    assert userdata_checks.cloud_config_problems(text) == []
    schema = userdata_checks.cloud_init_schema(text)
    if schema is not None:  # cloud-init installed (make setup does)
        assert schema == []
    without = broker_user_data(
        RunContext(**{**vars(CONTEXT), "faults": False}), node, recipe, CLUSTER, params=None
    )
    assert unit_of(without) == "" and FAULT_AGENT_UNIT not in without
    with pytest.raises(ValueError, match="results bucket"):
        broker_user_data(
            RunContext(**{**vars(CONTEXT), "bucket": ""}), node, recipe, CLUSTER, params=None
        )


def test_only_the_nodes_a_fault_may_name_run_the_fault_agent() -> None:
    recipe = registry.get("kafka").cloud
    context = RunContext(**{**vars(CONTEXT), "system": "kafka", "title": "Kafka"})
    cluster = {"broker": ["10.42.1.10", "10.42.1.11", "10.42.1.12"]}
    text = broker_user_data(context, BrokerNode("broker", 2, "10.42.1.12"), recipe, cluster, None)
    assert "--node broker-2 --unit kafka.service --ports 9092,9093" in unit_of(text)
    pulsar = registry.get("pulsar").cloud
    assert pulsar is not None and pulsar.faults_for({"broker": 2}) is None
    assert json.loads(broker_s3_policy(BUCKET, BUCKET_LAYOUT))["Statement"][0]["Resource"].endswith(
        BUCKET_LAYOUT.wheel_key
    )
    assert RunFaults is not None  # the coordinator's side is covered above
