"""Delivery accounting on bad days (docs/measurement.md §5): a node whose records are missing makes its
sweep point *incomplete* (no loss claimed), a run stopped early leaves messages *not
drained* (not lost); results that cannot be written are one line naming the file; the
preflight refuses a results directory that cannot hold the run before anything starts;
clocks that differ by more than the latency are counted and said."""

from __future__ import annotations

import contextlib
import errno
import html
import json
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from analysis import transforms as tf
from analysis.records import PointRecords, RunRecords, clock_offsets, local_records, point_records
from analysis.report import write_html
from analysis.summary_table import text_table
from brokers.base import ReceivedBatch
from workload.engine import message
from workload.engine.node_records import write_node
from workload.engine.preflight import (
    RECEIVED_ROW_BYTES,
    SECOND_ROW_BYTES,
    check_memory,
    check_results_dir,
    disk_estimate,
)
from workload.engine.recording import WorkerRecorder
from workload.engine.worker import ReceiverLoop, WorkerSettings
from workload.model.errors import RecordsNotWritten, UserError, write_problem
from workload.model.record import RunContext
from workload.model.results import NodeStatus, PartKey, write_status
from workload.model.sections import LoadSection
from workload.model.sweep import SweepPoint

RUN = "acc"
SECOND_NS = 1_000_000_000


@contextlib.contextmanager
def tmpfs(path: Path, *options: str) -> Iterator[Path]:
    """A tmpfs mounted at ``path`` for the test (``size=…``, ``ro``); skipped where this
    process may not mount (not root)."""
    path.mkdir(parents=True, exist_ok=True)
    mount = ["mount", "-t", "tmpfs", "-o", ",".join(options or ("size=1m",)), "tmpfs", str(path)]
    done = subprocess.run(mount, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], check=False)


def fill(directory: Path) -> Path:
    """Write a file into ``directory`` until its file system is full."""
    filler = directory / "filler"
    with contextlib.suppress(OSError), filler.open("wb") as f:
        while True:
            f.write(b"\0" * 65536)
            f.flush()
    return filler


# -- the words ---------------------------------------------------------------------------


def test_a_node_file_names_its_part() -> None:
    key = PartKey.of_file("/r/raw/received/p3-receiver-1.2.parquet")
    assert key == PartKey(3, "receiver", 1, 2)
    assert key.who == "receiver node 1 process 2" and key.tables == ("seconds", "received")
    assert PartKey.of_file("p0-sender-0.0.json") == PartKey(0, "sender", 0, 0)
    assert PartKey.of_file(".p0-sender-0.0.parquet.tmp") is None
    assert PartKey.of_file("part-00000.parquet") is None


@pytest.mark.parametrize(
    ("code", "words"),
    [
        (errno.ENOSPC, "disk full"),
        (errno.EDQUOT, "disk full"),
        (errno.EACCES, "permission denied"),
        (errno.EROFS, "permission denied (read-only file system)"),
        (errno.EIO, "input/output error"),
    ],
)
def test_a_failed_write_is_said_in_words_a_user_acts_on(code: int, words: str) -> None:
    assert write_problem(OSError(code, os.strerror(code))) == words
    assert str(RecordsNotWritten("/x/f", OSError(code, ""))) == f"{words} writing /x/f"


# -- writing results on a full disk --------------------------------------------------------


def recorders(role: str, node: int, seqs: range, second: int = 100) -> list[WorkerRecorder]:
    """One worker's records: ``seqs`` confirmed by sender worker 0, or received from it."""
    rec = WorkerRecorder(role, node, 0)
    now = second * SECOND_NS
    if role == "sender":
        if seqs:
            rec.batch_sent(now, 1_000_000, None, seqs[0], seqs[-1], 100 * len(seqs))
    else:
        n = len(seqs)
        rec.received_batch(now, [0] * n, [0] * n, list(seqs), [now - 2_000_000] * n, 0, [100] * n)
        rec.acked(now, n, 100 * n)
    return [rec]


