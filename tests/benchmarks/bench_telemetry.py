"""Benchmark (not a test): what the resource sampler costs (:mod:`workload.telemetry`).

The sampler reads, once a second, every process of a point's nodes and the machine. Here it
samples this machine's processes split into nodes the way a local run has them — three
broker nodes (with a JVM among them when one runs: its performance-data file is read too)
and three client nodes — plus the machine, for ``--seconds``; the figure is the CPU the
sampling took, as a share of one core (the target is ≤ 1 %), and the time one sample takes.
"""

from __future__ import annotations

import argparse
import resource
import time
from pathlib import Path

import psutil

from workload.telemetry import Sampler, Target, process_groups


def targets(nodes: int) -> list[Target]:
    """This machine's processes (all but this one), dealt round-robin to ``nodes`` nodes:
    as many processes as the machine has, with every JVM's counters. Found again at every
    sample, by process group, as a local run finds its broker nodes'."""
    groups = process_groups()
    own = psutil.Process().pid
    pids = sorted(p for members in groups.values() for p in members if p != own)
    return [
        Target(
            "broker" if i < nodes // 2 else "receiver",
            f"node-{i}",
            tuple(pids[i::nodes]),
            Path("/tmp"),
        )
        for i in range(nodes)
    ]


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--nodes", type=int, default=6)
    args = parser.parse_args()
    processes = sum(len(t.pids) for t in targets(args.nodes))
    sampler = Sampler("bench", 0, lambda: targets(args.nodes), 1.0, host_data_dir=Path("/tmp"))
    start_cpu, start = cpu_seconds(), time.monotonic()
    sampler.start()
    time.sleep(args.seconds)
    rows = sampler.stop()
    cpu, wall = cpu_seconds() - start_cpu, time.monotonic() - start
    samples = max(1, len({r["second"] for r in rows}))
    print(
        f"telemetry sampler: {args.nodes} nodes, {processes} processes, {wall:.0f} s: "
        f"{100 * cpu / wall:.2f} % of one core ({1000 * cpu / samples:.1f} ms CPU per sample, "
        f"{len(rows)} rows){' — ' + sampler.failure if sampler.failure else ''}"
    )


if __name__ == "__main__":
    main()
