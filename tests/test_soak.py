"""Soak runs keep their data (docs/measurement.md §5): node processes flush their records in
chunks while they run, the analysis reads a part's chunks and final file as one, a part
that left only chunks (a process killed) ends the point's data where its chunks end — no
message is then called lost — and the sampler measures the broker's data directory."""

from __future__ import annotations

import json
import time
import tomllib
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from analysis import transforms as tf
from analysis.records import local_records, point_records
from brokers.base import Endpoints
from workload.engine.node import Flusher, NodeSpec, _keep_results
from workload.engine.node_records import write_node
from workload.engine.recording import WorkerRecorder
from workload.engine.telemetry import directory_bytes
from workload.model.errors import UserError
from workload.model.layout import LAYOUT
from workload.model.record import RunContext
from workload.model.results import (
    PartKey,
    read_point,
    read_telemetry_chunks,
    write_telemetry,
)
from workload.model.sections import LoadSection, MeasurementSection

RUN = "soak"
S = 1_000_000_000


def spec(run_dir: Path, role: str, node: int = 0, flush_interval: float = 60.0) -> NodeSpec:
    return NodeSpec(
        run_dir=run_dir,
        run_id=RUN,
        tag="t",
        point=0,
        role=role,
        node=node,
        system="redis",
        endpoints=Endpoints(("127.0.0.1:1",)),
        params={},
        destination="d",
        load=LoadSection(),
        flush_interval=flush_interval,
    )


def send(rec: WorkerRecorder, second: int, lo: int, hi: int) -> None:
    rec.batch_sent(second * S + 1, 1_000_000, None, lo, hi, 100 * (hi - lo + 1))


def receive(rec: WorkerRecorder, second: int, seqs: range) -> None:
    n = len(seqs)
    now = second * S + 2
    rec.received_batch(now, [0] * n, [0] * n, list(seqs), [now - 3_000_000] * n, 0, [100] * n)
    rec.acked(now, n, 100 * n)


# -- the recorder ---------------------------------------------------------------------------


def test_take_moves_the_seconds_before_the_cut_and_every_identity_out_of_the_recorder() -> None:
    rec = WorkerRecorder("receiver", 0, 3)
    receive(rec, 100, range(0, 5))
    receive(rec, 101, range(5, 8))
    taken = rec.take(101)
    assert (taken.worker, sorted(taken.seconds)) == (3, [100])
    assert list(taken.rx_seq) == list(range(8)) and list(taken.rx_second) == [100] * 5 + [101] * 3
    assert sorted(rec.seconds) == [101] and not rec.rx_seq and not rec.rx_node
    receive(rec, 101, range(8, 9))  # the second kept goes on counting
    rest = rec.take()
    assert rest.seconds[101].received == 4 and list(rest.rx_seq) == [8]
    assert rec.seconds == {} and rec.total_received == 9


def test_a_second_recorded_into_after_it_was_taken_comes_out_again_and_is_marked_active() -> None:
    rec = WorkerRecorder("sender", 0, 0)
    send(rec, 100, 0, 4)
    first = rec.take(101)
    send(rec, 100, 5, 9)  # a time stamp from before the cut, recorded late
    second = rec.take(101)
    assert first.seconds[100].sent == second.seconds[100].sent == 5
    assert first.seconds[100].active == second.seconds[100].active == 1
    assert first.sent_ranges == [[0, 4]] and second.sent_ranges == [[5, 9]]


# -- flushing ---------------------------------------------------------------------------------