def test_results_on_a_full_disk_are_one_error_naming_the_file_and_leave_no_partial_file(
    tmp_path: Path,
) -> None:
    with tmpfs(tmp_path / "fs", "size=256k") as fs:
        run_dir = fs / "run"
        (run_dir / "raw").mkdir(parents=True)
        fill(fs)
        with pytest.raises(RecordsNotWritten) as failed:
            write_node(run_dir, RUN, 0, "receiver", 1, recorders("receiver", 1, range(50_000)))
        assert str(failed.value).startswith("disk full writing ")
        assert str(failed.value).endswith(".parquet") and "p0-receiver-1.0" in str(failed.value)
        assert not [p for p in run_dir.rglob("*") if p.name.endswith(".tmp")]
        status = NodeStatus(0, "receiver", 1, ok=False, error=str(failed.value))
        with pytest.raises(RecordsNotWritten, match=r"^disk full writing .*p0-receiver-1\.0\.json"):
            write_status(run_dir, status)


def test_a_read_only_results_directory_is_named_by_the_preflight(tmp_path: Path) -> None:
    with tmpfs(tmp_path / "ro", "ro", "size=1m") as ro:
        with pytest.raises(UserError) as refused:
            check_results_dir(ro, disk_estimate([]))
        assert str(refused.value).startswith(f"{ro}: cannot write results there")
        assert "permission denied (read-only file system)" in str(refused.value)
        with pytest.raises(UserError, match="cannot create the results directory"):
            check_results_dir(ro / "results", disk_estimate([]))


# -- the preflight ------------------------------------------------------------------------


def sweep_point(**load: object) -> SweepPoint:
    return SweepPoint(0, LoadSection.model_validate({"receiver_nodes": 2, **load}))


def test_the_disk_estimate_is_generous_and_says_how_it_was_made() -> None:
    # Open loop: 100 msgs/s × 2 threads × 10 s; 2 threads × 3 nodes × (10 + 5) s of seconds.
    estimate = disk_estimate([sweep_point(threads=2, rate=100, duration=10, idle_timeout=5)])
    assert (estimate.messages, estimate.worker_seconds) == (2_000, 90)
    assert estimate.bytes == 2_000 * RECEIVED_ROW_BYTES + 90 * SECOND_ROW_BYTES
    assert "2,000 messages" in str(estimate) and "90 worker-seconds" in str(estimate)
    # Closed loop: 20,000 msgs/s per sender worker, at most 50,000 per CPU core; a
    # message limit caps it.
    closed = disk_estimate([sweep_point(threads=4, duration=10)], cpus=1)
    assert closed.messages == 50_000 * 10
    capped = disk_estimate([sweep_point(threads=4, duration=10, messages=100)], cpus=1)
    assert capped.messages == 400


def test_a_results_directory_too_small_for_the_run_is_refused_with_the_estimate(
    tmp_path: Path,
) -> None:
    point = sweep_point(threads=2, rate=100_000, duration=60)
    with tmpfs(tmp_path / "small", "size=1m") as small:
        with pytest.raises(UserError) as refused:
            check_results_dir(small, disk_estimate([point], cpus=8))
        line = str(refused.value)
        assert "\n" not in line and line.startswith(f"{small}: 1.0 MB free")
        assert "12,000,000 messages" in line and "choose another --results directory" in line
        assert list(small.iterdir()) == []  # the test file is gone


def test_payload_pools_that_do_not_fit_in_memory_are_refused() -> None:
    points = [sweep_point(threads=2, processes=2, pool_size=1000, message_size=936)]
    check_memory(points, available=1 << 30)
    check_memory(points, available=None)  # nothing to check against (not Linux)
    with pytest.raises(UserError) as refused:
        check_memory(points, available=1 << 20)
    # 1 sender node × 2 processes × 1000 × (936 + 64) B: receivers keep no pool
    assert "need 1.9 MB" in str(refused.value) and "2 sender processes" in str(refused.value)
    assert "lower pool_size" in str(refused.value)


# -- taking stock of a run's records ------------------------------------------------------


def context(status: str = "complete", points: int = 1, parts: int = 1, **more: object) -> dict:
    load = {"threads": 1, "sender_nodes": 1, "receiver_nodes": 2, "message_size": 100}
    return {
        "run_id": RUN,
        "status": status,
        "errors": [],
        "points": [
            {"point": p, "label": f"p{p}", "load": load, "processes_per_node": parts}
            for p in range(points)
        ],
        **more,
    }


