"""The ``power-loss`` fault (docs/faults.md, docs/durability.md): every named node's data
directory is a lazy filesystem for the run; at ``at`` each loses what it did not sync and
its processes die, at ``until`` it comes back with only the synced data and starts again.

The fast tests hold the scenario's model and checks. The slow ones run the shipped
scenarios for real — Redis with ``appendfsync always`` (nothing lost) and its default
``everysec`` (at most about the last second or two of confirmed messages lost), PostgreSQL
with fsync on (nothing lost), a NATS JetStream cluster with its default sync interval
(confirmed messages lost) — and kill a coordinator whose nodes are mounted (no mount is
left). Each run's ``lost_on_power_loss`` is held against the raw records, counted again
here by identity. Where FUSE is not here they skip with :func:`brokers.lazyfs.missing`'s
line.
"""

from __future__ import annotations

import csv
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
import toml

from analysis.summary_row import read_summary_csv
from analysis.summary_table import durability_line
from brokers import lazyfs, registry
from brokers.base import Destination
from brokers.local import ManagedProcess, ProcessCluster
from brokers.power import data_on
from tests.conftest import ROOT, SCENARIOS, brokerbench
from workload.engine.faults import ClusterFaults, FaultClock
from workload.model.errors import ScenarioError
from workload.model.faults import FaultSpec, PointTimeline, read_timelines
from workload.model.layout import LAYOUT
from workload.model.record import RunContext
from workload.model.scenario_file import parse_scenario

# -- the model and its checks (fast) --------------------------------------------------------


def test_a_power_loss_cuts_every_node_unless_it_names_one() -> None:
    assert FaultSpec.model_validate({"at": 4, "action": "power-loss"}).node == "all"
    assert FaultSpec.model_validate({"at": 4, "action": "power-loss", "node": 0}).node == 0
    with pytest.raises(ValueError, match="a power-loss's, not a kill's"):
        FaultSpec.model_validate({"at": 4, "action": "kill", "node": "all"})
    with pytest.raises(ValueError, match="Field required"):
        FaultSpec.model_validate({"at": 4, "action": "kill"})


def scenario(system: str, topology: str = "single", **broker: Any) -> dict[str, Any]:
    return {
        "name": "power",
        "broker": {"system": system, "topology": topology, **broker},
        "load": {"duration": "10s"},
        "faults": [{"at": "4s", "action": "power-loss", "until": "5s"}],
    }


def problems(data: dict[str, Any]) -> str:
    try:
        parse_scenario(data)
    except ScenarioError as exc:
        return str(exc)
    return ""


def test_power_loss_is_checked_against_the_system_the_outage_and_the_deployment() -> None:
    # A single node may lose power (other faults need several nodes).
    assert problems(scenario("redis")) == ""
    assert problems(scenario("postgresql")) == ""
    assert problems(scenario("redis", "cluster")) == ""
    assert problems(scenario("kafka", "cluster")) == ""
    assert problems(scenario("nats", "cluster")) == ""
    assert problems(scenario("rocketmq")) == ""
    assert problems(scenario("artemis")) == ""
    # Measured only on these topologies: the others refuse it.
    assert "power-loss is not available for Apache RocketMQ" in problems(
        scenario("rocketmq", "cluster")
    )
    assert "power-loss is not available for ActiveMQ Artemis" in problems(
        scenario("artemis", "cluster")
    )
    assert "faults are not supported for ActiveMQ Classic" in problems(scenario("activemq"))
    # Their nodes could not start again after a cut (docs/faults.md says why).
    assert "power-loss is not available for RabbitMQ" in problems(scenario("rabbitmq", "cluster"))
    assert "power-loss is not available for Apache Pulsar" in problems(
        scenario("pulsar", "cluster")
    )
    long = scenario("redis")
    long["faults"][0]["until"] = "9s"
    long["load"]["failure_timeout"] = "3s"
    assert "workers fail and give up after load.failure_timeout (3 s)" in problems(long)
    aws = scenario("postgresql", deployment="endpoints", endpoints=["10.0.0.1:5432"])
    del aws["broker"]["topology"]
    aws["broker"]["aws_topology"] = {"primary": 1, "standby": 2}
    assert "power-loss is not available on AWS" in problems(aws)