def test_a_flushing_part_writes_chunks_while_its_worker_records(tmp_path: Path) -> None:
    """A flush every second: chunks appear on disk while the worker still records, and
    chunks plus the final file hold every record exactly once."""
    rec = WorkerRecorder("sender", 0, 0)
    part = spec(tmp_path, "sender", flush_interval=1.0)
    flusher = Flusher(part, [rec]).start()
    now = time.time_ns() // S
    seq = 0
    chunks: list[Path] = []
    try:
        for _ in range(400):  # a worker sending for up to 20 s, until two chunks are out
            send(rec, now - 30, seq, seq + 9)
            seq += 10
            chunks = sorted((tmp_path / "raw" / "sent_ranges").glob("p0-sender-0.0.c*.parquet"))
            if len(chunks) >= 2:
                break
            time.sleep(0.05)
    finally:
        left = flusher.stop()
    assert len(chunks) >= 2, "no chunk was flushed within 20 s"
    assert LAYOUT.chunk_of(chunks[0].name) is not None and left == []
    assert sorted((tmp_path / "raw" / "seconds").glob("p0-sender-0.0.c*.parquet"))
    send(rec, now - 30, seq, seq + 9)
    seq += 10
    status = _keep_results(part, [rec], [], left)
    assert status.ok and status.sent == seq
    ranges = read_point(tmp_path, "sent_ranges", 0)
    covered = sorted(
        n
        for lo, hi in zip(ranges["seq_lo"].to_pylist(), ranges["seq_hi"].to_pylist(), strict=False)
        for n in range(lo, hi + 1)
    )
    assert covered == list(range(seq))  # none lost, none twice
    assert sum(read_point(tmp_path, "seconds", 0)["sent"].to_pylist()) == seq
    assert (tmp_path / LAYOUT.raw_file("sent_ranges", 0, "sender", 0)).exists()


def test_a_chunk_that_cannot_be_written_goes_into_the_final_file(tmp_path: Path) -> None:
    rec = WorkerRecorder("receiver", 0, 0)
    receive(rec, 100, range(10))
    (tmp_path / "raw").write_text("not a folder")  # nothing can be written under it
    part = spec(tmp_path / "raw" / "run", "receiver")
    flusher = Flusher(part, [rec])
    flusher.flush(200)
    assert flusher.chunks == 0 and len(flusher.pending) == 1 and not rec.rx_seq
    receive(rec, 201, range(10, 12))
    flusher.flush(202)  # still not writable: the next chunk would hold both
    assert flusher.chunks == 0 and len(flusher.pending) == 2
    good = spec(tmp_path / "run", "receiver")
    status = _keep_results(good, [rec], [], flusher.pending)
    received = read_point(good.run_dir, "received", 0)["seq"].to_pylist()
    assert status.ok and received == list(range(12))


def test_a_chunk_that_could_not_be_written_goes_into_the_next(tmp_path: Path) -> None:
    rec = WorkerRecorder("receiver", 0, 0)
    receive(rec, 100, range(10))
    flusher = Flusher(spec(tmp_path, "receiver"), [rec])
    flusher.pending = [rec.take(101)]  # as a failed flush leaves it
    receive(rec, 101, range(10, 15))
    flusher.flush(102)
    assert flusher.pending == [] and flusher.chunks == 1
    (chunk,) = (tmp_path / "raw" / "received").iterdir()
    assert chunk.name == "p0-receiver-0.0.c102.parquet"
    assert pq.read_table(chunk)["seq"].to_pylist() == list(range(15))


def test_flush_interval_is_whole_seconds_up_to_an_hour() -> None:
    assert MeasurementSection().flush_interval == 60.0
    assert MeasurementSection.model_validate({"flush_interval": "5s"}).flush_interval == 5.0
    for bad in (0.5, 0, 3601, "2h"):
        with pytest.raises(ValueError, match="flush_interval"):
            MeasurementSection.model_validate({"flush_interval": bad})


def test_a_scenario_names_a_bad_flush_interval_with_its_line(tmp_path: Path) -> None:
    from workload.model.scenario_file import load_scenario

    path = tmp_path / "s.toml"
    path.write_text(
        'name = "x"\n[broker]\nsystem = "redis"\n[measurement]\nflush_interval = "1.5s"\n'
    )
    with pytest.raises(UserError) as failed:
        load_scenario(path)
    assert "measurement.flush_interval" in str(failed.value) and "line 5" in str(failed.value)


# -- reading what a killed run left ------------------------------------------------------------


def context(status: str = "running") -> dict[str, object]:
    load = {"threads": 1, "sender_nodes": 1, "receiver_nodes": 1, "duration": 60}
    return {
        "run_id": RUN,
        "status": status,
        "errors": [],
        "points": [{"point": 0, "label": "p0", "load": load, "processes_per_node": 1}],
        "broker": {"system": "redis", "title": "Redis"},
        "scenario": {"measurement": {"warmup": 0, "window": 5, "step": 1}},
    }


