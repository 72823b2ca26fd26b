"""CPU isolation of a local run (``[broker] cpus = N``, docs/verdict.md): the broker's
processes on N cores of this machine, the client nodes on the rest.

A process inherits the CPU affinity of the thread that started it, its threads and
children too. So the runner starts the broker from a thread pinned to the broker's cores
(:meth:`CpuPins.broker_side`), then pins its own thread to the clients' cores for the rest
of the run (:meth:`CpuPins.clients_side`): the node processes it starts afterwards, and the
threads it starts (the sampler, the fault clock), run there. A fault that restarts a broker
node does so on the broker's cores again (:class:`workload.engine.faults.ClusterFaults`).
``os.sched_setaffinity`` sets one thread's set, not a process's: nothing else of this
process moves.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

#: The cores this process could use when it started, before any thread of it was pinned:
#: every split is made of them, so the runner and a fault clock make the same one.
STARTED_ON = tuple(sorted(os.sched_getaffinity(0)))


@dataclass(frozen=True)
class CpuPins:
    """Which cores the broker and the clients get: the first ``cpus`` of those this
    process could use when it started (:data:`STARTED_ON`), and the rest."""

    broker: tuple[int, ...]
    clients: tuple[int, ...]

    @classmethod
    def of(cls, cpus: int | None) -> CpuPins | None:
        """The split for ``[broker] cpus`` (None: unset). The scenario's checks keep it
        under the cores of this machine (:func:`workload.model.host_limits.host_problems`)."""
        if cpus is None:
            return None
        if not 1 <= cpus < len(STARTED_ON):
            raise ValueError(f"broker.cpus = {cpus}: this process may use {len(STARTED_ON)} cores")
        return cls(STARTED_ON[:cpus], STARTED_ON[cpus:])

    def broker_side(self) -> contextlib.AbstractContextManager[None]:
        """This thread on the broker's cores meanwhile (what it starts stays there)."""
        return _on(self.broker)

    def clients_side(self) -> contextlib.AbstractContextManager[None]:
        """This thread on the clients' cores meanwhile (what it starts stays there)."""
        return _on(self.clients)

    @property
    def cores(self) -> tuple[int, int]:
        """How many cores each side has: the broker's, the clients'."""
        return len(self.broker), len(self.clients)

    def words(self) -> str:
        """The split as the run's first lines say it."""
        return f"the broker on {_list(self.broker)}, the clients on {_list(self.clients)}"

    def describe(self) -> dict[str, Any]:
        """What the run context records (the broker's ``cpus``): the cores of each side."""
        return {"broker": list(self.broker), "clients": list(self.clients)}


def _list(cores: tuple[int, ...]) -> str:
    return ("core " if len(cores) == 1 else "cores ") + ", ".join(str(c) for c in cores)


@contextlib.contextmanager
def broker_side(pins: CpuPins | None) -> Iterator[None]:
    """:meth:`CpuPins.broker_side`, or nothing without pins."""
    if pins is None:
        yield
        return
    with pins.broker_side():
        yield


@contextlib.contextmanager
def _on(cores: Iterable[int]) -> Iterator[None]:
    """The calling thread on ``cores`` for the block, then back where it was."""
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, cores)
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)