def test_without_fuse_a_power_loss_run_is_one_line_and_starts_nothing(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from workload.shell.cli import main

    monkeypatch.setattr(registry.get("redis").local, "missing", lambda: None)
    line = "fusermount3 not found: install the Debian package fuse3 (apt-get install fuse3)"
    monkeypatch.setattr(lazyfs, "missing", lambda: line)
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    results = tmp_path / "results"
    code = main(["run", str(SCENARIOS / "redis-power-loss.toml"), "--results", str(results)])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"brokerbench: a power-loss fault needs the lazy filesystem: {line}"]
    assert not list(tmp_path.glob("brokerbench-*")) and not list(results.glob("*/context.json"))


class FakeDisks:
    """Disks that log what is done to them (no FUSE needed)."""

    def __init__(self) -> None:
        self.log: list[tuple[str, ...]] = []

    def mount(self, directory: Path) -> FakeDisk:
        self.log.append(("mount", directory.name))
        return FakeDisk(self.log, directory.name)

    def cut(self, disks: Sequence[Any], then: Callable[[], None]) -> list[dict[str, Any]]:
        self.log.append(("cut", *(disk.name for disk in disks)))
        then()
        return [{"dropped_bytes": 1} for _ in disks]


@dataclass
class FakeDisk:
    log: list[tuple[str, ...]]
    name: str

    def start(self) -> None:
        self.log.append(("start", self.name))

    def unmount(self) -> dict[str, Any]:
        self.log.append(("unmount", self.name))
        return {}


def test_a_cluster_cuts_every_node_at_once_and_starts_them_again(tmp_path: Path) -> None:
    disks = FakeDisks()
    with data_on(disks):
        cluster = ProcessCluster("cluster", tmp_path / "work")
    assert data_on is not None and ProcessCluster("other", tmp_path / "w2").power is None
    for name in ("a", "b"):
        cluster.add(
            ManagedProcess(
                name, ["sleep", "60"], tmp_path / f"{name}.log", data_dir=tmp_path / name
            )
        )
    before = [n.proc.pid for n in cluster.nodes if n.proc is not None]
    spec = FaultSpec.model_validate({"at": 0, "action": "power-loss"})  # back at once
    clock = FaultClock(
        0, [spec], False, ClusterFaults(cluster, Destination("d")), print, ["a", "b"]
    )
    clock.start()
    deadline = time.monotonic() + 10
    while clock.records[0].ended_ns is None and time.monotonic() < deadline:
        time.sleep(0.02)
    (record,) = clock.finish(restore=False).faults
    assert (record.node, record.leader, record.error) == ("all", True, "")
    assert record.power_cut == [
        {"node": "a", "dropped_bytes": 1},
        {"node": "b", "dropped_bytes": 1},
    ]
    assert disks.log == [
        ("mount", "a"),
        ("mount", "b"),
        ("cut", "a", "b"),
        ("start", "a"),
        ("start", "b"),
    ]
    assert cluster.dead_nodes() == [] and all(not Path(f"/proc/{pid}").exists() for pid in before)
    cluster.stop()
    assert disks.log[-2:] == [("unmount", "a"), ("unmount", "b")]


# -- real runs (slow) ---------------------------------------------------------------------


def needs(system: str) -> None:
    """Skip, naming what is missing, where the lazy filesystem or the broker is not here."""
    local = registry.get(system).local
    reason = lazyfs.missing() or (local.missing() if local is not None else "no local broker")
    if reason:
        pytest.skip(reason)


def run(name: str, tmp_path: Path, params: dict[str, Any] | None = None) -> Path:
    """Run the shipped scenario ``name`` (its ``[broker.params]`` updated with ``params``)
    without the analysis; the run's directory."""
    loaded = tomllib.loads((SCENARIOS / f"{name}.toml").read_text())
    loaded["broker"].setdefault("params", {}).update(params or {})
    path = tmp_path / f"{name}.toml"
    path.write_text(toml.dumps(loaded))
    results = tmp_path / "results"
    done = brokerbench("run", str(path), "--results", str(results), "--no-analysis", timeout=240)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "data on the lazy filesystem (writeback never, metadata ordered" in done.stdout
    (run_dir,) = (p.parent for p in results.glob("*/context.json"))
    return run_dir


