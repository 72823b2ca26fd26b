"""Benchmark (not a test): does a client node's memory stay flat over a long run?

Runs a soak with ``brokerbench run`` — a shipped scenario (Redis by default), open loop at a
steady rate, the broker started here, its records flushed every ``--flush`` seconds — for
``--minutes`` (10 by default), then reads every client node's resident memory from the run's
telemetry (one row a second) and prints, per node, its memory after the warm-up and at the
end and its growth per hour: the slope of a least-squares line through its readings after
the first fifth of the run (start-up, pools and the clients' buffers filling). A recorder
that kept its records in memory grows with the messages it handled; one that flushes them
stays flat. ``--flush 3600`` is the comparison: nothing is flushed within a 10-minute run.

    python tests/benchmarks/bench_soak.py [--minutes 10] [--rate 1000] [--flush 10]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import tomllib
from pathlib import Path

import pyarrow.parquet as pq
import toml

ROOT = Path(__file__).resolve().parents[2]
SCENARIOS = ROOT / "workload" / "scenarios"


def scenario(base: Path, minutes: float, rate: float, flush: int, threads: int) -> dict:
    """The soak: ``base`` run open loop at ``rate`` msgs/s per sender worker for
    ``minutes``, one process per node, flushing every ``flush`` seconds."""
    loaded = tomllib.loads(base.read_text())
    loaded["name"] = "soak-bench"
    loaded["load"].update(
        threads=threads,
        sender_nodes=1,
        processes=1,
        rate=rate,
        duration=f"{minutes * 60:g}s",
        idle_timeout="10s",
    )
    loaded["measurement"] = {
        "warmup": "30s",
        "window": "60s",
        "step": "10s",
        "flush_interval": f"{flush}s",
    }
    return loaded


def growth(points: list[tuple[int, int]]) -> float:
    """Bytes per second: the least-squares slope of (second, bytes)."""
    n = len(points)
    mean_t = sum(t for t, _ in points) / n
    mean_b = sum(b for _, b in points) / n
    var = sum((t - mean_t) ** 2 for t, _ in points)
    if var == 0:
        return 0.0
    return sum((t - mean_t) * (b - mean_b) for t, b in points) / var


def client_memory(run_dir: Path) -> dict[str, list[tuple[int, int]]]:
    """Each client node's (second, resident bytes) readings."""
    rows = pq.read_table(
        run_dir / "raw" / "telemetry", columns=["role", "node", "second", "rss_bytes"]
    ).to_pylist()
    out: dict[str, list[tuple[int, int]]] = {}
    for row in rows:
        if row["role"] in ("sender", "receiver") and row["rss_bytes"]:
            out.setdefault(row["node"], []).append((row["second"], row["rss_bytes"]))
    return {node: sorted(found) for node, found in sorted(out.items())}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=10.0, help="how long senders send")
    parser.add_argument("--rate", type=float, default=1000.0, help="msgs/s per sender worker")
    parser.add_argument("--threads", type=int, default=2, help="workers per client node")
    parser.add_argument("--flush", type=int, default=10, help="flush_interval, seconds")
    parser.add_argument(
        "--scenario", type=Path, default=SCENARIOS / "redis-smoke.toml", help="the base scenario"
    )
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-soak-") as tmp:
        path = Path(tmp) / "soak.toml"
        path.write_text(
            toml.dumps(scenario(args.scenario, args.minutes, args.rate, args.flush, args.threads))
        )
        results = Path(tmp) / "results"
        command = [sys.executable, "-m", "workload.shell.cli", "run", str(path)]
        done = subprocess.run(
            [*command, "--results", str(results), "--no-analysis"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            print(done.stderr[-3000:], file=sys.stderr)
            return 1
        (run_dir,) = (p.parent for p in results.glob("*/context.json"))
        chunks = len(list(run_dir.glob("raw/received/*.c*.parquet")))
        memory = client_memory(run_dir)
    total = args.rate * args.threads
    print(
        f"soak: {args.scenario.name}, {args.minutes:g} min at {total:,.0f} msgs/s, "
        f"flush every {args.flush} s ({chunks} received chunks written)"
    )
    print(f"{'node':<12} {'RSS after warm-up':>18} {'RSS at end':>12} {'growth/hour':>13}")
    for node, readings in memory.items():
        settled = readings[len(readings) // 5 :]
        slope = growth(settled) * 3600
        first, last = settled[0][1], settled[-1][1]
        print(
            f"{node:<12} {first / 2**20:>15.1f} MiB {last / 2**20:>8.1f} MiB "
            f"{slope / 2**20:>+9.1f} MiB"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
