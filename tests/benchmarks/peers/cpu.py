"""CPU time of process trees, read from ``/proc``.

A tree's CPU time is the sum of ``utime + stime + cutime + cstime`` over its live
processes: a child that exited and was reaped is in its parent's ``cutime``/``cstime``,
a live child in its own fields, so nothing is counted twice and short-lived children
(PostgreSQL backends, say) are not lost between two readings. Readings taken while a
tool runs give the CPU used within any part of the run (e.g. only while it was sending).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class ProcStat:
    """The fields of ``/proc/<pid>/stat`` this module needs."""

    pid: int
    ppid: int
    ticks: int  # utime + stime + cutime + cstime


def parse_stat(text: str) -> ProcStat:
    """One ``/proc/<pid>/stat`` line; the command name may hold spaces and parentheses."""
    pid = int(text.split(" ", 1)[0])
    rest = text[text.rfind(")") + 2 :].split()
    # rest[0] is field 3 (state): ppid is field 4, utime..cstime are fields 14..17.
    return ProcStat(pid=pid, ppid=int(rest[1]), ticks=sum(int(v) for v in rest[11:15]))


def _all_stats(proc: Path = PROC) -> dict[int, ProcStat]:
    stats = {}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = parse_stat((entry / "stat").read_text())
        except (OSError, ValueError, IndexError):
            continue  # exited while we looked
        stats[stat.pid] = stat
    return stats


def tree_cpu_seconds(roots: Iterable[int], proc: Path = PROC) -> float:
    """CPU seconds used so far by ``roots`` and all their live descendants."""
    stats = _all_stats(proc)
    children: dict[int, list[int]] = {}
    for stat in stats.values():
        children.setdefault(stat.ppid, []).append(stat.pid)
    seen: set[int] = set()
    todo = [pid for pid in roots if pid in stats]
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.add(pid)
        todo.extend(children.get(pid, []))
    return sum(stats[pid].ticks for pid in seen) / TICKS


def machine_busy_seconds(proc: Path = PROC) -> float:
    """CPU seconds the whole machine was not idle so far, over all cores.

    Counted as elapsed time × cores − idle − iowait: idle time is accounted exactly, while
    the user/system tick counts miss short bursts."""
    fields = (proc / "stat").read_text().split("\n", 1)[0].split()[1:]
    ticks = [int(v) for v in fields[:8]]
    idle = ticks[3] + ticks[4]
    return (sum(ticks) - idle) / TICKS


@dataclass(frozen=True)
class CpuSample:
    """CPU seconds used so far by the client and the broker process trees and by the whole
    machine, at one time."""

    at: float  # time.time()
    client: float
    broker: float
    machine: float = 0.0


def _at(samples: Sequence[CpuSample], t: float) -> tuple[float, float, float]:
    """Client, broker and machine CPU seconds at ``t``, interpolated between the samples
    around it."""
    for before, after in itertools.pairwise(samples):
        if before.at <= t <= after.at:
            span = after.at - before.at
            f = (t - before.at) / span if span else 0.0
            return (
                before.client + f * (after.client - before.client),
                before.broker + f * (after.broker - before.broker),
                before.machine + f * (after.machine - before.machine),
            )
    raise ValueError(f"{t} is outside the samples")


def usage_between(
    samples: Sequence[CpuSample], start: float, end: float
) -> tuple[float, float, float, float] | None:
    """Client CPU s, broker CPU s, wall s and machine CPU s between ``start`` and ``end``
    (clipped to the samples); None when the samples do not cover a useful part of it."""
    if len(samples) < 2:
        return None
    start, end = max(start, samples[0].at), min(end, samples[-1].at)
    if end - start <= 0:
        return None
    client0, broker0, machine0 = _at(samples, start)
    client1, broker1, machine1 = _at(samples, end)
    return client1 - client0, broker1 - broker0, end - start, machine1 - machine0