def records(*missing: PartKey, points: int = 1, parts: int = 1, **statuses: str) -> RunRecords:
    """Every part of every point present but ``missing``; statuses as ``role_node_part=error``."""
    present = {
        (table, key)
        for p in range(points)
        for role, nodes in (("sender", 1), ("receiver", 2))
        for node in range(nodes)
        for part in range(parts)
        for key in [PartKey(p, role, node, part)]
        for table in key.tables
        if key not in missing
    }
    found = {}
    for name, error in statuses.items():
        role, node, part = name.split("_")
        key = PartKey(0, role, int(node), int(part))
        found[key] = NodeStatus(0, role, int(node), ok=not error, error=error, part=int(part))
    return RunRecords(found, present)


def test_a_run_with_every_record_is_drained() -> None:
    assert point_records(RunContext.of(context()), records()) == [PointRecords(0, tf.DRAINED)]


def test_a_receiver_without_results_makes_its_point_incomplete_and_says_why() -> None:
    gone = PartKey(0, "receiver", 1, 0)
    why = "disk full writing /r/raw/received/p0-receiver-1.0.parquet"
    (point,) = point_records(RunContext.of(context()), records(gone, receiver_1_0=why))
    assert point.state == tf.INCOMPLETE
    assert point.delivery == f"incomplete: receiver node 1 process 0 wrote no results ({why})"


def test_a_part_that_left_nothing_at_all_is_missed_too() -> None:
    (point,) = point_records(
        RunContext.of(context(parts=2)), records(PartKey(0, "sender", 0, 1), parts=2)
    )
    assert point.delivery == "incomplete: sender node 0 process 1 wrote no results (and no status)"


def test_a_missing_per_second_file_or_an_unreadable_file_is_incomplete() -> None:
    key = PartKey(0, "receiver", 0, 0)
    found = records(receiver_0_0="")  # its status: ended well
    no_seconds = RunRecords(found.statuses, found.present - {("seconds", key)})
    (point,) = point_records(RunContext.of(context()), no_seconds)
    assert point.delivery == "incomplete: receiver node 0 process 0 wrote no per-second records"
    unreadable = RunRecords(
        {}, found.present - {("received", key)}, {("received", key): "bad footer"}
    )
    (point,) = point_records(RunContext.of(context()), unreadable)
    assert (
        point.reason == "receiver node 0 process 0 wrote an unreadable received file (bad footer)"
    )


def test_several_missing_parts_are_counted() -> None:
    gone = [PartKey(0, "receiver", 0, 0), PartKey(0, "receiver", 1, 0)]
    (point,) = point_records(RunContext.of(context()), records(*gone))
    assert point.reason.endswith("; 1 more node process(es) likewise")


def test_an_interrupted_run_leaves_its_last_point_not_drained_and_later_ones_not_run() -> None:
    got = point_records(RunContext.of(context("interrupted", points=3)), records(points=2))
    assert [(p.point, p.state) for p in got] == [
        (0, tf.DRAINED),
        (1, tf.STOPPED),
        (2, tf.NOT_RUN),
    ]
    assert got[1].delivery == (
        "not drained: the run was interrupted before receivers drained the queue"
    )


def test_a_failed_run_says_why_its_last_point_did_not_drain() -> None:
    failed = context("failed", errors=["broker node redis master died during the run"])
    (point,) = point_records(RunContext.of(failed), records())
    assert point.delivery == (
        "not drained: the run failed (broker node redis master died during the run)"
    )


def test_a_receiver_that_stopped_with_an_error_did_not_drain() -> None:
    (point,) = point_records(
        RunContext.of(context()), records(receiver_0_0="gave up after 20 s of failures")
    )
    assert point.delivery == (
        "not drained: receiver node 0 process 0 stopped early (gave up after 20 s of failures)"
    )


def test_missing_records_outweigh_an_early_stop() -> None:
    gone = PartKey(0, "receiver", 1, 0)
    (point,) = point_records(RunContext.of(context("interrupted")), records(gone))
    assert point.state == tf.INCOMPLETE


def test_local_records_leave_out_and_name_an_unreadable_file(tmp_path: Path) -> None:
    write_node(tmp_path, RUN, 0, "sender", 0, recorders("sender", 0, range(10)))
    write_node(tmp_path, RUN, 0, "receiver", 0, recorders("receiver", 0, range(10)))
    write_status(tmp_path, NodeStatus(0, "receiver", 0, ok=True))
    broken = tmp_path / "raw" / "received" / "p0-receiver-1.0.parquet"
    broken.write_bytes(b"PAR1 cut short")
    (tmp_path / "nodes" / "p0-receiver-1.0.json").write_text("{")  # a half-written status
    found = local_records(tmp_path)
    assert ("received", PartKey(0, "receiver", 0, 0)) in found.present
    assert ("received", PartKey(0, "receiver", 1, 0)) in found.unreadable
    assert str(broken) not in (found.paths["received"] or [])
    assert list(found.statuses) == [PartKey(0, "receiver", 0, 0)]
    (point,) = point_records(RunContext.of(context()), found)
    assert point.reason.startswith("receiver node 1 process 0 wrote an unreadable received file")


