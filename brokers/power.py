"""Local broker nodes that can lose power: each node's data directory on a disk the run
mounts over it in place (the lazy filesystem, :mod:`brokers.lazyfs`), so that a
``power-loss`` fault drops exactly what the nodes did not sync (``docs/durability.md``).

A cluster's nodes get their data directories inside the system's ``start``, so the run
cannot mount them beforehand; and :mod:`brokers.local` cannot import :mod:`brokers.lazyfs`
(which imports it). The run therefore says how data directories are mounted through
:data:`DISKS` while the cluster starts (:func:`data_on`); a :class:`~brokers.local.ProcessCluster`
made meanwhile keeps them as its :class:`PowerSupply`, and mounts the ``data_dir`` of
each node it adds before starting it. Without :data:`DISKS` (every run without a
power-loss fault) nothing is mounted and nothing changes.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable, Iterator, Sequence
from contextvars import ContextVar
from pathlib import Path
from typing import Any, Protocol

from brokers.errors import BrokerError
from brokers.watchdog import processes_of


class Disk(Protocol):
    """One node's mounted data directory (a :class:`~brokers.lazyfs.LazyMount`)."""

    def start(self) -> None:
        """Mount it (again, after a cut): only what was durable is there."""
        ...

    def unmount(self) -> dict[str, Any]:
        """Unmount it for good; safe to call twice."""
        ...


class Disks(Protocol):
    """How a run mounts its nodes' data directories (:class:`~brokers.lazyfs.LazyDisks`)."""

    def mount(self, directory: Path) -> Disk:
        """``directory`` mounted over in place, before its node starts."""
        ...

    def cut(self, disks: Sequence[Disk], then: Callable[[], None]) -> list[dict[str, Any]]:
        """Cut every disk's power at the same instant, call ``then`` at once (the nodes
        die), and return each disk's final status (what it dropped, and the model)."""
        ...


#: How the data directories of clusters started now are mounted (None: as they are).
DISKS: ContextVar[Disks | None] = ContextVar("brokerbench_disks", default=None)


@contextlib.contextmanager
def data_on(disks: Disks | None) -> Iterator[None]:
    """Clusters made inside this block keep their nodes' data on ``disks``."""
    token = DISKS.set(disks)
    try:
        yield
    finally:
        DISKS.reset(token)


class PowerSupply:
    """The disks of one cluster's nodes, by node name: mounted as the nodes are added,
    cut together, mounted again, unmounted with the cluster."""

    def __init__(self, disks: Disks) -> None:
        self.disks = disks
        self.mounted: dict[str, Disk] = {}
        #: The final statuses of the latest cut, one per node (``node`` added).
        self.last_cut: list[dict[str, Any]] = []

    def mount(self, name: str, directory: Path) -> None:
        if name not in self.mounted:
            self.mounted[name] = self.disks.mount(directory)

    def cut(self, names: Sequence[str], groups: Sequence[int]) -> list[dict[str, Any]]:
        """Cut the power of the nodes ``names`` at one instant, and at once SIGKILL every
        process of their process ``groups`` and every descendant of one — also those in
        sessions of their own (PostgreSQL's backends: one left alive may wait for ever on
        a lock a killed process held)."""
        unmounted = [name for name in names if name not in self.mounted]
        if unmounted:
            raise BrokerError(
                f"{', '.join(unmounted)} keeps no data directory on the lazy filesystem: "
                "it cannot lose power here"
            )
        doomed = processes_of(set(groups))  # found before the cut: it must not wait for this
        disks = [self.mounted[name] for name in names]
        statuses = self.disks.cut(disks, lambda: _kill(doomed, groups))
        _gone(doomed)
        self.last_cut = [
            {"node": name, **status} for name, status in zip(names, statuses, strict=True)
        ]
        return self.last_cut

    def restore(self, names: Sequence[str]) -> None:
        """The power is back: mount each node's data directory again."""
        for name in names:
            self.mounted[name].start()

    def unmount(self) -> None:
        for disk in self.mounted.values():
            disk.unmount()


def _kill(pids: set[int], groups: Sequence[int]) -> None:
    for group in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(group, signal.SIGKILL)
    for pid in pids:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)


def _gone(pids: set[int], timeout: float = 10.0) -> None:
    """Wait until no process of ``pids`` exists, reaped zombies included: a server that
    finds the process of its lock file (``postmaster.pid``) still there refuses to start.
    One never reaped (by an init that reaps nothing) is waited for ``timeout`` at most."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and any(_exists(pid) for pid in pids):
        time.sleep(0.02)


def _exists(pid: int) -> bool:
    """Whether ``pid`` still exists, but for a zombie child of this process (the node's
    leader: its :class:`~brokers.local.ManagedProcess` reaps it)."""
    try:
        state, ppid = Path(f"/proc/{pid}/stat").read_bytes().rsplit(b")", 1)[1].split()[:2]
    except (OSError, ValueError):
        return False
    return not (state == b"Z" and int(ppid) == os.getpid())
