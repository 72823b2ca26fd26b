"""Whole runs against real PostgreSQL and Redis servers started by brokerbench itself."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from brokers.local import free_ports
from tests.conftest import SCENARIOS, brokerbench, read_summary

pytestmark = [pytest.mark.slow, pytest.mark.integration]


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
    assert_clean_run(tmp_path, "redis")


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
