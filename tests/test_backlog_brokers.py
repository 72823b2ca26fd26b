"""Backlogs built and drained on real local brokers (``[backlog]``, docs/measurement.md §4):
Kafka and RabbitMQ, receivers away for a few seconds, then the drain — the analysis's
figures held against the raw records — and a drain its limit cuts off, whose remainder is
reported as not drained, never lost."""

from __future__ import annotations

import csv
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from brokers import registry
from tests.conftest import LocalBrokers
from tests.support import run_against
from workload.model.backlog import BacklogPhases, read_phases
from workload.model.layout import LAYOUT

SCENARIOS = Path(__file__).resolve().parents[1] / "workload" / "scenarios"


def analysed(spark, run_dir: Path) -> tuple[dict[str, str], BacklogPhases, list[dict]]:
    """The run's one summary row, its point's phases and its backlog series."""
    from analysis.job import analyse

    analyse(spark, run_dir)
    with (run_dir / LAYOUT.summary).open() as f:
        (row,) = list(csv.DictReader(f))
    (phases,) = read_phases(run_dir).values()
    series = sorted(
        pq.read_table(run_dir / LAYOUT.backlog_series).to_pylist(), key=lambda r: r["second"]
    )
    return row, phases, series


def raw_seconds(run_dir: Path) -> dict[int, tuple[int, int]]:
    """Per second, from the raw records: (confirmed, received first deliveries)."""
    out: dict[int, tuple[int, int]] = {}
    for path in (run_dir / LAYOUT.raw_table("seconds")).glob("*.parquet"):
        for r in pq.read_table(path).to_pylist():
            sent, received = out.get(r["second"], (0, 0))
            out[r["second"]] = (sent + r["sent"], received + r["received"] - r["redelivered"])
    return out


