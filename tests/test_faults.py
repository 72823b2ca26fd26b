"""Faults in scenarios (issue 12): the scheduler against a stand-in cluster, node processes
killed, paused and restarted, the fault analysis on synthetic records, then whole runs
against a real Kafka cluster and a replicated Redis with nodes killed mid-run."""

from __future__ import annotations

import bisect
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from analysis.console import run_summary
from analysis.faults import (
    FaultEffect,
    FaultFigures,
    Through,
    fault_columns,
    point_effects,
    split_missing,
    timeline_lines,
)
from brokers.base import Destination, FaultSupport, FaultTarget, LocalCluster
from brokers.errors import BrokerError
from brokers.local import ManagedProcess, ProcessCluster
from tests.conftest import SCENARIOS, brokerbench, read_summary
from workload.engine.faults import ClusterFaults, FaultClock
from workload.engine.node_records import write_node
from workload.engine.recording import WorkerRecorder
from workload.model.faults import (
    FaultRecord,
    FaultSpec,
    PointTimeline,
    read_timelines,
    undeclared_death,
    write_timeline,
)
from workload.model.results import read_point

NS = 1_000_000_000
SUPPORT = FaultSupport(nodes=3, leader="the leader", follower="another", fails_over=True)


# -- the scheduler, against a stand-in cluster ----------------------------------------------


class StandIn(LocalCluster):
    """Three nodes by name; records what was done to them and when."""

    def __init__(self, leader: str = "n0") -> None:
        self.topology = "cluster"
        self.leader = leader
        self.calls: list[tuple[str, str, str]] = []
        self.down: set[str] = set()
        self.lock = threading.Lock()
        #: Seconds a node started again takes to be ready.
        self.starting_s = 0.0

    def stop(self) -> None:
        pass

    def dead_nodes(self) -> list[str]:
        with self.lock:
            return sorted(self.down)

    def fault_target(self, selector: str | int, destination: Destination) -> FaultTarget:
        if not self.leader:
            raise BrokerError("nobody leads")
        name = self.leader if selector == "leader" else "n1"
        return FaultTarget(name, name == self.leader)

    def fault(self, name: str, action: str) -> None:
        with self.lock:
            self.calls.append(("fault", name, action))
            self.down.add(name)

    def recover(self, name: str, action: str, wait: float = 0.0) -> None:
        if wait > 0:  # a restarted node that takes a while to be ready
            time.sleep(self.starting_s)
        with self.lock:
            self.calls.append(("recover", name, action))
            self.down.discard(name)


def fault(at: float, action: str, node: str | int, until: float | None = None) -> FaultSpec:
    return FaultSpec(at=at, action=action, node=node, until=until)  # type: ignore[arg-type]


def scheduler(cluster: LocalCluster, *faults: FaultSpec) -> FaultClock:
    actuator = ClusterFaults(cluster, Destination("d"))
    return FaultClock(0, list(faults), SUPPORT.fails_over, actuator, lambda _: None)


def test_faults_wait_for_sending_then_act_and_come_back_in_time() -> None:
    cluster = StandIn()
    faults = scheduler(cluster, fault(0.2, "kill", "leader", 0.5), fault(0.7, "pause", "follower"))
    time.sleep(0.4)
    assert cluster.calls == []  # the clock starts with the first confirmed send
    faults.start()
    time.sleep(0.35)
    assert cluster.calls == [("fault", "n0", "kill")]
    assert faults.declared_down() == {"n0"} == set(cluster.dead_nodes())
    time.sleep(0.55)
    assert cluster.calls[1:] == [("recover", "n0", "kill"), ("fault", "n1", "pause")]
    assert faults.declared_down() == {"n1"}
    timeline = faults.finish(restore=True, complete=True)
    assert cluster.calls[-1] == ("recover", "n1", "pause")
    assert faults.errors == [] and faults.declared_down() == set()
    kill, pause = timeline.faults
    assert (kill.node, kill.leader, pause.node, pause.leader) == ("n0", True, "n1", False)
    assert timeline.sending_ns is not None and kill.began_ns is not None
    assert kill.ended_ns is not None and pause.began_ns is not None
    assert timeline.sending_ns < kill.began_ns < kill.ended_ns < pause.began_ns
    assert 0.15 < (kill.began_ns - timeline.sending_ns) / NS < 0.35
    assert pause.ended_ns is None and pause.restored_ns is not None and pause.down_at_end