def killed_run(run_dir: Path) -> None:
    """Seconds 100–139 sent (10 a second), each received a second later; both parts
    flushed at cuts 110, 120, 130 and were then killed: the receiver's last chunk, of cut
    130, was never written, so data ends at 120."""
    sender, receiver = WorkerRecorder("sender", 0, 0), WorkerRecorder("receiver", 0, 0)
    for second in range(100, 140):
        send(sender, second, 10 * (second - 100), 10 * (second - 100) + 9)
        receive(receiver, second + 1, range(10 * (second - 100), 10 * (second - 99)))
        for cut in (110, 120, 130):
            if second == cut + 2:  # flushes lag their cut
                write_node(run_dir, RUN, 0, "sender", 0, [sender.take(cut)], 0, cut)
                if cut < 130:
                    write_node(run_dir, RUN, 0, "receiver", 0, [receiver.take(cut)], 0, cut)
    (run_dir / "context.json").write_text(json.dumps(context()))


def test_a_part_that_left_only_chunks_ends_its_points_data(tmp_path: Path) -> None:
    killed_run(tmp_path)
    found = local_records(tmp_path)
    assert found.ends == {PartKey(0, "sender", 0, 0): 130, PartKey(0, "receiver", 0, 0): 120}
    assert ("received", PartKey(0, "receiver", 0, 0)) in found.present
    ctx = RunContext.of(context("interrupted"))
    (point,) = point_records(ctx, found, {0: 100})
    assert (point.state, point.data_end) == (tf.INCOMPLETE, 120)
    assert point.delivery.startswith(
        "incomplete: data ends at 20 s of 60 s; the run was interrupted"
    )
    assert "not counted lost" in point.delivery


def test_a_final_file_beside_chunks_is_a_whole_part(tmp_path: Path) -> None:
    rec = WorkerRecorder("sender", 0, 0)
    send(rec, 100, 0, 9)
    write_node(tmp_path, RUN, 0, "sender", 0, [rec.take(101)], 0, 101)
    write_node(tmp_path, RUN, 0, "sender", 0, [rec.take()], 0)
    assert local_records(tmp_path).ends == {}


def test_telemetry_chunks_are_read_back_for_the_point(tmp_path: Path) -> None:
    row = {
        "run_id": RUN,
        "point": 0,
        "role": "broker",
        "node": "n1",
        "second": 5,
        "data_bytes": 4096,
    }
    write_telemetry(tmp_path, [row], cut=6)
    write_telemetry(tmp_path, [{**row, "second": 7}])
    assert [r["second"] for r in read_telemetry_chunks(tmp_path, 0)] == [5]
    files = sorted(p.name for p in (tmp_path / "raw" / "telemetry").iterdir())
    assert files == ["p0-n1.c6.parquet", "p0-n1.parquet"]
    assert pq.read_table(tmp_path / "raw" / "telemetry" / files[0])["data_bytes"].to_pylist() == [
        4096
    ]


def test_the_data_directory_is_measured_as_du_counts_it(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "segment").write_bytes(b"x" * 100_000)
    (tmp_path / "index").write_bytes(b"y" * 10)
    (tmp_path / "link").hardlink_to(tmp_path / "index")  # one file, counted once
    measured = directory_bytes(tmp_path)
    assert measured is not None and 100_000 <= measured <= 100_000 + 3 * 65536
    assert directory_bytes(tmp_path / "missing") is None


@pytest.mark.spark
@pytest.mark.slow
def test_the_job_reads_chunks_and_ends_a_killed_runs_data_where_they_do(
    spark, tmp_path: Path
) -> None:
    from analysis.job import analyse

    killed_run(tmp_path / "killed")
    (row,) = analyse(spark, tmp_path / "killed")
    # Read up to second 120, where the receiver's chunks end: sent in seconds 100–119
    # (seqs 0–199; the sender's chunks reach 130), received in seconds 101–119 (0–189).
    assert row["sent"] == 200 and row["received"] == 190
    assert row["lost"] is None and row["not_drained"] is None and row["duplicated"] == 0
    assert row["delivery"].startswith("incomplete: data ends at 20 s of 60 s")
    # Rates over the seconds before the end only: 10 a second sent and received.
    assert row["send_msgs_per_s"] == pytest.approx(10.0)
    assert row["receive_msgs_per_s"] == pytest.approx(10.0)