# -- the table ----------------------------------------------------------------------------


def row(point: int, **values: str) -> dict[str, str]:
    base = {"threads": "1", "sender_nodes": "1", "receiver_nodes": "2", "lost": "0"}
    base["duplicated"] = "0"
    return {"point": str(point), "receivers_kept_up": "True", **base, **values}


def test_the_table_never_prints_a_number_for_lost_without_the_records_to_prove_it() -> None:
    why = "receiver node 1 process 0 wrote no results (disk full writing /r/x.parquet)"
    table = text_table("Redis", [row(0, lost="", delivery=f"incomplete: {why}")])
    header, _, line = table.splitlines()[1:]
    assert "not drained" not in header
    assert "incomplete  " in line and line.endswith(f"← incomplete: {why}")


def test_lost_messages_come_with_what_the_idle_timeout_means_for_them() -> None:
    """Receivers stop after idle_timeout without a message: the table says so beside a
    point's lost count (a broker that stalled delivery longer reads as loss)."""
    lines = text_table("Redis", [row(0), row(1, lost="87818"), row(2, lost="")]).splitlines()
    assert "←" not in lines[3] and "←" not in lines[5]
    assert lines[4].endswith(
        "← 87,818 lost: not received when the receivers stopped, after load.idle_timeout "
        "without a message (a broker that held them but delivered none for longer reads the "
        "same: a longer idle_timeout tells the two apart)"
    )


def test_the_table_shows_what_was_not_drained() -> None:
    stopped = "not drained: the run was interrupted before receivers drained the queue"
    rows = [
        row(0, not_drained="0", delivery="drained"),
        row(1, not_drained="2001", delivery=stopped),
    ]
    lines = text_table("Redis", rows).splitlines()
    titles = lines[1].split()
    assert titles[titles.index("lost") + 1 : titles.index("lost") + 3] == ["not", "drained"]
    assert lines[3].split()[-3:] == ["0", "0", "0"] and "←" not in lines[3]
    assert lines[4].split("←")[0].split()[-3:] == ["0", "2001", "0"]
    assert lines[4].endswith(f"← {stopped}")


# -- the whole job --------------------------------------------------------------------------


def write_run(run_dir: Path, status: str, received: dict[tuple[int, int], range]) -> None:
    """A run of two points (1 sender, 2 receivers each) that confirmed seqs 0..9; receiver
    (point, node) got ``received[point, node]``, and a receiver not listed wrote nothing
    (its status says the disk was full)."""
    run_dir.mkdir(parents=True)
    measurement = {"warmup": 0, "window": 5, "step": 1}
    ctx = context(status, points=2, scenario={"measurement": measurement})
    ctx["broker"] = {"system": "redis", "title": "Redis"}
    (run_dir / "context.json").write_text(json.dumps(ctx))
    for point in range(2):
        write_node(run_dir, RUN, point, "sender", 0, recorders("sender", 0, range(10)), 0)
        for node in range(2):
            seqs = received.get((point, node))
            if seqs is None:
                error = f"disk full writing {run_dir}/raw/received/p{point}-receiver-{node}.0"
                write_status(run_dir, NodeStatus(point, "receiver", node, ok=False, error=error))
            else:
                write_node(run_dir, RUN, point, "receiver", node, recorders("receiver", node, seqs))


@pytest.mark.spark
@pytest.mark.slow
def test_the_job_claims_no_loss_without_records_and_none_for_an_early_stop(
    spark, tmp_path: Path
) -> None:
    from analysis.job import analyse

    # Point 0: receiver 1 wrote nothing; point 1: seq 9 never arrived.
    received = {(0, 0): range(5), (1, 0): range(5), (1, 1): range(5, 9)}
    write_run(tmp_path / "complete", "complete", received)
    incomplete, drained = analyse(spark, tmp_path / "complete")
    assert incomplete["lost"] is None and incomplete["sent"] == 10
    assert incomplete["delivery"].startswith(
        "incomplete: receiver node 1 process 0 wrote no results (disk full writing "
    )
    assert (drained["lost"], drained["not_drained"], drained["delivery"]) == (1, 0, "drained")

    write_run(tmp_path / "interrupted", "interrupted", {**received, (0, 1): range(5, 10)})
    drained, stopped = analyse(spark, tmp_path / "interrupted")
    assert (drained["lost"], drained["not_drained"]) == (0, 0)
    assert (stopped["lost"], stopped["not_drained"]) == (0, 1)
    assert stopped["delivery"].startswith("not drained: the run was interrupted")


