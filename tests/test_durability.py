"""The durability line: what each system derives from the settings its servers reported,
and where a reader sees it (the terminal table, the report, ``compare``)."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from analysis.columns import SUMMARY_COLUMNS
from analysis.compare import compare_runs, text_report
from analysis.console import run_summary
from analysis.report import write_html
from brokers import registry
from brokers.durability import Durability
from workload.model.record import RunContext

POSTGRES = registry.get("postgresql")
REDIS = registry.get("redis")

STANDBYS = [
    {"name": "s1", "state": "streaming", "sync_state": "quorum"},
    {"name": "s2", "state": "streaming", "sync_state": "quorum"},
]


def postgres(settings: dict[str, str], standbys: list[dict[str, str]], **params: Any) -> str:
    described = {"version": "16.4", "settings": settings, "standbys": standbys}
    return POSTGRES.durability(described, POSTGRES.params_model(**params)).line  # type: ignore[misc]


def redis(replicas: int, appendfsync: str = "everysec", **params: Any) -> str:
    described = {
        "version": "7.2.4",
        "role": "master",
        "connected_replicas": replicas,
        "cluster_shards": None,
        "settings": {"appendonly": "yes", "appendfsync": appendfsync},
    }
    return REDIS.durability(described, REDIS.params_model(**params)).line  # type: ignore[misc]


SINGLE = {"synchronous_commit": "on", "synchronous_standby_names": "", "fsync": "on"}
CLUSTER = {
    "synchronous_commit": "remote_write",
    "synchronous_standby_names": "ANY 1 (s1, s2)",
    "fsync": "on",
}


def test_a_single_postgresql_asked_for_synchronous_replication_is_said_not_replicated() -> None:
    assert postgres(SINGLE, []) == (
        "single node, not replicated (replication=synchronous, synchronous_standby_names "
        "empty); fsync per commit; confirmed = committed locally"
    )


def test_postgresql_standbys_synchronous_or_not() -> None:
    assert postgres(CLUSTER, STANDBYS) == (
        "replicated synchronously ('ANY 1 (s1, s2)' of 2 standbys streaming); fsync per "
        "commit; confirmed = committed locally and written (not fsynced) by a synchronous standby"
    )
    # replication = "asynchronous": the workers' commits are local.
    assert postgres(CLUSTER, STANDBYS, replication="asynchronous") == (
        "replicated asynchronously to 2 standbys: a confirmed message can be lost on a "
        "fail-over; fsync per commit; confirmed = committed locally"
    )
    assert "fsync off: a confirmed message can be lost on a crash" in postgres(
        {**SINGLE, "fsync": "off"}, []
    )


def test_redis_says_what_appendfsync_and_asynchronous_replication_cost() -> None:
    assert redis(0) == (
        "single node, not replicated; fsync every second (appendfsync everysec): a confirmed "
        "message can be lost on a crash; confirmed = executed by the master, in memory (AOF "
        "not yet fsynced)"
    )
    assert redis(2, "always", wait_replicas=1) == (
        "replicated to 2 replicas, each batch WAITs for 1; fsync per write (appendfsync "
        "always); confirmed = appended to the master's AOF and fsynced and received by 1 replica"
    )
    assert redis(2).startswith(
        "replicated asynchronously to 2 replicas: a confirmed message can be lost on a fail-over;"
    )


def test_the_record_reads_back_what_the_run_recorded() -> None:
    durability = Durability(False, "single node, not replicated", True, "fsync per commit", "x")
    record = RunContext.of({"broker": {"system": "postgresql", "durability": durability.record()}})
    assert record.broker.durability == durability
    assert RunContext.of({"broker": {"system": "kafka"}}).broker.durability is None
    assert RunContext.of({"broker": {"durability": {"replicated": True}}}).broker.durability is None
    assert record.dump()["broker"]["durability"] == durability.record()  # unchanged


def context(line_of: Durability | None) -> dict[str, Any]:
    broker: dict[str, Any] = {"system": "redis", "title": "Redis Streams", "topology": "single"}
    if line_of is not None:
        broker["durability"] = line_of.record()
    return {
        "run_id": "r",
        "scenario": {"name": "s", "measurement": {"window": 5, "step": 5}},
        "broker": broker,
    }


EVERYSEC = Durability(
    False,
    "single node, not replicated",
    False,
    "fsync every second (appendfsync everysec): a confirmed message can be lost on a crash",
    "executed by the master, in memory (AOF not yet fsynced)",
)
ALWAYS = Durability(
    False,
    "single node, not replicated",
    True,
    "fsync per write (appendfsync always)",
    "appended to the master's AOF and fsynced",
)


def row(point: int) -> dict[str, str]:
    values = {c: "" for c in SUMMARY_COLUMNS}
    values.update(
        broker="redis",
        point=str(point),
        label="threads=1",
        threads="1",
        sender_nodes="1",
        receiver_nodes="2",
        message_size="100",
        send_msgs_per_s="1000",
        receive_msgs_per_s="1000",
    )
    return values


def test_the_terminal_table_and_the_report_head_with_the_durability_line(tmp_path: Path) -> None:
    printed = run_summary(context(EVERYSEC), [row(0)]).splitlines()
    assert printed[0].startswith("Redis Streams  ([window]")
    assert printed[1] == f"durability: {EVERYSEC.line}"
    page = write_html(tmp_path, context(EVERYSEC), [row(0)]).read_text()
    assert (
        "<b>Durability:</b> single node, not replicated; fsync every second (appendfsync "
        "everysec): a confirmed message can be lost on a crash;" in page
    )
    older = write_html(tmp_path, context(None), [row(0)]).read_text()
    assert "<b>Durability:</b> not derived for this system" in older


def write_run(run_dir: Path, durability: Durability) -> Path:
    (run_dir / "analysis").mkdir(parents=True)
    (run_dir / "context.json").write_text(json.dumps(context(durability)))
    with (run_dir / "analysis" / "summary.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=SUMMARY_COLUMNS)
        writer.writeheader()
        writer.writerow(row(0))
    return run_dir


def test_compare_shows_the_durability_and_warns_when_it_differs(tmp_path: Path) -> None:
    a = write_run(tmp_path / "a", EVERYSEC)
    b = write_run(tmp_path / "b", ALWAYS)
    same = text_report(compare_runs(a, a)).splitlines()
    assert f"durability: {EVERYSEC.line}" in same
    assert not any("durability differs" in line for line in same)
    differ = text_report(compare_runs(a, b)).splitlines()
    at = differ.index(
        "durability differs — the figures compare different guarantees, not a change of one:"
    )
    assert differ[at + 1] == f"  baseline:  {EVERYSEC.line}"
    assert differ[at + 2] == f"  contender: {ALWAYS.line}"