def test_a_fault_due_while_a_restarted_node_starts_begins_once_it_is_ready() -> None:
    cluster = StandIn()
    cluster.starting_s = 1.0
    faults = scheduler(
        cluster, fault(0.0, "kill", "follower", 0.1), fault(0.3, "kill", "leader", 0.4)
    )
    faults.start()
    time.sleep(0.6)
    assert cluster.calls == [("fault", "n1", "kill")]  # n1 still starting: n0 untouched
    time.sleep(0.8)
    assert cluster.calls[1:] == [("recover", "n1", "kill"), ("fault", "n0", "kill")]
    timeline = faults.finish(restore=False, complete=True)
    follower, leader = timeline.faults
    assert follower.ended_ns is not None and leader.began_ns is not None
    assert timeline.sending_ns is not None
    assert (leader.began_ns - follower.ended_ns) / NS >= 0.95  # its readiness, not its plan
    assert faults.errors == []


def test_a_fault_that_begins_late_keeps_its_length_and_says_how_late() -> None:
    """A slow restart delays the next fault: it begins late, its end moves by as much (the
    declared outage really happens), and its record and words say how late it began."""
    cluster = StandIn()
    cluster.starting_s = 1.5
    faults = scheduler(
        cluster, fault(0.0, "kill", "follower", 0.1), fault(0.3, "kill", "leader", 0.8)
    )
    faults.start()
    time.sleep(4.0)
    timeline = faults.finish(restore=False, complete=True)
    follower, leader = timeline.faults
    assert leader.late_s >= 1.2 and follower.late_s == 0.0
    assert leader.began_ns is not None and leader.ended_ns is not None
    assert (leader.ended_ns - leader.began_ns) / NS >= 0.45  # 0.5 s declared, not 0
    assert leader.shortfall() == f"began {leader.late_s:.1f} s late"
    assert follower.shortfall() == ""


def test_a_fault_cut_short_by_the_end_of_its_point_says_so() -> None:
    cluster = StandIn()
    faults = scheduler(cluster, fault(0.0, "kill", "follower", 10.0))
    faults.start()
    time.sleep(0.3)
    (record,) = faults.finish(restore=True, complete=True).faults
    assert record.restored_ns is not None and record.ended_ns is None
    assert record.shortfall().startswith("lasted 0.") and "of 10 s declared" in record.shortfall()


def test_the_last_point_leaves_nodes_down_to_the_cluster_stop() -> None:
    cluster = StandIn()
    faults = scheduler(cluster, fault(0.0, "kill", "follower"))
    faults.start()
    time.sleep(0.2)
    timeline = faults.finish(restore=False, complete=True)
    assert cluster.calls == [("fault", "n1", "kill")]
    assert timeline.faults[0].restored_ns is None and timeline.faults[0].down_at_end


def test_a_fault_that_cannot_happen_fails_the_run_and_is_not_declared() -> None:
    cluster = StandIn(leader="")
    faults = scheduler(cluster, fault(0.0, "kill", "leader"), fault(5.0, "stop", 1))
    faults.start()
    time.sleep(0.2)
    timeline = faults.finish(restore=True, complete=True)
    first, second = timeline.faults
    assert first.error == "not performed: nobody leads" and first.began_ns is None
    assert second.error == "not performed: the point ended first"
    assert faults.errors == [
        "fault 0 (kill leader at 0 s) was not performed: nobody leads",
        "fault 1 (stop node 1 at 5 s) was not performed: the point ended first",
    ]
    assert faults.declared_down() == set()


def test_an_interrupted_point_does_not_blame_faults_it_never_reached() -> None:
    faults = scheduler(StandIn(), fault(5.0, "kill", "leader"))
    timeline = faults.finish(restore=True, complete=False)
    assert faults.errors == [] and timeline.faults[0].error == ""


def test_timelines_round_trip(tmp_path: Path) -> None:
    record = FaultRecord(index=0, action="kill", selector="leader", at_s=1.0, began_ns=5)
    write_timeline(tmp_path, PointTimeline(point=3, sending_ns=1, faults=[record]))
    assert read_timelines(tmp_path) == {3: PointTimeline(point=3, sending_ns=1, faults=[record])}
    assert read_timelines(tmp_path / "elsewhere") == {}


# -- node processes -------------------------------------------------------------------------