# -- clocks ----------------------------------------------------------------------------------

AMAZON = "chrony: 169.254.169.123 (stratum 4)"
AHEAD = "messages received before they were sent by the receiver's clock: clocks differ by more than the latency"
CLIPPED = "latencies beyond 10 min (the histograms' range) read as 10 min"


def test_each_point_gets_the_largest_clock_offset_of_its_nodes() -> None:
    statuses = [
        NodeStatus(0, "sender", 0, True, clock_offset_s=0.000021503, clock_source=AMAZON),
        NodeStatus(0, "receiver", 0, True, clock_offset_s=-0.0004, clock_source=AMAZON),
        NodeStatus(0, "receiver", 1, True, clock_source="unknown: chronyc not found"),
        # Written for a node that left no status: nothing said about its clock.
        NodeStatus(0, "receiver", 2, False, error="exited with code -9 without results"),
        NodeStatus(1, "sender", 0, True, clock_source="unknown: chronyc not found"),
    ]
    assert clock_offsets(statuses) == {
        0: {
            "clock_offset_max_ms": pytest.approx(0.4),
            "clock_source": f"{AMAZON}; unknown: chronyc not found",
        },
        1: {"clock_offset_max_ms": None, "clock_source": "unknown: chronyc not found"},
    }


def test_the_table_notes_messages_received_before_they_were_sent() -> None:
    rows = [row(0, negative_latencies="0"), row(1, negative_latencies="1234"), row(2)]
    lines = text_table("Redis", rows).splitlines()
    assert "←" not in lines[3] and "←" not in lines[5]
    assert lines[4].endswith(f"← 1,234 {AHEAD}")


def test_the_table_names_the_send_call_and_shows_send_delay_where_a_point_ran_open_loop() -> None:
    closed = text_table("Redis", [row(0, send_latency_window_p95_ms="1.5")]).splitlines()[1]
    assert "send call p95 ms" in closed and "send delay" not in closed
    lines = text_table("Redis", [row(0), row(1, send_delay_run_p99_ms="250.0")]).splitlines()
    header = lines[1].split("  ")
    assert header.index("send delay p99 ms [run]") == header.index("send call p95 ms [window]") + 1
    assert lines[3].split()[-3] == "–" and lines[4].split()[-3] == "250.00"


def test_the_report_gives_each_points_largest_clock_offset(tmp_path: Path) -> None:
    rows = [
        row(0, label="threads=1", clock_offset_max_ms="0.400", clock_source=AMAZON),
        row(1, label="threads=2", negative_latencies="3", clock_source="unknown: no chronyc"),
    ]
    ctx = context(scenario={"name": "s", "measurement": {"window": 5}}, broker={"title": "Redis"})
    page = write_html(tmp_path, ctx, rows).read_text()
    assert f"<li>Point 1: 3 {html.escape(AHEAD)}</li>" in page
    clocks = page[page.index("<h2>Run context</h2>") :]
    assert "<td>0.400 ms</td>" in clocks and AMAZON in clocks
    assert "<td>–</td>" in clocks and "unknown: no chronyc" in clocks


