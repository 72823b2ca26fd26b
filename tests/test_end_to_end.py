"""Whole runs against real PostgreSQL and Redis servers started by brokerbench itself."""

from __future__ import annotations

import json
import math
import time
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from brokers.local import free_ports
from tests.conftest import SCENARIOS, brokerbench, read_summary

pytestmark = [pytest.mark.slow, pytest.mark.integration]

CLIENTS = ("sender", "receiver")


def assert_clean_run(results: Path, broker: str) -> list[dict[str, str]]:
    rows = read_summary(results)
    assert rows, "the summary has no rows"
    for row in rows:
        assert row["broker"] == broker
        assert int(row["sent"]) > 0
        assert int(row["received"]) == int(row["sent"])
        assert int(row["lost"]) == 0 and int(row["duplicated"]) == 0
        assert float(row["send_msgs_per_s"]) > 0 and float(row["receive_msgs_per_s"]) > 0
        assert float(row["processing_latency_window_p95_ms"]) > 0
        assert float(row["send_latency_window_p95_ms"]) > 0
    (report,) = results.glob("*/analysis/report.html")
    assert 'class="plotly-graph-div"' in report.read_text()  # charts (drawn in the browser)
    return rows


@pytest.mark.postgresql
def test_postgresql_smoke(tmp_path: Path) -> None:
    done = brokerbench("run", str(SCENARIOS / "postgresql-smoke.toml"), "--results", str(tmp_path))
    assert done.returncode == 0, done.stderr[-2000:]
    assert "send msgs/s" in done.stdout and "PostgreSQL" in done.stdout
    assert_clean_run(tmp_path, "postgresql")


@pytest.mark.redis
def test_redis_smoke(tmp_path: Path) -> None:
    done = brokerbench("run", str(SCENARIOS / "redis-smoke.toml"), "--results", str(tmp_path))
    assert done.returncode == 0, done.stderr[-2000:]
    assert "Redis replication is asynchronous" in done.stdout
    (row,) = assert_clean_run(tmp_path, "redis")
    assert "limited by: " in done.stderr  # the live view's closing line
    assert_resources_recomputed(next(tmp_path.glob("*/")), row)


def assert_resources_recomputed(run_dir: Path, row: dict[str, str]) -> None:
    """The summary's resource columns and verdict, worked out again from the raw tables:
    the measurement period from the senders' per-second rows (the whole seconds after the
    warm-up in which every sender worker sent), the means of each node's telemetry rows in
    it, the busiest broker and client node, CPU and bytes written to the data device (one disk on one machine) per confirmed message."""
    context = json.loads((run_dir / "context.json").read_text())
    seconds = pq.read_table(run_dir / "raw" / "seconds").to_pylist()
    sending: dict[tuple[int, int], list[int]] = {}
    for r in seconds:
        if r["sent"] > 0:
            sending.setdefault((r["node"], r["worker"]), []).append(r["second"])
    first = min(min(s) for s in sending.values())
    warmup = math.ceil(float(context["scenario"]["measurement"]["warmup"]))
    start = max(first + warmup, max(min(s) for s in sending.values()) + 1)
    end = min(max(s) for s in sending.values()) - 1
    assert end >= start
    sent = sum(r["sent"] for r in seconds if start <= r["second"] <= end)
    rate = sent / (end - start + 1)
    assert float(row["send_msgs_per_s"]) == pytest.approx(rate, rel=1e-3)
    telemetry = pq.read_table(run_dir / "raw" / "telemetry").to_pylist()
    means: dict[tuple[str, str], dict[str, float]] = {}
    for role, node in {(t["role"], t["node"]) for t in telemetry}:
        mine = [t for t in telemetry if t["node"] == node and start <= t["second"] <= end]
        assert mine, f"no telemetry of {node} in the measurement period"
        means[role, node] = {"cores": mine[0]["cores"]}
        for c in ("cpu_pct", "device_write_bytes_s", "cpu_steal_pct"):
            known = [t[c] for t in mine if t[c] is not None]  # the clients have no device
            means[role, node][c] = sum(known) / len(known) if known else 0.0
    brokers = {n: m for (role, n), m in means.items() if role == "broker"}
    clients = {n: m for (role, n), m in means.items() if role in ("sender", "receiver")}
    assert brokers and clients and ("host", "host") in means
    busiest = max(brokers.values(), key=lambda m: m["cpu_pct"])
    assert float(row["broker_cpu_pct"]) == pytest.approx(busiest["cpu_pct"], abs=1e-3)
    kept = pq.read_table(run_dir / "analysis" / "resources").to_pylist()
    assert {(r["role"], r["node"]) for r in kept} == set(means)
    for r in kept:  # each node's mean, and its busiest second
        assert r["cpu_pct"] == pytest.approx(means[r["role"], r["node"]]["cpu_pct"], abs=1e-6)
        assert r["cpu_pct_max"] >= r["cpu_pct"] and 1 <= r["seconds"] <= end - start + 1
    client = max(m["cpu_pct"] for m in clients.values())
    assert float(row["client_cpu_pct"]) == pytest.approx(client, abs=1e-3)
    host = means["host", "host"]
    assert float(row["host_cpu_pct"]) == pytest.approx(host["cpu_pct"] / host["cores"], abs=1e-3)
    broker_cpu = sum(m["cpu_pct"] for m in brokers.values()) / 100
    assert float(row["broker_cpu_us_per_msg"]) == pytest.approx(broker_cpu * 1e6 / rate, rel=1e-3)
    client_cpu = sum(m["cpu_pct"] for m in clients.values()) / 100
    assert float(row["client_cpu_us_per_msg"]) == pytest.approx(client_cpu * 1e6 / rate, rel=1e-3)
    written = next(iter(brokers.values()))["device_write_bytes_s"]  # one machine, one disk
    assert float(row["broker_disk_bytes_per_msg"]) == pytest.approx(written / rate, abs=1e-3)
    # the shared machine three ways, recomputed from the raw telemetry
    broker_sum = sum(m["cpu_pct"] for m in brokers.values())
    clients_sum = sum(m["cpu_pct"] for m in clients.values())
    others = max(0.0, host["cpu_pct"] - broker_sum - clients_sum)
    assert float(row["broker_nodes_cpu_pct"]) == pytest.approx(broker_sum, abs=1e-3)
    assert float(row["clients_cpu_pct"]) == pytest.approx(clients_sum, abs=1e-3)
    assert float(row["other_cpu_pct"]) == pytest.approx(others, abs=1e-3)
    assert row["disturbed"] == str(others > 0.10 * 100 * host["cores"])
    # of the others, the hypervisor's steal (only the host row reads it)
    assert float(row["steal_pct"]) == pytest.approx(min(others, host["cpu_steal_pct"]), abs=1e-3)
    # the verdict, by the rules as docs/verdict.md states them
    if busiest["cpu_pct"] >= 90 * busiest["cores"]:
        expected = "broker CPU"
    elif host["cpu_pct"] >= 90 * host["cores"]:
        # a client process may have been at a core; the broker nodes at most of the machine
        expected = {"client CPU", "shared host", "broker CPU"}
    else:
        expected = {"client CPU", "none saturated", "broker disk"}
    assert row["limited_by"] in (expected if isinstance(expected, set) else {expected})
    assert row["limited_reason"]
    assert_time_recomputed(row, seconds, telemetry, (start, end))


