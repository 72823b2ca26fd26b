"""The resource sampler against real processes of this machine, the JVM counters it reads,
and the verdict rule over what it measured."""

from __future__ import annotations

import dataclasses
import os
import shutil
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from workload.engine import jvmstat
from workload.engine.telemetry import (
    Sampler,
    Target,
    block_device,
    node_means,
    process_groups,
)
from workload.model.layout import LAYOUT
from workload.model.results import write_telemetry
from workload.model.verdict import (
    BACK_PRESSURE,
    BROKER_CPU,
    BROKER_DISK,
    CLIENT_CPU,
    NONE,
    SHARED_HOST,
    UNKNOWN,
    NodeUsage,
    Usage,
    point_usage,
    verdict,
)

SPIN = "import time\nend = time.time() + 30\nwhile time.time() < end: pass\n"


def spinning() -> subprocess.Popen[bytes]:
    """A process that keeps one core busy (for at most 30 s)."""
    return subprocess.Popen([sys.executable, "-c", SPIN], start_new_session=True)


def _cpu_seconds(pid: int) -> float:
    """A process's user + system CPU seconds so far, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def sample_for(
    targets: list[Target], seconds: float, interval: float = 1.0
) -> tuple[Sampler, list[dict[str, Any]]]:
    """A sampler run for ``seconds``, and its rows."""
    sampler = Sampler("r1", 3, lambda: targets, interval, host_data_dir=Path("/tmp")).start()
    time.sleep(seconds)
    return sampler, sampler.stop()


def test_a_busy_process_reads_as_about_one_core_and_the_rows_follow_the_seconds() -> None:
    proc = spinning()
    try:
        began, cpu_before = time.monotonic(), _cpu_seconds(proc.pid)
        sampler, rows = sample_for([Target("sender", "sender-0", (proc.pid,))], 3.3)
        own_pct = 100 * (_cpu_seconds(proc.pid) - cpu_before) / (time.monotonic() - began)
    finally:
        proc.kill()
        proc.wait()
    assert not sampler.failure
    mine = [r for r in rows if r["node"] == "sender-0"]
    host = [r for r in rows if r["node"] == "host"]
    assert len(mine) >= 2 and len(host) == len(mine)
    seconds = [r["second"] for r in mine]
    assert seconds == sorted(seconds) and len(set(seconds)) == len(seconds)
    # The spinner had a core to itself only on an idle machine (beside a busy test it got
    # less): its rows read what it used by its own account, and no more than a core.
    assert own_pct >= 30
    whole = mine[1:]  # the whole seconds after the first (a partial) one
    mean_pct = sum(r["cpu_pct"] for r in whole) / len(whole)
    assert abs(mean_pct - own_pct) <= 20, (mean_pct, own_pct)
    for row in whole:
        assert 0.9 <= row["seconds"] <= 1.2
        assert 0 < row["cpu_pct"] <= 110, row
        assert row["cpu_process_max_pct"] == pytest.approx(row["cpu_pct"])
        assert row["rss_bytes"] > 1_000_000 and row["processes"] == 1
        assert row["run_id"] == "r1" and row["point"] == 3 and row["role"] == "sender"
    for row in host[1:]:
        assert row["cpu_pct"] >= 50  # the machine was at least as busy as the spinner
        assert row["cores"] == os.cpu_count()


SPIN_IN_A_THREAD = (
    "import threading, time\n"
    "def spin():\n"
    "    end = time.time() + 30\n"
    "    while time.time() < end: pass\n"
    "threading.Thread(target=spin).start()\n"
    "[threading.Thread(target=time.sleep, args=(30,)).start() for _ in range(5)]\n"
)


def test_a_broker_nodes_busiest_thread_is_read_and_only_a_brokers() -> None:
    proc = subprocess.Popen([sys.executable, "-c", SPIN_IN_A_THREAD], start_new_session=True)
    try:
        time.sleep(0.3)  # its threads started
        targets = [Target("broker", "b-0", (proc.pid,)), Target("sender", "s-0", (proc.pid,))]
        _sampler, rows = sample_for(targets, 3.3)
    finally:
        proc.kill()
        proc.wait()
    broker = [r for r in rows if r["node"] == "b-0"][1:]
    sender = [r for r in rows if r["node"] == "s-0"]
    assert broker and all(r["cpu_thread_max_pct"] is not None for r in broker)
    for row in broker:
        # one of its 7 threads did all the work: the busiest is nearly the whole process
        assert row["cpu_thread_max_pct"] <= row["cpu_pct"] + 2
        assert row["cpu_thread_max_pct"] >= 0.8 * row["cpu_pct"] > 0
    assert all(r.get("cpu_thread_max_pct") is None for r in sender)


def test_disk_writes_of_a_node_count_in_its_row(tmp_path: Path) -> None:
    script = (
        "import os, time\n"
        f"f = open({str(tmp_path / 'data')!r}, 'wb')\n"
        "end = time.time() + 4\n"
        "while time.time() < end:\n"
        "    f.write(os.urandom(1 << 16)); f.flush(); os.fsync(f.fileno()); time.sleep(0.01)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", script])
    try:
        _sampler, rows = sample_for([Target("broker", "b-0", (proc.pid,), tmp_path)], 3.3)
    finally:
        proc.kill()
        proc.wait()
    rows = [r for r in rows if r["node"] == "b-0"][1:]
    assert rows
    assert all(r["write_bytes_s"] > 100_000 for r in rows), rows
    if block_device(tmp_path) is not None:  # a file system on a block device
        assert all(r["device"] == block_device(tmp_path) for r in rows)
        assert all(r["device_write_ops_s"] > 0 for r in rows), rows


def test_a_node_that_is_gone_leaves_a_gap_not_a_failure() -> None:
    proc = spinning()
    proc.kill()
    proc.wait()
    sampler, rows = sample_for([Target("broker", "gone", (proc.pid,))], 2.2)
    assert not sampler.failure
    assert not [r for r in rows if r["node"] == "gone"]
    assert [r for r in rows if r["node"] == "host"]


def test_a_failing_sampler_keeps_its_rows_and_says_why_in_one_line() -> None:
    calls = {"n": 0}

    def targets() -> list[Target]:
        calls["n"] += 1
        if calls["n"] > 2:
            raise RuntimeError("cannot list the nodes")
        return [Target("sender", "sender-0", (os.getpid(),))]

    sampler = Sampler("r", 0, targets, 1.0).start()
    time.sleep(3.3)
    rows = sampler.stop()
    assert sampler.failure == "telemetry sampler stopped: RuntimeError: cannot list the nodes"
    assert len([r for r in rows if r["node"] == "sender-0"]) == 1


def test_process_groups_find_a_session_and_its_children() -> None:
    proc = subprocess.Popen(["sh", "-c", "sleep 30 & sleep 30 & wait"], start_new_session=True)
    try:
        deadline = time.monotonic() + 5
        while len(process_groups().get(proc.pid, [])) < 3 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert len(process_groups()[proc.pid]) == 3
    finally:
        os.killpg(proc.pid, 9)
        proc.wait()


def test_telemetry_files_are_one_per_point_and_node(tmp_path: Path) -> None:
    rows = [
        {"run_id": "r", "point": p, "role": "broker", "node": n, "second": s, "cpu_pct": 1.0}
        for p in (0, 1)
        for n in ("kafka-0", "host")
        for s in (10, 11)
    ]
    write_telemetry(tmp_path, rows)
    table = pq.read_table(tmp_path / LAYOUT.telemetry_file(1, "kafka-0"))
    assert table.column("second").to_pylist() == [10, 11]
    assert len(list((tmp_path / LAYOUT.raw_table("telemetry")).glob("*.parquet"))) == 4


def test_node_means_average_the_seconds_of_the_period_and_skip_unread_counters() -> None:
    rows = [
        {"role": "broker", "node": "b", "second": 1, "cpu_pct": 500.0, "gc_pause_ms_s": None},
        {"role": "broker", "node": "b", "second": 2, "cpu_pct": 100.0, "gc_pause_ms_s": 4.0},
        {"role": "broker", "node": "b", "second": 3, "cpu_pct": 50.0, "gc_pause_ms_s": None},
        {"role": "broker", "node": "b", "second": 9, "cpu_pct": 900.0},
    ]
    (mean,) = node_means(rows, 1, 3)
    assert mean["cpu_pct"] == pytest.approx(650.0 / 3)
    assert mean["cpu_max_pct"] == 500.0
    assert mean["gc_pause_ms_s"] == 4.0
    assert mean["device_busy_pct"] is None


# -- the JVM counters ------------------------------------------------------------------------


def perf_data(entries: dict[str, int], little: bool = True) -> bytes:
    """A performance-data file as HotSpot writes it (v2 layout), with long counters."""
    order = "<" if little else ">"
    body = b""
    offset = 32
    for name, value in entries.items():
        encoded = name.encode() + b"\0"
        padded = encoded + b"\0" * (-len(encoded) % 8)
        header = 20
        length = header + len(padded) + 8
        body += struct.pack(
            order + "iiiBBBBi", length, header, 0, ord("J"), 0, 0, 0, header + len(padded)
        )
        body += padded + struct.pack(order + "q", value)
        offset += length
    prologue = struct.pack(">I", jvmstat.MAGIC) + bytes([1 if little else 0, 2, 0, 1])
    prologue += struct.pack(order + "iiqii", offset, 0, 0, 32, len(entries))
    return prologue + body


@pytest.mark.parametrize("little", [True, False])
def test_gc_pause_time_sums_every_collector(little: bool) -> None:
    data = perf_data(
        {
            "sun.os.hrt.frequency": 1_000_000_000,
            "sun.gc.collector.0.time": 1_500_000_000,
            "sun.gc.collector.0.invocations": 99,
            "sun.gc.collector.1.time": 250_000_000,
            "sun.gc.collector.2.time": 50_000_000,
            "sun.gc.policy.tenuringThreshold": 7,
        },
        little,
    )
    assert jvmstat.gc_pause_seconds(data) == pytest.approx(1.8)


def test_what_is_no_performance_data_reads_as_none() -> None:
    assert jvmstat.gc_pause_seconds(b"") is None
    assert jvmstat.gc_pause_seconds(b"\0" * 64) is None
    assert jvmstat.gc_pause_seconds(perf_data({"sun.os.hrt.frequency": 1000})) is None
    assert jvmstat.perf_file(os.getpid()) is None  # python is no JVM


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("java") is None, reason="java not installed")
def test_a_real_jvm_that_allocates_shows_gc_time(tmp_path: Path) -> None:
    source = tmp_path / "Alloc.java"
    source.write_text(
        "public class Alloc { public static void main(String[] a) {"
        " long end = System.currentTimeMillis() + 20000; java.util.List<byte[]> l ="
        " new java.util.ArrayList<>(); while (System.currentTimeMillis() < end) {"
        " l.add(new byte[100000]); if (l.size() > 100) l.clear(); } } }"
    )
    proc = subprocess.Popen(["java", "-Xmx64m", "-XX:+UseSerialGC", str(source)])
    try:
        deadline = time.monotonic() + 15
        while jvmstat.perf_file(proc.pid) is None and time.monotonic() < deadline:
            time.sleep(0.1)
        _sampler, rows = sample_for([Target("broker", "jvm", (proc.pid,))], 3.3)
    finally:
        proc.kill()
        proc.wait()
    rows = [r for r in rows if r["node"] == "jvm"][1:]
    assert rows and all(r["gc_pause_ms_s"] is not None for r in rows)
    assert sum(r["gc_pause_ms_s"] for r in rows) > 0


# -- the verdict -----------------------------------------------------------------------------


def node(role: str, name: str, cpu: float, **more: float) -> NodeUsage:
    return NodeUsage(
        role=role, node=name, cores=2.0, processes=more.pop("processes", 2.0), cpu_pct=cpu, **more
    )  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("nodes", "ratio", "in_flight", "limit"),
    [
        ([], None, 1, UNKNOWN),
        # the broker's node used ≥ 90 % of its 2 cores
        ([node("broker", "b0", 185.0), node("host", "host", 195.0)], None, 8, BROKER_CPU),
        # one broker thread at a whole core, the node's 2 cores half idle (Redis's command
        # thread): the broker set the pace, though the machine was 89 % busy
        (
            [node("broker", "b0", 95.0, thread_max_pct=92.0), node("host", "host", 178.0)],
            None,
            8,
            BROKER_CPU,
        ),
        # the same broker's busiest thread at 60 %: the shared machine
        (
            [node("broker", "b0", 95.0, thread_max_pct=60.0), node("host", "host", 185.0)],
            None,
            8,
            SHARED_HOST,
        ),
        # its data device was busy
        (
            [node("broker", "b0", 40.0, device_busy_pct=97.0), node("host", "host", 60.0)],
            None,
            1,
            BROKER_DISK,
        ),
        # a receiver process at a whole core, the broker with room
        (
            [
                node("broker", "b0", 55.0),
                node("receiver", "receiver-0", 120.0, process_max_pct=95.0),
                node("host", "host", 150.0),
            ],
            None,
            8,
            CLIENT_CPU,
        ),
        # open loop that reached 80 % of its target, no client busy: the senders waited
        ([node("broker", "b0", 20.0), node("host", "host", 40.0)], 0.80, 1, BACK_PRESSURE),
        # … with a sender process at a whole core: the client
        (
            [
                node("broker", "b0", 20.0),
                node("sender", "sender-0", 100.0, process_max_pct=96.0),
                node("host", "host", 130.0),
            ],
            0.80,
            1,
            CLIENT_CPU,
        ),
        # PostgreSQL in open loop at 4 x 2,500 msgs/s: 94 % of the target, the broker at
        # 122 % of a core, senders at 11 %, the machine 96 % busy: the broker's
        (
            [
                node("broker", "b0", 122.0),
                node("sender", "sender-0", 11.0, process_max_pct=11.0),
                node("receiver", "receiver-0", 24.0, process_max_pct=20.0),
                node("receiver", "receiver-1", 24.0, process_max_pct=20.0),
                node("host", "host", 192.0),
            ],
            0.94,
            1,
            BACK_PRESSURE,
        ),
        # three RabbitMQ nodes that together used most of the machine, the clients little
        (
            [
                node("broker", "b0", 49.0),
                node("broker", "b1", 38.0),
                node("broker", "b2", 39.0),
                node("sender", "sender-0", 25.0, process_max_pct=20.0),
                node("receiver", "receiver-0", 25.0, process_max_pct=20.0),
                node("host", "host", 186.0),
            ],
            None,
            4,
            BROKER_CPU,
        ),
        # nothing alone, but the shared machine 97 % busy
        (
            [
                node("broker", "b0", 100.0),
                node("sender", "sender-0", 45.0, process_max_pct=30.0),
                node("host", "host", 194.0),
            ],
            None,
            8,
            SHARED_HOST,
        ),
        # a tenth of that
        (
            [
                node("broker", "b0", 10.0),
                node("sender", "sender-0", 5.0),
                node("host", "host", 20.0),
            ],
            1.0,
            1,
            NONE,
        ),
    ],
)
def test_the_verdict_names_what_set_the_pace(
    nodes: list[NodeUsage], ratio: float | None, in_flight: int, limit: str
) -> None:
    judged = verdict(Usage(tuple(nodes), True, ratio, in_flight))
    assert judged.limit == limit, judged.reason
    assert judged.reason


def test_a_shared_machine_is_split_three_ways_and_others_mark_the_point_disturbed() -> None:
    nodes = (
        node("broker", "b0", 49.0),
        node("broker", "b1", 38.0),
        node("broker", "b2", 39.0),
        node("sender", "sender-0", 25.0),
        node("receiver", "receiver-0", 25.0),
        node("host", "host", 186.0),
    )
    judged = verdict(Usage(nodes, True, None, 4))
    assert judged.limit == BROKER_CPU and not judged.disturbed
    assert "the 3 broker nodes used 126 % of 200 %, the clients 50 %, others 10 %" in judged.reason
    assert "needs more cores" in judged.reason
    hog = (
        node("broker", "b0", 40.0),
        node("sender", "sender-0", 40.0),
        node("host", "host", 191.0),
    )
    judged = verdict(Usage(hog, True, None, 8))
    assert judged.limit == SHARED_HOST and judged.disturbed
    assert "others 111 %" in judged.reason and "disturbed" in judged.reason
    apart = verdict(Usage((node("broker", "b0", 10.0),), False, None, 1))
    assert not apart.disturbed and "others" not in apart.reason
    # a virtual machine's neighbours: the hypervisor's steal is said as part of the others
    host = dataclasses.replace(node("host", "host", 191.0), steal_pct=15.0)
    stolen = verdict(Usage((*hog[:2], host), True, None, 8))
    assert "others 111 % (steal 15 %)" in stolen.reason and stolen.disturbed


def test_the_machine_counts_as_shared_only_where_one_sampler_saw_it_all() -> None:
    busy = [node("broker", "b0", 10.0), node("host", "host-broker-0", 195.0)]
    usage = point_usage(busy, rate=None, workers=4, max_in_flight=None, send_msgs_per_s=10.0)
    assert not usage.shared_host and verdict(usage).limit == NONE
    usage = point_usage(
        [node("host", "host", 195.0)], rate=100.0, workers=4, max_in_flight=1, send_msgs_per_s=390.0
    )
    assert usage.shared_host and usage.target_ratio == pytest.approx(0.975)
    assert verdict(usage).limit == SHARED_HOST


def test_one_batch_in_flight_says_the_round_trip_sets_the_pace() -> None:
    judged = verdict(Usage((node("broker", "b0", 10.0), node("host", "host", 20.0)), True))
    assert judged.limit == NONE and "round trip" in judged.reason
