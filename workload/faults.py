"""A scenario's faults during a local run: performed on the broker node processes at their
times, and written down as a timeline for the analysis.

For each sweep point a :class:`FaultScheduler` runs in a thread of its own. Its clock
starts when the coordinator first hears of a confirmed message (node processes report
once a second, so up to about a second after the first one); each fault's ``at`` and
``until`` count from there. It asks the cluster which node ``"leader"`` or ``"follower"``
names at that moment (:meth:`~brokers.base.LocalCluster.fault_target`), acts on it
(:meth:`~brokers.base.LocalCluster.fault`, :meth:`~brokers.base.LocalCluster.recover`) and
keeps the node in :meth:`FaultScheduler.declared_down` while it is down by declaration,
so that the runner does not count its death as a failure. A node still down when the
point ends is brought back before the next point (not after the last one: the cluster
stops then anyway).

The timeline of a point — the wall-clock time (``time.time_ns()``) of each action — is
``faults/p<point>.json`` in the run directory (:class:`~workload.model.faults.PointTimeline`).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

from brokers import registry
from brokers.base import Destination, FaultSupport, LocalCluster
from workload.model.errors import first_line
from workload.model.faults import FaultRecord, FaultSpec, PointTimeline
from workload.model.scenario import Scenario

#: How long a node brought back between points may take to be ready.
RESTORE_TIMEOUT = 180.0

Console = Callable[[str], None]


def planned(faults: list[FaultSpec], fails_over: bool) -> list[FaultRecord]:
    """A point's fault records before any fault began (what the scenario declares)."""
    return [
        FaultRecord(
            index=i,
            action=f.action,
            selector=str(f.node),
            at_s=f.at,
            until_s=f.until,
            fails_over=fails_over,
        )
        for i, f in enumerate(faults)
    ]


def schedule(faults: list[FaultSpec]) -> list[tuple[float, int, bool]]:
    """(seconds after the start of sending, fault, True to begin / False to end), in order."""
    return sorted(
        [(f.at, i, True) for i, f in enumerate(faults)]
        + [(f.until, i, False) for i, f in enumerate(faults) if f.until is not None]
    )


class FaultScheduler:
    """Performs one sweep point's faults on the cluster (see the module's description)."""

    def __init__(
        self,
        faults: list[FaultSpec],
        cluster: LocalCluster,
        support: FaultSupport,
        destination: Destination,
        point: int,
        console: Console,
    ) -> None:
        self.cluster = cluster
        self.destination = destination
        self.point = point
        self.console = console
        self.records = planned(faults, support.fails_over)
        self.selectors = [f.node for f in faults]
        #: (seconds after the start of sending, fault, True to begin / False to end it).
        self.plan = schedule(faults)
        #: Problems that fail the run: a fault not performed, a node not brought back.
        self.errors: list[str] = []
        self.sending_ns: int | None = None
        self._started = 0.0
        self._sending = threading.Event()
        self._done = threading.Event()
        self._lock = threading.Lock()
        self._down: set[str] = set()
        self._thread = threading.Thread(target=self._run, name=f"faults-p{point}", daemon=True)
        self._thread.start()

    def sending_started(self) -> None:
        """The first confirmed message was reported: the faults' clock starts (once)."""
        if not self._sending.is_set():
            self.sending_ns = time.time_ns()
            self._started = time.monotonic()
            self._sending.set()

    def declared_down(self) -> set[str]:
        """Nodes down by declaration right now (their death is no failure)."""
        with self._lock:
            return set(self._down)

    def _run(self) -> None:
        while not self._sending.wait(0.25):
            if self._done.is_set():
                return
        for seconds, i, begins in self.plan:
            if self._done.wait(max(0.0, self._started + seconds - time.monotonic())):
                return
            if begins:
                self._begin(i)
            elif self.records[i].began_ns is not None:
                self._end(i, self._recover(i, 0.0))

    def _begin(self, i: int) -> None:
        record = self.records[i]
        try:
            target = self.cluster.fault_target(self.selectors[i], self.destination)
            record.node, record.leader = target.name, target.leader
            with self._lock:  # declared before it happens: the runner never sees it undeclared
                self._down.add(target.name)
            record.began_ns = time.time_ns()
            self.cluster.fault(target.name, record.action)
        except Exception as exc:
            record.began_ns = None
            record.error = f"not performed: {first_line(exc)}"
            self.errors.append(f"fault {i} ({record.describe()}) was {record.error}")
            with self._lock:
                self._down.discard(record.node)
            return
        role = "leader" if record.leader else "not the leader"
        self.console(f"  fault {i}: {record.action} {record.node} ({role})")

    def _recover(self, i: int, wait: float) -> int | None:
        """Bring the node of fault ``i`` back; the time it was, or None when it failed."""
        record = self.records[i]
        issued = time.time_ns()
        try:
            self.cluster.recover(record.node, record.action, wait)
        except Exception as exc:
            record.error = f"{record.node} could not be brought back: {first_line(exc)}"
            self.errors.append(f"fault {i} ({record.describe()}): {record.error}")
            return None
        with self._lock:
            self._down.discard(record.node)
        return issued

    def _end(self, i: int, when: int | None) -> None:
        record = self.records[i]
        record.ended_ns = when
        if when is not None:
            self.console(f"  fault {i}: {record.node} back")

    def finish(self, restore: bool, complete: bool) -> PointTimeline:
        """Stop the clock; bring back nodes still down when ``restore`` (another point
        follows); with ``complete`` (the point was not interrupted) a fault that never
        began is an error. The point's timeline."""
        self._done.set()
        self._thread.join()
        for record in self.records:
            if record.began_ns is None and not record.error and complete:
                record.error = "not performed: the point ended first"
                self.errors.append(f"fault {record.index} ({record.describe()}) was {record.error}")
            elif restore and record.down_at_end and not record.error:
                record.restored_ns = self._recover(record.index, RESTORE_TIMEOUT)
        return PointTimeline(point=self.point, sending_ns=self.sending_ns, faults=self.records)


def start_faults(
    scenario: Scenario,
    cluster: LocalCluster | None,
    destination: Destination,
    point: int,
    console: Console,
) -> FaultScheduler | None:
    """A scheduler for the point's faults, or None when the scenario declares none."""
    if not scenario.faults or cluster is None:
        return None
    local = registry.get(scenario.broker.system).local
    support = local.fault_support(scenario.broker.topology) if local is not None else None
    assert support is not None  # the scenario was validated against it
    return FaultScheduler(scenario.faults, cluster, support, destination, point, console)