def assert_time_recomputed(
    row: dict[str, str],
    seconds: list[dict[str, Any]],
    telemetry: list[dict[str, Any]],
    period: tuple[int, int],
) -> None:
    """The columns over time, worked out again from the raw rows as docs/verdict.md states
    them: CPU per confirmed message in the last third of the measurement period over the
    first (a period of 9 s or more), and the longest stall — 5 s or more in a row with
    messages confirmed and not received (first receipts) and none received."""
    start, end = period
    third = (end - start + 1) // 3

    def cost(roles: tuple[str, ...], lo: int, hi: int) -> float:
        cpu = 0.0
        for node in {t["node"] for t in telemetry if t["role"] in roles}:
            mine = [
                t["cpu_pct"] for t in telemetry if t["node"] == node and lo <= t["second"] <= hi
            ]
            cpu += sum(mine) / len(mine) / 100
        sent = sum(r["sent"] for r in seconds if lo <= r["second"] <= hi)
        return cpu * 1e6 / (sent / (hi - lo + 1))

    for column, roles in (("broker_cpu_trend", ("broker",)), ("client_cpu_trend", CLIENTS)):
        if third < 3:
            assert row[column] == "", "a period under 9 s has no trend"
            continue
        ratio = cost(roles, end - third + 1, end) / cost(roles, start, start + third - 1)
        assert float(row[column]) == pytest.approx(ratio, rel=1e-3)
        assert (f"per message rose {ratio:.1f}×" in row["limited_reason"]) == (ratio >= 1.5)
    per_second: dict[int, list[int]] = {}
    for r in seconds:
        counts = per_second.setdefault(r["second"], [0, 0])
        counts[0] += r["sent"]
        counts[1] += r["received"] - r["redelivered"]
    confirmed = received = longest = run = 0
    for second in range(min(per_second), max(per_second) + 1):
        sent, got = per_second.get(second, [0, 0])
        run = run + 1 if not got and confirmed > received else 0
        longest = max(longest, run if run >= 5 else 0)
        confirmed, received = confirmed + sent, received + got
    assert int(row["stall_s"]) == longest
    assert ("stall: " in row["phase_verdicts"]) == bool(longest)


@pytest.mark.postgresql
def test_unreachable_endpoint_fails_fast_with_one_line(tmp_path: Path) -> None:
    (port,) = free_ports(1)
    scenario = tmp_path / "byo.toml"
    scenario.write_text(
        'name = "byo"\n[broker]\nsystem = "postgresql"\ndeployment = "endpoints"\n'
        f'endpoints = ["127.0.0.1:{port}"]\n'
    )
    started = time.monotonic()
    done = brokerbench("run", str(scenario), "--results", str(tmp_path / "out"), timeout=60)
    assert time.monotonic() - started < 30
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert f"127.0.0.1:{port}" in lines[0] and "Traceback" not in done.stderr