def sleeper(tmp_path: Path, name: str = "sleeper") -> ManagedProcess:
    cmd = [sys.executable, "-c", "import time; time.sleep(600)"]
    return ManagedProcess(name, cmd, tmp_path / f"{name}.log", ready=lambda: True)


def stopped(pid: int) -> bool:
    """Whether the process is stopped (SIGSTOP), once the signal had time to arrive."""
    time.sleep(0.3)
    return Path(f"/proc/{pid}/stat").read_text().split()[2] == "T"


def test_processes_are_killed_paused_and_restarted_with_their_command(tmp_path: Path) -> None:
    cluster = ProcessCluster("cluster", tmp_path / "work")
    node = cluster.add(sleeper(tmp_path))
    try:
        first = node.proc.pid if node.proc else 0
        cluster.fault(node.name, "pause")
        assert stopped(first)
        cluster.recover(node.name, "pause")
        assert not stopped(first)
        with pytest.raises(BrokerError, match="still running"):
            node.restart()
        cluster.fault(node.name, "kill")
        assert cluster.dead_nodes() == [node.name]
        cluster.recover(node.name, "kill", wait=5)
        assert cluster.dead_nodes() == [] and node.proc is not None and node.proc.pid != first
        cluster.fault(node.name, "stop")
        assert cluster.dead_nodes() == [node.name]
        cluster.recover(node.name, "stop")
        assert node.alive()
        with pytest.raises(BrokerError, match="cannot be isolated"):
            cluster.fault(node.name, "isolate")
    finally:
        cluster.stop()
    assert not node.alive()


def test_a_paused_node_still_stops(tmp_path: Path) -> None:
    node = sleeper(tmp_path).start()
    node.pause()
    started = time.monotonic()
    node.stop(timeout=10)
    assert not node.alive() and time.monotonic() - started < 5


def test_clusters_without_faults_say_so(tmp_path: Path) -> None:
    cluster = ProcessCluster("cluster", tmp_path)
    with pytest.raises(BrokerError, match="faults are not supported"):
        cluster.fault_target("leader", Destination("d"))


# -- analysis on synthetic records ----------------------------------------------------------


@dataclass(frozen=True)
class PointFaults:
    """A sweep point's faults, and its confirmed messages that were not received, counted
    here with pyarrow (the analysis counts them with Spark)."""

    point: int
    through: Through
    confirmed: int
    #: Confirmed and never received: ``lost`` + ``unavailable``.
    missing: int
    lost: int
    unavailable: int

    @property
    def faults(self) -> list[FaultEffect]:
        return self.through.faults

    @property
    def figures(self) -> FaultFigures:
        return FaultFigures.of(self.through, self.lost, self.unavailable)


def analyse_faults(run_dir: Path) -> dict[int, PointFaults]:
    """Every point of a run that declared faults, by point index (empty without faults)."""
    results = {}
    for point, timeline in read_timelines(run_dir).items():
        confirmed, missing = count_missing(
            read_point(run_dir, "sent_ranges", point, ["node", "worker", "seq_lo", "seq_hi"]),
            read_point(run_dir, "received", point, ["sender_node", "sender_worker", "seq"]),
        )
        lost, unavailable = split_missing(missing, timeline)
        through = point_effects(run_dir, timeline)
        results[point] = PointFaults(point, through, confirmed, missing, lost, unavailable)
    return results


def count_missing(sent_ranges: pa.Table, received: pa.Table) -> tuple[int, int]:
    """``(confirmed, confirmed and never received)`` from the raw delivery tables."""
    if sent_ranges.num_rows == 0:
        return 0, 0
    seen: dict[tuple[int, int], list[int]] = {}
    if received.num_rows:
        unique = received.group_by(["sender_node", "sender_worker", "seq"]).aggregate([])
        for node, worker, seq in zip(
            *(unique[c].to_pylist() for c in ("sender_node", "sender_worker", "seq")),
            strict=True,
        ):
            seen.setdefault((node, worker), []).append(seq)
    for seqs in seen.values():
        seqs.sort()
    confirmed = pc.sum(pc.add(pc.subtract(sent_ranges["seq_hi"], sent_ranges["seq_lo"]), 1))
    total = int(confirmed.as_py() or 0)
    got = 0
    for node, worker, lo, hi in zip(
        *(sent_ranges[c].to_pylist() for c in ("node", "worker", "seq_lo", "seq_hi")),
        strict=True,
    ):
        seqs = seen.get((node, worker), [])
        got += bisect.bisect_right(seqs, hi) - bisect.bisect_left(seqs, lo)
    return total, total - got