# -- a real run killed midway ------------------------------------------------------------------


def flushed(results: Path) -> tuple[int, int]:
    """Where a running point's chunks end (the earliest of its parts' latest cuts, each
    part's tables counted) and how many received messages they hold before it."""
    ends: dict[tuple[str, PartKey], int] = {}
    for file in results.glob("*/raw/*/p0-*.c*.parquet"):
        key, cut = PartKey.of_file(file.name), LAYOUT.chunk_of(file.name)
        if key is not None and cut is not None:
            ends[file.parent.name, key] = max(cut, ends.get((file.parent.name, key), cut))
    parts = {key for _, key in ends}
    if len(parts) < 3 or any((t, k) not in ends for k in parts for t in k.tables):
        return 0, 0  # the sender and both receivers, each with both tables
    end = min(ends.values())
    kept = 0
    for file in results.glob("*/raw/received/p0-*.c*.parquet"):
        try:
            seconds = pq.read_table(file, columns=["second"])["second"].to_pylist()
        except OSError:
            continue
        kept += sum(1 for s in seconds if s < end)
    return end, kept


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.redis
def test_a_run_killed_midway_keeps_its_flushed_seconds_and_report_says_where_they_end(
    tmp_path: Path,
) -> None:
    """A Redis run flushing every second, its coordinator's process group killed (SIGKILL)
    once the receivers flushed a few chunks: ``brokerbench report`` analyses what the
    chunks hold, up to where the earliest part's end, and calls nothing lost."""
    import csv
    import os
    import signal
    import subprocess
    import sys

    import toml

    from tests.conftest import ROOT, SCENARIOS, brokerbench

    scenario = tomllib.loads((SCENARIOS / "redis-smoke.toml").read_text())
    scenario["load"].update(duration="20s", processes=1)
    scenario["measurement"] = {"warmup": "1s", "window": "2s", "step": "1s", "flush_interval": "1s"}
    path = tmp_path / "soak.toml"
    path.write_text(toml.dumps(scenario))
    results = tmp_path / "results"
    coordinator = subprocess.Popen(
        [sys.executable, "-m", "workload.shell.cli", "run", str(path), "--results", str(results)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        for _ in range(600):  # up to 60 s for the broker to start and chunks to hold messages
            if flushed(results)[1] > 0 or coordinator.poll() is not None:
                break
            time.sleep(0.1)
        assert coordinator.poll() is None, "the run ended before it was killed"
    finally:
        os.killpg(coordinator.pid, signal.SIGKILL)
        coordinator.wait(timeout=30)
    (run_dir,) = (p.parent for p in results.glob("*/context.json"))
    assert not list(run_dir.glob("raw/received/p0-receiver-*.0.parquet"))  # no final file
    data_end, kept = flushed(results)
    assert kept > 0, "no chunk held a received message within 60 s"

    done = brokerbench("report", str(run_dir))
    assert done.returncode == 0, done.stderr[-2000:]
    with (run_dir / "analysis" / "summary.csv").open() as f:
        (row,) = list(csv.DictReader(f))
    assert int(row["received"]) == kept  # every flushed second up to the end of the data
    ranges = pq.read_table(run_dir / "raw" / "sent_ranges").to_pylist()
    sent = sum(r["seq_hi"] - r["seq_lo"] + 1 for r in ranges if r["second"] < data_end)
    # (Not sent ≥ received: a message received just before the data's end may have been
    # confirmed to its sender just after it.)
    assert int(row["sent"]) == sent > 0 and row["duplicated"] == "0"
    assert row["lost"] == "" and row["not_drained"] == ""  # nothing called lost
    first = min(
        pq.read_table(run_dir / "raw" / "seconds", columns=["second"])["second"].to_pylist()
    )
    assert row["delivery"].startswith(
        f"incomplete: data ends at {data_end - first} s of 20 s; "
        "the run was interrupted (the coordinator is gone)"
    )
    assert "data ends at" in done.stdout and "interrupted (the coordinator is gone)" in done.stdout
    assert "each point's data ends at their last flushed chunk" in done.stdout
    assert "data ends at" in (run_dir / "analysis" / "report.html").read_text()


def test_the_report_draws_the_brokers_data_on_disk_through_its_readings(tmp_path: Path) -> None:
    from analysis.chart_data import read_resources

    rows = [
        {"run_id": RUN, "point": 0, "role": "broker", "node": "n1", "second": 100 + i}
        | ({"data_bytes": 2_000_000 * (i + 1)} if i % 5 == 0 else {})
        for i in range(11)
    ]
    write_telemetry(tmp_path, rows[:6], cut=106)
    write_telemetry(tmp_path, rows[6:])
    charts = {title: series for title, _, series in read_resources(tmp_path, 0, 100)}
    (disk,) = charts["Broker data on disk (its data directory)"]
    assert (list(disk.seconds), list(disk.values)) == ([0, 5, 10], [2.0, 12.0, 22.0])


def test_the_sampler_reads_a_broker_nodes_data_directory_every_few_seconds(tmp_path: Path) -> None:
    import os

    from workload.engine.telemetry import Sampler, Target

    (tmp_path / "log").write_bytes(b"z" * 50_000)
    target = Target("broker", "n1", (os.getpid(),), data_dir=tmp_path)
    sampler = Sampler(RUN, 0, lambda: [target])
    sampler.sample(first=True)
    sampler.sample()
    sampler.sample()  # within DATA_EVERY of the last reading: not read again
    rows = [r for r in sampler.take() if r["role"] == "broker"]
    assert [r.get("data_bytes") for r in rows][1:] == [None]
    assert rows[0]["data_bytes"] >= 50_000


class _Store:
    """What the client agent needs of S3: uploads kept by key, JSON markers."""

    run_id = RUN

    def __init__(self) -> None:
        self.uploaded: dict[str, bytes] = {}
        self.markers: dict[str, object] = {}

    def upload(self, path: Path, key: str) -> None:
        self.uploaded[key] = path.read_bytes()

    def get_json(self, key: str) -> object:
        return self.markers.get(key)

    def put_json(self, key: str, value: object) -> None:
        self.markers[key] = value

    def uri(self, key: str) -> str:
        return f"s3://bucket/{key}"


def test_a_client_machine_uploads_its_nodes_chunks_while_the_node_runs(tmp_path: Path) -> None:
    from tests.conftest import SCENARIOS
    from workload.engine.aws.agent import ClientAgent
    from workload.engine.aws.store import Uploader
    from workload.model.scenario import expand
    from workload.model.scenario_file import load_scenario

    store = _Store()
    chunk = LAYOUT.raw_file("received", 0, "receiver", 0, 0, cut=123)

    class Commands:
        def run_node(self, point: int) -> tuple[bool, str]:
            rec = WorkerRecorder("receiver", 0, 0)
            receive(rec, 122, range(5))
            write_node(tmp_path / RUN, RUN, 0, "receiver", 0, [rec.take(123)], 0, 123)
            for _ in range(200):  # the node runs on until its chunk is in S3 (at most 20 s)
                if chunk in store.uploaded:
                    return True, "ok"
                time.sleep(0.1)
            return False, "the chunk was not uploaded while the node ran"

    path = SCENARIOS / "redis-smoke.toml"
    agent = ClientAgent("receiver", 0, store, path, tmp_path, Commands(), log=lambda _: None)  # type: ignore[arg-type]
    agent.flush_interval = 0.2
    agent.uploader = Uploader(store, tmp_path / RUN, lambda _: None)  # type: ignore[arg-type]
    (point,) = expand(load_scenario(path))
    assert agent.take_part(point, {"ok": True})
    assert LAYOUT.done(0, "receiver", 0) in store.markers