def figures(spark: Any, run_dir: Path) -> tuple[dict[str, str], PointTimeline, Counter[int]]:
    """The point's summary row, its fault timeline and, by the second it was confirmed in,
    every confirmed message that was never received (from the raw records, by identity)."""
    from analysis.job import analyse

    analyse(spark, run_dir)
    with (run_dir / LAYOUT.summary).open() as f:
        (row,) = list(csv.DictReader(f))
    (timeline,) = read_timelines(run_dir).values()
    received = set()
    for path in (run_dir / LAYOUT.raw_table("received")).glob("*.parquet"):
        columns = pq.read_table(path, columns=["sender_node", "sender_worker", "seq"])
        received |= set(zip(*(columns.column(i).to_pylist() for i in range(3)), strict=True))
    missing: Counter[int] = Counter()
    for path in (run_dir / LAYOUT.raw_table("sent_ranges")).glob("*.parquet"):
        for r in pq.read_table(path).to_pylist():
            for seq in range(r["seq_lo"], r["seq_hi"] + 1):
                if (r["node"], r["worker"], seq) not in received:
                    missing[r["second"]] += 1
    return row, timeline, missing


def cut_of(timeline: PointTimeline) -> tuple[int, dict[str, Any]]:
    """The cut's instant (wall-clock ns) and its one node's lazy filesystem at the cut."""
    (fault,) = timeline.faults
    assert fault.action == "power-loss" and not fault.error, fault
    assert fault.began_ns is not None and fault.ended_ns is not None
    (disk,) = fault.power_cut
    assert disk["state"] == "cut" and disk["metadata"] == "ordered"
    assert disk["written_through_bytes"] == 0  # the loss is exact, not a lower bound
    return fault.began_ns, disk


def report(what: str, row: dict[str, str], missing: Counter[int], disk: dict[str, Any]) -> None:
    print(
        f"{what}: confirmed {row['sent']}, received {row['received']}, lost {row['lost']!r}, "
        f"not drained {row['not_drained']!r}, unavailable {row['unavailable']!r}, "
        f"lost on power loss {row['lost_on_power_loss']!r}, "
        f"never received {sum(missing.values())} (by second confirmed: {dict(missing)}); "
        f"dropped {disk['dropped_bytes']} bytes, {disk['undone_metadata']} metadata changes; "
        f"{row['delivery']}"
    )


def never_received(row: dict[str, str]) -> int:
    """What the summary counts as confirmed and never received: lost on power loss, lost,
    unavailable and not drained — each such message in one of them."""
    keys = ("lost_on_power_loss", "lost", "unavailable", "not_drained")
    return sum(int(row[key] or 0) for key in keys)


