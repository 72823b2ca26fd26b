"""Benchmark (not a test): what the lazy filesystem (:mod:`brokers.lazyfs`) costs a broker
that syncs every write.

Two files are appended ``--writes`` times with ``--size`` bytes, each write followed by an
fdatasync — one in a plain directory on the disk, one through a lazy filesystem mounted over
a directory beside it — twice: by turns (one write to each, so both see the machine's load
of the same instant), then in runs of ``--run`` writes to one file, then to the other. The
figures are the median, mean and 90th percentile time per write + fdatasync, and the mean
time per write alone (no sync: what the round trip through the filesystem costs). The
directories are made under the artifact cache (on the disk, not a tmpfs) and removed after.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from brokers import lazyfs
from brokers.jvm import cache_dir


def synced(dirs: list[Path], writes: int, size: int, turns: int) -> list[list[float]]:
    """Seconds of each append of ``size`` bytes + fdatasync to a file in each of ``dirs``:
    ``turns`` appends to one, then as many to the next, and round again, ``writes`` to each
    in all (a turn of 1 alternates every write: both see the machine's load of the same
    instant)."""
    data = b"x" * size
    flags = os.O_WRONLY | os.O_CREAT | os.O_APPEND
    fds = [os.open(d / "log", flags, 0o644) for d in dirs]
    times: list[list[float]] = [[] for _ in dirs]
    try:
        for _ in range(writes // turns):
            for fd, spent in zip(fds, times, strict=True):
                for _ in range(turns):
                    start = time.perf_counter()
                    os.write(fd, data)
                    os.fdatasync(fd)
                    spent.append(time.perf_counter() - start)
    finally:
        for fd in fds:
            os.close(fd)
        for d in dirs:
            (d / "log").unlink()
    return times


def unsynced(where: Path, writes: int, size: int) -> float:
    """Seconds per append of ``size`` bytes to a file in ``where``, no sync."""
    data = b"x" * size
    fd = os.open(where / "raw", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    try:
        start = time.perf_counter()
        for _ in range(writes):
            os.write(fd, data)
        return (time.perf_counter() - start) / writes
    finally:
        os.close(fd)
        (where / "raw").unlink()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--writes", type=int, default=2000, help="synced writes per round")
    parser.add_argument("--size", type=int, default=100, help="bytes per write")
    parser.add_argument("--run", type=int, default=500, help="writes per side in a row")
    args = parser.parse_args()
    reason = lazyfs.missing()
    if reason and "not built" in reason and lazyfs.go_binary() is not None:
        lazyfs.build()
        reason = lazyfs.missing()
    if reason:
        print(f"lazy filesystem benchmark skipped: {reason}", file=sys.stderr)
        return 2
    top = Path(tempfile.mkdtemp(prefix="bench-", dir=cache_dir("lazyfs")))
    try:
        plain, backing, mount = top / "plain", top / "backing", top / "mount"
        for d in (plain, backing, mount):
            d.mkdir()
        with lazyfs.LazyMount(backing, mount):
            sides = [plain, mount]
            runs = {
                "by turns": synced(sides, args.writes, args.size, 1),
                f"in runs of {args.run}": synced(sides, args.writes, args.size, args.run),
            }
            alone = [unsynced(d, args.writes * 10, args.size) for d in sides]
    finally:
        shutil.rmtree(top, ignore_errors=True)
    report(args, runs, alone)
    return 0


def report(
    args: argparse.Namespace, runs: dict[str, list[list[float]]], alone: list[float]
) -> None:
    print(
        f"lazy filesystem: {args.writes:,} appends of {args.size} bytes, each followed by "
        "fdatasync, to a plain file on the disk and to a lazy one (ms per write)"
    )
    print(f"{'':34}{'write + fdatasync':^27}{'write alone':>13}")
    print(f"{'':34}{'median':>9}{'mean':>9}{'p90':>9}{'mean':>13}")
    for order, (plain, lazy) in runs.items():
        for name, spent, bare in (("plain disk", plain, alone[0]), ("lazy", lazy, alone[1])):
            ms = sorted(1000 * s for s in spent)
            p90 = ms[int(len(ms) * 0.9)]
            print(
                f"{order:16}{name:18}{statistics.median(ms):>9.3f}"
                f"{statistics.fmean(ms):>9.3f}{p90:>9.3f}{1000 * bare:>13.4f}"
            )
        extra = 1000 * (statistics.median(lazy) - statistics.median(plain))
        print(f"{order:16}{'lazy - plain':18}{extra:>+9.3f}")


if __name__ == "__main__":
    sys.exit(main())