@pytest.mark.spark
@pytest.mark.slow
def test_the_job_counts_latencies_out_of_range_and_gives_send_delay_p99_and_max(
    spark, tmp_path: Path
) -> None:
    from analysis.job import analyse
    from analysis.summary_row import read_summary_csv

    ctx = context(scenario={"measurement": {"warmup": 0, "window": 5, "step": 1}})
    ctx["broker"] = {"system": "redis", "title": "Redis"}
    tmp_path.joinpath("context.json").write_text(json.dumps(ctx))
    stamper = message.Stamper("acc.0", 0, 0)
    pool = message.message_pool(3, 100, seed=0)
    settings = WorkerSettings("acc.0", 0, 0, LoadSection(), pool, lambda: False)
    receiver = ReceiverLoop(settings, WorkerRecorder("receiver", 0, 0))
    # Message 0's sender clock is 1 s ahead of the receiver's; 1 and 2 took 2 ms (the clock
    # is read right before they are stamped and received: on a busy machine, building the
    # pool and the loop in between took another 1.9 ms once).
    now = time.time_ns()
    bodies = [
        *stamper.stamp_batch(pool[:1], 0, now + SECOND_NS, now + SECOND_NS),
        *stamper.stamp_batch(pool[1:], 1, now - 2_000_000, now - 2_000_000),
    ]
    receiver.acked(receiver.handle(ReceivedBatch(bodies, list(range(len(bodies))))))
    second = now // SECOND_NS
    (sender,) = recorders("sender", 0, range(3), second)
    # Open-loop send delays: 98 batches 1 ms late, one 50 ms, one 700 s (beyond the range).
    sender.seconds[second].send_delay.record_many([1e3] * 98 + [50e3, 700e6])
    write_node(tmp_path, RUN, 0, "sender", 0, [sender])
    write_node(tmp_path, RUN, 0, "receiver", 0, [receiver.recorder])
    write_node(tmp_path, RUN, 0, "receiver", 1, [])
    for role, node, offset in (("sender", 0, 0.6), ("receiver", 0, -0.4), ("receiver", 1, 0.0)):
        write_status(
            tmp_path, NodeStatus(0, role, node, True, clock_offset_s=offset, clock_source=AMAZON)
        )

    (got,) = analyse(spark, tmp_path)
    assert (got["sent"], got["received"], got["lost"]) == (3, 3, 0)
    assert got["negative_latencies"] == 1 and got["clipped_latencies"] == 1
    assert got["send_delay_run_p99_ms"] == pytest.approx(50.0, rel=0.01)
    assert got["send_delay_run_max_ms"] == 600_000.0  # read as 10 minutes, and noted
    assert got["clock_offset_max_ms"] == pytest.approx(600.0)
    assert got["processing_latency_run_max_ms"] == pytest.approx(2.0, rel=0.5)
    (written,) = read_summary_csv(tmp_path / "analysis" / "summary.csv")
    assert (written["negative_latencies"], written["clock_offset_max_ms"]) == ("1", "600.000")
    assert (written["send_delay_run_max_ms"], written["clipped_latencies"]) == ("600000.000", "1")
    assert text_table("Redis", [written]).endswith(f"← 1 {AHEAD}; 1 {CLIPPED}")
    # The merged histograms, as Parquet and as HdrHistogram percentile distributions.
    hist = pq.read_table(tmp_path / "analysis" / "histograms").to_pylist()
    delays = {r["value_ms"]: r["count"] for r in hist if r["metric"] == "send_delay"}
    assert sum(delays.values()) == 100 and delays[600_000.0] == 1
    hgrm = (tmp_path / "analysis" / "hdr" / "point-0-send_delay.hgrm").read_text().splitlines()
    values = [line.split() for line in hgrm if line.strip() and line.lstrip()[0].isdigit()]
    assert float(values[0][1]) == pytest.approx(0.98) and values[0][2] == "98"
    assert values[-1][1:] == ["1.000000000000", "100"]  # the last line has no 1/(1-p)
    assert "Total count    =          100]" in hgrm[-1]


def test_a_point_stopped_early_with_every_message_received_is_drained() -> None:
    """A broker killed after its point's last message was received fails the run, but the
    point was drained: its label comes from its counts."""
    from analysis.records import delivery_label

    stopped = PointRecords(0, tf.STOPPED, "the run failed (broker node kafka-1 died)")
    assert delivery_label(stopped, 0) == "drained"
    assert delivery_label(stopped, 12).startswith("not drained: the run failed")
    incomplete = PointRecords(1, tf.INCOMPLETE, "receiver node 0 process 0 wrote no results")
    assert delivery_label(incomplete, None).startswith("incomplete")


def test_endpoints_never_show_a_password() -> None:
    from brokers.base import Endpoints

    endpoints = Endpoints(("127.0.0.1:5432",), (("user", "bb1"), ("password", "s3cret!")))
    assert "s3cret" not in repr(endpoints) and "s3cret" not in str(endpoints)
    assert "('user', 'bb1')" in repr(endpoints) and "127.0.0.1:5432" in repr(endpoints)
    assert endpoints.get("password") == "s3cret!"  # the workers still connect with it
