"""Benchmark (not a test): what each shipped power-loss scenario loses, over a few runs.

Runs every power-loss scenario of :data:`SCENARIOS` (``workload/scenarios/<name>.toml``)
``--repeats`` times (3 by default), one run at a time, each a whole ``brokerbench run``
with its analysis, and reads from each run its summary (confirmed messages, those lost on
power loss, the send rate), the durability its context claims and its fault record (a
lazy filesystem that wrote through past its memory bound makes the loss a lower bound). It
prints one line per run and writes a JSON results file
(``results/bench-durability/<UTC time>/results.json``, beside the runs); with
``--write-results`` it merges the scenarios run into ``docs/durability-results.json`` and
renders ``docs/durability.md``'s table from it (``durability_doc.py``).

    make durability                                        # all of them, 3 runs each
    .venv/bin/python tests/benchmarks/bench_durability.py --scenarios redis-power-loss --repeats 1
"""

from __future__ import annotations

import argparse
import csv
import json
import subprocess
import sys
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import durability_doc

ROOT = durability_doc.ROOT
SCENARIO_DIR = ROOT / "workload" / "scenarios"
RESULTS_DIR = ROOT / "results" / "bench-durability"
#: The power-loss scenarios, in the table's order: (scenario, system, the setting in words).
SCENARIOS = (
    ("redis-power-loss", "Redis", "single node, appendfsync everysec (its default)"),
    ("redis-power-loss-always", "Redis", "single node, appendfsync always"),
    ("postgresql-power-loss", "PostgreSQL", "single node, fsync on, synchronous_commit on"),
    ("postgresql-power-loss-async-commit", "PostgreSQL", "single node, synchronous_commit off"),
    ("kafka-power-loss", "Kafka", "3 nodes, acks=all, default flush"),
    ("kafka-power-loss-flush", "Kafka", "3 nodes, acks=all, flush.messages=1"),
    ("nats-power-loss", "NATS JetStream", "3 servers, 3 replicas, default sync interval"),
    ("rocketmq-power-loss", "RocketMQ", "single broker, ASYNC_FLUSH"),
    ("rocketmq-power-loss-sync-flush", "RocketMQ", "single broker, SYNC_FLUSH"),
    ("artemis-power-loss", "ActiveMQ Artemis", "single broker, NIO journal synced per send"),
)
#: A run that takes longer than this failed.
RUN_TIMEOUT = 900


def _say(message: str) -> None:
    print(message, flush=True)


def run_once(scenario: str, results: Path) -> dict[str, Any]:
    """One run of ``scenario`` into ``results``: what it measured, or why it did not."""
    path = SCENARIO_DIR / f"{scenario}.toml"
    try:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "workload.shell.cli",
                "run",
                str(path),
                "--results",
                str(results),
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=RUN_TIMEOUT,
        )
    except subprocess.TimeoutExpired:
        return {"error": f"no result within {RUN_TIMEOUT} s"}
    runs = sorted(p.parent for p in results.glob("*/context.json"))
    if not runs:
        return {"error": _last_line(done.stderr) or f"exit {done.returncode}, no run recorded"}
    return read_run(runs[-1]) | ({} if done.returncode == 0 else {"exit": done.returncode})


def read_run(run_dir: Path) -> dict[str, Any]:
    """A run's figures: its one point's summary, the durability it claims, its power cut."""
    context = json.loads((run_dir / "context.json").read_text())
    durability = context.get("broker", {}).get("durability") or {}
    summary = run_dir / "analysis" / "summary.csv"
    if not summary.exists():
        return {"run_id": run_dir.name, "error": "no summary (the analysis failed)"}
    with summary.open(newline="") as f:
        row = next(csv.DictReader(f))
    cut = json.loads((run_dir / "faults" / "p0.json").read_text())["faults"]
    disks = [d for f in cut if f["action"] == "power-loss" for d in f.get("power_cut", [])]
    return {
        "run_id": run_dir.name,
        "confirmed": _int(row["sent"]),
        "received": _int(row["received"]),
        "lost_on_power_loss": _int(row["lost_on_power_loss"]),
        "lost": _int(row["lost"]),
        "not_drained": _int(row["not_drained"]),
        "send_msgs_per_s": _float(row["send_msgs_per_s"]),
        "errors": _int(row.get("errors", "")),
        "written_through_bytes": sum(d.get("written_through_bytes", 0) for d in disks),
        "dropped_bytes": sum(d.get("dropped_bytes", 0) for d in disks),
        "fsync": durability.get("fsync"),
        "fsync_per_message": durability.get("fsync_per_message"),
    }


def _int(cell: str) -> int | None:
    return int(float(cell)) if cell not in (None, "") else None


def _float(cell: str) -> float | None:
    return float(cell) if cell not in (None, "") else None


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1].strip()[:300] if lines else ""


def entry(
    scenario: str,
    system: str,
    setting: str,
    runs: list[dict[str, Any]],
    when: str,
    checkout: tuple[str | None, bool | None],
) -> dict[str, Any]:
    """One scenario's entry of the results file (``checkout``: the commit when its first
    run began, and whether tracked files differed from it)."""
    commit, dirty = checkout
    claimed = next((r for r in runs if r.get("fsync")), {})
    return {
        "scenario": scenario,
        "system": system,
        "setting": setting,
        "fsync": claimed.get("fsync"),
        "fsync_per_message": claimed.get("fsync_per_message"),
        "date": when,
        "commit": commit,
        "dirty": dirty,
        "runs": runs,
    }


def _said(scenario: str, i: int, run: dict[str, Any]) -> str:
    if run.get("lost_on_power_loss") is None:
        return f"{scenario} run {i + 1}: no figure ({run.get('error', 'not counted')})"
    return (
        f"{scenario} run {i + 1}: {run['lost_on_power_loss']:,} of {run['confirmed']:,} "
        f"confirmed messages lost on power loss (lost {run['lost']}, not drained "
        f"{run['not_drained']}); send {run['send_msgs_per_s'] or 0:,.0f} msgs/s"
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="runs per scenario (3)")
    parser.add_argument(
        "--scenarios",
        default=",".join(s for s, _, _ in SCENARIOS),
        help="comma-separated scenario names (all power-loss scenarios by default)",
    )
    parser.add_argument(
        "--write-results",
        action="store_true",
        help="merge into docs/durability-results.json and render docs/durability.md's table",
    )
    args = parser.parse_args(argv)
    known = {s: (system, setting) for s, system, setting in SCENARIOS}
    chosen = [s.strip() for s in args.scenarios.split(",") if s.strip()]
    unknown = [s for s in chosen if s not in known]
    if unknown:
        parser.error(f"not a power-loss scenario here: {', '.join(unknown)}")
    stamp = datetime.now(UTC)
    out = RESULTS_DIR / stamp.strftime("%Y%m%dT%H%M%SZ")
    entries = []
    for scenario in chosen:
        runs, checkout = [], durability_doc.git_state()
        for i in range(args.repeats):
            runs.append(run_once(scenario, out / scenario / f"run{i + 1}"))
            _say(_said(scenario, i, runs[-1]))
        when = stamp.strftime("%Y-%m-%d")
        entries.append(entry(scenario, *known[scenario], runs, when, checkout))
        durability_doc.write(
            {"format": durability_doc.FORMAT, "scenarios": entries}, out / "results.json"
        )
    _say(f"results: {out / 'results.json'}")
    if args.write_results:
        merged = durability_doc.merge(durability_doc.load(), entries)
        durability_doc.write(merged)
        _say(f"rendered {durability_doc.render_page().relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
