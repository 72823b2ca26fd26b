"""Benchmark (not a test): what the resource sampler costs (:mod:`workload.engine.telemetry`).

The sampler reads, once a second, every process of a point's nodes and the machine. Here it
samples this machine's processes split into nodes the way a local run has them — three
broker nodes (with a JVM among them when one runs: its performance-data file is read too)
and three client nodes — plus the machine, for ``--seconds``; the figure is the CPU the
sampling took, as a share of one core (the target is ≤ 1 %), and the time one sample takes.

Each broker node's data directory is one made here with ``--data-files`` files (a broker's
segments and indexes; 400 is a 100-partition Kafka log), so the figure does not depend on
what else lies on this machine's disk (the sampler measures a data directory's size every
few seconds by walking it).
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
from pathlib import Path

import psutil

from workload.engine.telemetry import Sampler, Target, process_groups


def targets(nodes: int, data_dirs: list[Path]) -> list[Target]:
    """This machine's processes (all but this one), dealt round-robin to ``nodes`` nodes:
    as many processes as the machine has, with every JVM's counters. Found again at every
    sample, by process group, as a local run finds its broker nodes'. The first half are
    broker nodes, each with its data directory; client nodes have none (as in a local run)."""
    groups = process_groups()
    own = psutil.Process().pid
    pids = sorted(p for members in groups.values() for p in members if p != own)
    return [
        Target(
            "broker" if i < len(data_dirs) else "receiver",
            f"node-{i}",
            tuple(pids[i::nodes]),
            data_dirs[i] if i < len(data_dirs) else None,
        )
        for i in range(nodes)
    ]


def make_data_dirs(root: Path, count: int, files: int) -> list[Path]:
    """``count`` data directories under ``root``, each with ``files`` small files spread
    over a directory per 20 (as a broker keeps a directory per partition)."""
    dirs = []
    for n in range(count):
        data = root / f"broker-{n}"
        for f in range(files):
            part = data / f"partition-{f // 20}"
            part.mkdir(parents=True, exist_ok=True)
            (part / f"{f:020d}.log").write_bytes(b"x" * 4096)
        dirs.append(data)
    return dirs


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--seconds", type=float, default=20.0)
    parser.add_argument("--nodes", type=int, default=6)
    parser.add_argument("--data-files", type=int, default=400, help="files per broker node")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-telemetry-") as root:
        data_dirs = make_data_dirs(Path(root), args.nodes // 2, args.data_files)
        processes = sum(len(t.pids) for t in targets(args.nodes, data_dirs))
        sampler = Sampler(
            "bench", 0, lambda: targets(args.nodes, data_dirs), 1.0, host_data_dir=Path(root)
        )
        start_cpu, start = cpu_seconds(), time.monotonic()
        sampler.start()
        time.sleep(args.seconds)
        rows = sampler.stop()
        cpu, wall = cpu_seconds() - start_cpu, time.monotonic() - start
    samples = max(1, len({r["second"] for r in rows}))
    print(
        f"telemetry sampler: {args.nodes} nodes, {processes} processes, "
        f"{args.data_files} files per broker data directory, {wall:.0f} s: "
        f"{100 * cpu / wall:.2f} % of one core ({1000 * cpu / samples:.1f} ms CPU per sample, "
        f"{len(rows)} rows){' — ' + sampler.failure if sampler.failure else ''}"
    )


if __name__ == "__main__":
    main()