T0 = 1_800_000_000  # the first second with a confirmed send


def synthetic_run(
    tmp_path: Path,
    timeline: PointTimeline,
    received_upto: int,
    again: dict[int, list[int]] | None = None,
) -> Path:
    """One sender worker confirming 10 messages a second for 10 s, nothing in seconds
    4–6 (errors instead, for the receiver too); one receiver getting each batch a second
    later, except seq ≥ ``received_upto``; and at each second of ``again`` those sequence
    numbers once more, flagged redelivered."""
    sender = WorkerRecorder("sender", 0, 0)
    receiver = WorkerRecorder("receiver", 0, 0)
    for s, seqs in (again or {}).items():
        now = (T0 + s) * NS + NS // 2
        receiver.received_batch(
            now,
            [0] * len(seqs),
            [0] * len(seqs),
            seqs,
            [now] * len(seqs),
            len(seqs),
            [100] * len(seqs),
        )
    seq = 0
    for s in range(10):
        now = (T0 + s) * NS
        if 4 <= s <= 6:
            sender.failed(now, RuntimeError("broker gone"))
            receiver.failed(now, RuntimeError("broker gone"))
            continue
        sender.batch_sent(now, now - 1000, now - 1000, seq, seq + 9, 1000)
        got = [q for q in range(seq, seq + 10) if q < received_upto]
        if got:
            receiver.received_batch(
                now + NS, [0] * len(got), [0] * len(got), got, [now] * len(got), 0, [100] * len(got)
            )
        seq += 10
    run = tmp_path / "run"
    write_node(run, "r", 0, "sender", 0, [sender])
    write_node(run, "r", 0, "receiver", 0, [receiver])
    write_timeline(run, timeline)
    return run


def kill(leader: bool, fails_over: bool, ended: bool) -> PointTimeline:
    record = FaultRecord(
        index=0,
        action="kill",
        selector="leader" if leader else "follower",
        at_s=4.0,
        until_s=7.0 if ended else None,
        node="n0",
        leader=leader,
        fails_over=fails_over,
        began_ns=(T0 + 4) * NS + NS // 4,
        ended_ns=(T0 + 7) * NS if ended else None,
    )
    return PointTimeline(point=0, sending_ns=T0 * NS, faults=[record])


def test_gaps_errors_and_loss_through_a_fault(tmp_path: Path) -> None:
    run = synthetic_run(tmp_path, kill(leader=True, fails_over=True, ended=True), 65)
    (result,) = analyse_faults(run).values()
    (effect,) = result.faults
    # Sends confirmed at 3.0 s, then at 7.0 s: 3.9 s of tenths without one, from 3.1 s.
    assert (effect.send_gap.seconds, effect.send_gap.start_s, effect.send_gap.resumed) == (
        3.9,
        3.1,
        True,
    )
    # Receives come a second later: none from 4.1 s to 8.0 s.
    assert (effect.receive_gap.seconds, effect.receive_gap.start_s) == (3.9, 4.1)
    assert effect.errors == 6  # three seconds, both roles
    assert effect.began_s == pytest.approx(4.25) and effect.ended_s == pytest.approx(7.0)
    assert (result.confirmed, result.missing, result.lost, result.unavailable) == (70, 5, 5, 0)
    columns = result.figures
    assert columns["send_gap_s"] == 3.9 and columns["fault_errors"] == 6
    assert columns["faults"] == "kill leader at 4 s until 7 s (n0)"
    (line,) = timeline_lines(result.faults)
    assert (
        "kill n0 (leader) at 4.2 s, back at 7.0 s" in line and "no confirmed send for 3.9 s" in line
    )


#: Messages received again: 0 and 1 (first received at second 1) at second 2, before the
#: fault; 30–32 (first at 4) and 40 (first at 8, the same second) at second 8, after the
#: node came back at 7.
AGAIN = {2: [0, 1], 8: [30, 31, 32, 40]}