def assert_cut_counted(row: dict[str, str], missing: Counter[int], cut_ns: int) -> int:
    """The summary's lost on power loss is, by identity, every confirmed message never
    received whose range was confirmed in the cut's second or before; every other missing
    one is counted once elsewhere. What the cut lost."""
    cut_s = cut_ns // 1_000_000_000
    by_cut = sum(n for second, n in missing.items() if second <= cut_s)
    assert int(row["lost_on_power_loss"]) == by_cut, (row["lost_on_power_loss"], missing)
    assert never_received(row) == sum(missing.values())
    return by_cut


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.redis
def test_redis_loses_nothing_with_appendfsync_always_and_a_second_or_so_with_everysec(
    spark: Any, tmp_path: Path
) -> None:
    needs("redis")
    (tmp_path / "always").mkdir()
    row, timeline, missing = figures(
        spark, run("redis-power-loss", tmp_path / "always", {"appendfsync": "always"})
    )
    cut_ns, disk = cut_of(timeline)
    report("redis appendfsync always", row, missing, disk)
    assert int(row["sent"]) > 0 and assert_cut_counted(row, missing, cut_ns) == 0

    (tmp_path / "everysec").mkdir()
    run_dir = run("redis-power-loss", tmp_path / "everysec")
    row, timeline, missing = figures(spark, run_dir)
    cut_ns, disk = cut_of(timeline)
    report("redis appendfsync everysec", row, missing, disk)
    lost = sum(missing.values())
    assert assert_cut_counted(row, missing, cut_ns) == lost > 0 and disk["dropped_bytes"] > 0
    # At most about two seconds of confirmed sends: 2 workers at 1,000 msgs/s, all
    # confirmed in the two seconds before the cut (or its own second).
    assert lost <= 2 * 2 * 1000
    cut_s = cut_ns // 1_000_000_000
    assert all(cut_s - 2 <= second <= cut_s for second in missing), (cut_s, missing)


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.postgresql
def test_postgresql_with_fsync_on_loses_nothing_on_a_power_cut(spark: Any, tmp_path: Path) -> None:
    needs("postgresql")
    row, timeline, missing = figures(spark, run("postgresql-power-loss", tmp_path))
    cut_ns, disk = cut_of(timeline)
    report("postgresql fsync on", row, missing, disk)
    assert int(row["sent"]) > 0 and assert_cut_counted(row, missing, cut_ns) == 0


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.nats
def test_nats_with_its_default_sync_interval_loses_confirmed_messages(
    spark: Any, tmp_path: Path
) -> None:
    """Three servers, a file stream with 3 replicas: each server fsyncs its stream every
    2 minutes, so a cut of every server 4 s in loses what they acknowledged."""
    needs("nats")
    run_dir = run("nats-power-loss", tmp_path)
    row, timeline, missing = figures(spark, run_dir)
    (fault,) = timeline.faults
    assert fault.began_ns is not None and len(fault.power_cut) == 3, fault
    assert all(d["written_through_bytes"] == 0 for d in fault.power_cut)
    report("nats default sync interval", row, missing, fault.power_cut[0])
    lost = assert_cut_counted(row, missing, fault.began_ns)
    assert int(row["sent"]) > 0 and lost > 0
    # The durability line says what was measured beside what is claimed.
    context = RunContext.of(json.loads((run_dir / "context.json").read_text()))
    line = durability_line(context, read_summary_csv(run_dir / LAYOUT.summary))
    assert line.startswith("claimed: ") and line.endswith(
        f"— measured: {lost:,} of {int(row['sent']):,} confirmed messages lost on a power "
        "cut of every node"
    )


# -- a coordinator killed with its nodes' data mounted (slow) -----------------------------


def lazy_mounts(under: Path) -> list[str]:
    """Lazy filesystems mounted under ``under`` (from /proc/mounts)."""
    found = []
    for line in Path("/proc/mounts").read_text().splitlines():
        fields = line.split()
        if fields[2] == lazyfs.FSTYPE and fields[1].startswith(str(under)):
            found.append(fields[1])
    return found


@pytest.fixture
def run_temp(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """The ``TMPDIR`` of the runs the test starts: their work directories are its own."""
    temp = Path(tempfile.mkdtemp(prefix="bbt-"))
    monkeypatch.setenv("TMPDIR", str(temp))
    yield temp
    shutil.rmtree(temp, ignore_errors=True)


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.redis
def test_a_killed_coordinator_leaves_no_mount(tmp_path: Path, run_temp: Path) -> None:
    """SIGKILL of the coordinator: the watchdog kills the broker and its filesystem, then
    detaches the mount lazily and deletes the work directory."""
    needs("redis")
    loaded = tomllib.loads((SCENARIOS / "redis-power-loss.toml").read_text())
    loaded["load"]["duration"] = "60s"  # killed long before
    path = tmp_path / "power.toml"
    path.write_text(toml.dumps(loaded))
    results = tmp_path / "results"
    proc = subprocess.Popen(
        [sys.executable, "-m", "workload.shell.cli", "run", str(path), "--results", str(results)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert proc.stderr is not None
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # messages are sent: the broker runs, mounted
            line = proc.stderr.readline()
            assert line, "the run ended early"
            match = re.search(r"sent ([\d,]+)", line)
            if match and int(match.group(1).replace(",", "")) > 0:
                break
        mounts = lazy_mounts(run_temp)
        assert len(mounts) == 1, mounts
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=30)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and (lazy_mounts(run_temp) or Path(mounts[0]).exists()):
            time.sleep(0.2)
        assert lazy_mounts(run_temp) == [], "a mount outlived the killed coordinator"
        assert not Path(mounts[0]).exists(), "the broker's data was left behind"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