def assert_drained(row: dict[str, str], phases: BacklogPhases, series: list[dict], run_dir: Path):
    """The backlog built, drained to 0, and the analysis's figures are the raw records'."""
    assert phases.drain_ns is not None and not phases.cut_off
    assert int(row["lost"]) == 0 and int(row["not_drained"]) == 0
    assert row["delivery"] == "drained" and row["drain_cut_off"] == "False"
    raw = raw_seconds(run_dir)
    total_sent = total_received = 0
    queued = {}
    for second in range(min(raw), max(raw) + 1):
        sent, received = raw.get(second, (0, 0))
        total_sent, total_received = total_sent + sent, total_received + received
        queued[second] = max(0, total_sent - total_received)
    assert {r["second"]: r["queued"] for r in series} == queued
    peak = int(row["peak_backlog"])
    assert peak > 0 and peak == max(queued.values())
    assert int(row["backlog_left"]) == 0 == queued[max(queued)]
    # Caught up: the first second from the drain's on by whose end everything confirmed
    # before it was received.
    drain_s = phases.drain_ns // 1_000_000_000
    before = {s: sum(raw.get(t, (0, 0))[0] for t in raw if t < s) for s in queued}
    received_by = {s: sum(raw.get(t, (0, 0))[1] for t in raw if t <= s) for s in queued}
    caught = min(s for s in queued if s >= drain_s and received_by[s] >= before[s])
    catch_up = float(row["catch_up_s"])
    assert catch_up > 0
    # summary.csv keeps three decimals; the rate is figured from the unrounded span (a
    # catch-up of 0.095 s rounded from 0.0949 is 0.1 % off, more than the rate's rounding).
    exact_catch_up = caught + 1 - phases.drain_ns / 1e9
    assert catch_up == pytest.approx(exact_catch_up, abs=1e-3)
    drained = sum(raw.get(s, (0, 0))[1] for s in range(drain_s, caught + 1))
    assert float(row["drain_msgs_per_s"]) == pytest.approx(drained / exact_catch_up, rel=1e-4)
    assert float(row["drain_processing_p99_ms"]) >= float(row["drain_processing_p50_ms"]) > 0
    return peak, catch_up


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.kafka
def test_kafka_backlog_builds_and_drains_while_senders_go_on(
    local_brokers: LocalBrokers, spark, tmp_path: Path
) -> None:
    endpoints = local_brokers.get(registry.get("kafka"), "single").endpoints
    run_dir = run_against(
        SCENARIOS / "kafka-backlog.toml",
        endpoints,
        tmp_path,
        {
            "load": {"duration": "6s", "idle_timeout": "1s", "rate": 400},
            "backlog": {"build": "2s", "drain_rate": 200},
            "measurement": {"window": "2s"},
        },
    )
    row, phases, series = analysed(spark, run_dir)
    assert phases.drain_reason == "build elapsed"
    peak, catch_up = assert_drained(row, phases, series, run_dir)
    # The senders went on through the drain: sends are recorded after its start.
    drain_s = phases.drain_ns // 1_000_000_000 if phases.drain_ns else 0
    assert any(r["confirmed"] > 0 for r in series if r["second"] > drain_s)
    print(f"kafka: peak {peak} msgs, caught up in {catch_up:.2f} s, {phases}, row {row}")


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.rabbitmq
def test_rabbitmq_backlog_drains_and_a_drain_past_its_limit_is_not_drained_not_lost(
    local_brokers: LocalBrokers, spark, tmp_path: Path
) -> None:
    endpoints = local_brokers.get(registry.get("rabbitmq"), "single").endpoints
    short = {"duration": "4s", "idle_timeout": "1s"}
    for name in ("drains", "cut"):
        (tmp_path / name).mkdir()
    run_dir = run_against(
        SCENARIOS / "rabbitmq-backlog.toml",
        endpoints,
        tmp_path / "drains",
        {
            "load": short,
            "backlog": {"at": "1s", "build": "1.5s", "build_messages": 1500},
            "measurement": {"window": "2s"},
        },
    )
    row, phases, series = analysed(spark, run_dir)
    assert phases.hold_ns is not None and phases.drain_ns is not None
    peak, catch_up = assert_drained(row, phases, series, run_dir)
    print(f"rabbitmq: peak {peak} msgs, caught up in {catch_up:.2f} s, {phases}, row {row}")

    # A limit far too short to drain what built up: the point ends at it. Receivers take
    # one message at a time (prefetch 1), so what they drain between the drain's start and
    # their stop — the limit, the coordinator's tick (up to 0.25 s) and the stop itself —
    # stays well below the backlog even at a busy machine's send rate (with prefetch 100
    # they drained 7,000 messages in that time).
    run_dir = run_against(
        SCENARIOS / "rabbitmq-backlog.toml",
        endpoints,
        tmp_path / "cut",
        {
            "load": short,
            "broker": {"params": {"prefetch": 1}},
            "backlog": {"at": "0s", "build": "1.5s", "drain_limit": "0.1s"},
            "measurement": {"window": "2s"},
        },
    )
    row, phases, series = analysed(spark, run_dir)
    print(f"rabbitmq, cut off: {phases}, row {row}")
    assert phases.drain_ns is not None and phases.cut_off_ns is not None
    assert phases.cut_off_ns >= phases.drain_ns + 100_000_000
    left = int(row["backlog_left"])
    assert left > 0 and row["drain_cut_off"] == "True" and row["catch_up_s"] == ""
    assert int(row["lost"]) == 0 and int(row["not_drained"]) > 0
    assert row["delivery"].startswith("not drained: the drain limit (0.1 s) ended the point")
    # What was left is what is not drained, by identity (no confirmed message is lost).
    assert left == int(row["not_drained"])
    # The per-second counters agree, but for messages the broker flagged as redelivered on
    # their first receipt (prefetched by a receiver that stopped first, then delivered to
    # another): the counters leave every flagged message out, so they read those as queued.
    assert left <= series[-1]["queued"] <= left + int(row["redelivered"])
    # Nothing was received after the point was stopped (the workers were, at once).
    cut_s = phases.cut_off_ns // 1_000_000_000
    assert all(r["received"] == 0 for r in series if r["second"] > cut_s + 5)