def test_duplicates_and_redeliveries_after_a_fault_count_through_it(tmp_path: Path) -> None:
    run = synthetic_run(tmp_path, kill(leader=True, fails_over=True, ended=True), 70, AGAIN)
    (result,) = analyse_faults(run).values()
    (effect,) = result.faults
    assert (effect.errors, effect.duplicated, effect.redelivered) == (6, 4, 4)
    through = result.through
    assert (through.errors, through.duplicated, through.redelivered) == (6, 4, 4)
    assert (through.duplicated_total, through.redelivered_total) == (6, 6)
    assert result.missing == 0  # copies are no receipts of the missing
    columns = result.figures
    assert (columns["fault_duplicated"], columns["fault_redelivered"]) == (4, 4)
    assert "6 errors, 4 duplicated, 4 redelivered" in timeline_lines(result.faults)[0]


def test_each_fault_counts_until_the_next_one_begins(tmp_path: Path) -> None:
    timeline = kill(leader=True, fails_over=True, ended=True)
    second = timeline.faults[0].model_copy(
        update={"index": 1, "selector": "follower", "at_s": 8.0, "until_s": None, "node": "n1"}
        | {"leader": False, "began_ns": (T0 + 8) * NS + NS // 2, "ended_ns": None}
    )
    timeline = timeline.model_copy(update={"faults": [second, timeline.faults[0]]})
    run = synthetic_run(tmp_path, timeline, 70, AGAIN)
    (result,) = analyse_faults(run).values()
    by_index = {e.record.index: e for e in result.faults}
    # The first fault's errors (4–6) are its own; the copies at 8 are the second's.
    assert (by_index[0].errors, by_index[0].duplicated, by_index[0].redelivered) == (6, 0, 0)
    assert (by_index[1].errors, by_index[1].duplicated, by_index[1].redelivered) == (0, 4, 4)
    assert (result.through.errors, result.through.duplicated) == (6, 4)
    columns = result.figures
    assert (columns["fault_errors"], columns["fault_duplicated"]) == (6, 4)


def test_missing_messages_of_a_leader_that_never_came_back_are_unavailable(
    tmp_path: Path,
) -> None:
    run = synthetic_run(tmp_path, kill(leader=True, fails_over=False, ended=False), 65)
    (result,) = analyse_faults(run).values()
    assert (result.missing, result.lost, result.unavailable) == (5, 0, 5)
    assert result.figures["unavailable"] == 5


@pytest.mark.parametrize(
    ("leader", "fails_over", "ended"),
    [(False, False, False), (True, True, False), (True, False, True)],
)
def test_otherwise_missing_messages_are_lost(leader: bool, fails_over: bool, ended: bool) -> None:
    assert split_missing(7, kill(leader, fails_over, ended)) == (7, 0)
    assert split_missing(7, None) == (7, 0)


@pytest.mark.parametrize(("fails_over", "lost", "unavailable"), [(False, 0, 5), (True, 5, 0)])
def test_an_undeclared_death_is_analysed_like_a_fault_and_marked(
    tmp_path: Path, fails_over: bool, lost: int, unavailable: int
) -> None:
    died = undeclared_death(0, "n0", (T0 + 4) * NS + NS // 4, T0 * NS, fails_over)
    assert (died.at_s, died.action, died.down_at_end) == (4.2, "died", True)
    run = synthetic_run(tmp_path, PointTimeline(point=0, sending_ns=T0 * NS, faults=[died]), 65)
    (result,) = analyse_faults(run).values()
    (effect,) = result.faults
    assert (effect.send_gap.seconds, effect.errors) == (3.9, 6)
    # Whether the dead node led is not known: where nothing fails over, what it held is
    # unavailable rather than lost.
    assert (result.missing, result.lost, result.unavailable) == (5, lost, unavailable)
    assert result.figures["faults"] == "n0 died at 4.2 s (undeclared) (n0)"
    (line,) = timeline_lines(result.faults)
    assert line.startswith("fault 0: n0 died (undeclared) at 4.2 s, not back;")


def test_the_summary_and_the_terminal_say_what_the_faults_did(tmp_path: Path) -> None:
    run = synthetic_run(tmp_path, kill(leader=True, fails_over=True, ended=True), 65, AGAIN)
    # Spark's accounting gave the point's lost (here: missing) and totals.
    (columns,) = fault_columns(run, {0: 5}).values()
    assert columns == {
        "faults": "kill leader at 4 s until 7 s (n0)",
        "fault_shortfall": "",
        "send_gap_s": 3.9,
        "receive_gap_s": 3.9,
        "fault_errors": 6,
        "fault_duplicated": 4,
        "fault_redelivered": 4,
        "lost": 5,
        "unavailable": 0,
    }
    row = {"point": 0, "label": "threads=1", "duplicated": 6, "redelivered": 6, **columns}
    text = run_summary({"broker": {"title": "Kafka"}}, [row])
    assert text.splitlines()[-5:] == [
        "Faults",
        "  point 0 (threads=1): faults: kill leader at 4 s until 7 s (n0)",
        "    failover gap: no confirmed send for 3.9 s, no receive for 3.9 s",
        "    through the faults: 6 errors, 4 duplicated, 4 redelivered",
        "    whole point: lost 5, unavailable 0, duplicated 6, redelivered 6",
    ]
    late = {**row, "fault_shortfall": "fault 0 began 21.0 s late; lasted 0.2 s of 12 s declared"}
    lines = run_summary({"broker": {"title": "Kafka"}}, [late]).splitlines()
    assert (
        "    not as declared: fault 0 began 21.0 s late; lasted 0.2 s of 12 s declared "
        "(the figures are not those of the declared faults)"
    ) in lines
    assert "Faults" not in run_summary({}, [{"point": 0, "faults": ""}])


# -- whole runs against real brokers --------------------------------------------------------


def run_failover(tmp_path: Path, scenario: str, analysis: bool = False) -> tuple[str, PointFaults]:
    """Run a shipped failover scenario (with the Spark analysis, or recording only) and
    analyse its faults."""
    done = brokerbench(
        "run",
        str(SCENARIOS / scenario),
        "--results",
        str(tmp_path),
        *([] if analysis else ["--no-analysis"]),
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    (run,) = tmp_path.iterdir()
    (result,) = analyse_faults(run).values()
    print("\n".join(timeline_lines(result.faults)), result.figures, result)
    return done.stdout, result


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.kafka
def test_kafka_keeps_every_confirmed_message_through_a_follower_and_a_leader_kill(
    tmp_path: Path,
) -> None:
    stdout, result = run_failover(tmp_path, "kafka-failover.toml", analysis=True)
    follower, leader = result.faults
    assert "fault 0: kill kafka node" in stdout and "(leader)" in stdout
    assert not follower.record.leader and leader.record.leader
    assert follower.record.ended_ns and leader.record.ended_ns  # both came back
    assert result.confirmed > 0 and result.missing == result.lost == result.unavailable == 0
    (row,) = read_summary(tmp_path)
    if leader.record.late_s >= leader.record.until_s - leader.record.at_s:
        # A machine so slow that the follower's restart took the leader kill's whole window:
        # the kill came after the senders' end, and the run says so rather than hide it.
        assert f"began {leader.record.late_s:.1f} s late" in row["fault_shortfall"]
        assert "not as declared: fault 1 began" in stdout
        return
    # The leader's partition had no leader for a while, then sends went on.
    assert leader.send_gap.seconds > 0 and leader.send_gap.resumed
    # The summary and the printed table carry the same figures.
    assert row["lost"] == "0" and row["unavailable"] == "0" and row["faults"]
    assert float(row["send_gap_s"]) == max(f.send_gap.seconds for f in result.faults) > 0
    assert f"no confirmed send for {float(row['send_gap_s']):.1f} s" in stdout


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.redis
def test_redis_counts_what_a_master_kill_loses(tmp_path: Path) -> None:
    _, result = run_failover(tmp_path, "redis-failover.toml")
    replica, master = result.faults
    assert "redis replica" in replica.record.node and master.record.node == "redis master"
    assert master.record.leader and not master.record.fails_over
    assert master.send_gap.seconds > 0 and master.send_gap.resumed and master.errors > 0
    # Asynchronous replication and AOF fsync every second: what the master confirmed
    # but had not written when it was killed is gone, and counted, never hidden.
    assert result.confirmed > 0 and result.unavailable == 0
    assert result.lost == result.missing >= 0


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.rabbitmq
def test_rabbitmq_quorum_queue_keeps_every_confirmed_message_through_a_leader_kill(
    tmp_path: Path,
) -> None:
    stdout, result = run_failover(tmp_path, "rabbitmq-failover.toml")
    follower, leader = result.faults
    assert "(leader)" in stdout and leader.record.leader and not follower.record.leader
    assert follower.record.node != leader.record.node
    assert follower.record.ended_ns and leader.record.ended_ns  # both came back
    assert result.confirmed > 0 and result.missing == result.lost == result.unavailable == 0
