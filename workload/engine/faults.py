"""A scenario's faults at one sweep point: one clock that performs them at their times
through an actuator, and writes them down as a timeline for the analysis.

For each sweep point a :class:`FaultClock` starts when sending starts (locally: when the
coordinator first hears of a confirmed message — node processes report once a second, so
up to about a second after the first one; on AWS: when the coordinating machine starts its
own sender node). Each fault's ``at`` and ``until`` count from there. At ``at`` the clock
asks its :class:`Actuator` which node the fault's selector names at that moment, keeps that
node in :meth:`FaultClock.declared_down` (so that the runner does not count its death as a
failure) and has the actuator begin the fault; at ``until`` it has the actuator end it —
locally, the node is started again and awaited until it is ready, so an action due meanwhile
happens once it is (one at a time; the timeline has the real times). A fault that begins
late so keeps its declared length: its ``until`` moves by as much as it was late, and its
record says how late (:attr:`~workload.model.faults.FaultRecord.late_s`); one that still
could not run as declared (the point ended first) says so in the output
(:meth:`~workload.model.faults.FaultRecord.shortfall`).
When the point ends, :meth:`FaultClock.finish` stops the clock, lets the actuator fill in
what it learns only then, and brings a node still down back when another point follows
(not after the last one: the cluster stops then anyway).

Two actuators: :class:`ClusterFaults` acts on the node processes of a local cluster
(:meth:`~brokers.base.LocalCluster.fault_target`, :meth:`~brokers.base.LocalCluster.fault`,
:meth:`~brokers.base.LocalCluster.recover`); on AWS,
:class:`workload.engine.aws.fault_driver.FaultMarkers` posts S3 markers the broker machines act on.

The timeline of a point — the wall-clock time (``time.time_ns()``) of each action — is
``faults/p<point>.json`` in the run directory (:class:`~workload.model.faults.PointTimeline`).
"""

from __future__ import annotations

import heapq
import threading
import time
from collections.abc import Callable, Collection
from typing import Literal, Protocol

from brokers import registry
from brokers.base import ALL_NODES, Destination, FaultTarget, LocalCluster
from brokers.local import ProcessCluster
from workload.engine.cpu_pins import CpuPins, broker_side
from workload.model.errors import first_line
from workload.model.faults import FaultRecord, FaultSpec, PointTimeline
from workload.model.scenario import Scenario

#: How long a node brought back (at its fault's ``until``, or between points) may take to be
#: ready: the next fault begins no earlier (faults happen one at a time, on a whole cluster).
RESTORE_TIMEOUT = 180.0

Console = Callable[[str], None]
#: Why a fault ends: its ``until`` came, or the point ended with its node down.
Why = Literal["until", "restore"]


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


class Actuator(Protocol):
    """How a :class:`FaultClock`'s faults are performed. Each method raises when it cannot
    do what it is asked; the clock writes the error into the fault's record."""

    def target(self, selector: str | int, down: set[str]) -> FaultTarget:
        """The node ``selector`` names now (``down``: the nodes down by earlier faults)."""
        ...

    def begin(self, record: FaultRecord) -> int | None:
        """Begin the fault on ``record.node``: when it began, or None when that is known
        only once the point ends (:meth:`settle`)."""
        ...

    def end(self, record: FaultRecord, why: Why) -> int | None:
        """Bring ``record.node`` back: when, or None when known only at :meth:`settle`."""
        ...

    def settle(self, records: list[FaultRecord]) -> None:
        """The clock stopped: fill in the times known only now (errors into the records)."""
        ...


class FaultClock:
    """Performs one sweep point's faults at their times through an actuator (see the
    module); ``say`` is told what happens as it happens."""

    def __init__(
        self,
        point: int,
        faults: list[FaultSpec],
        fails_over: bool,
        actuator: Actuator,
        say: Console,
        every: Collection[str] = (),
    ) -> None:
        self.point = point
        self.actuator = actuator
        self.say = say
        self.records = planned(faults, fails_over)
        self.selectors = [f.node for f in faults]
        #: The nodes a power-loss of ``"all"`` takes down.
        self.every = set(every)
        #: (seconds after the start of sending, fault, True to begin / False to end it).
        self.plan = schedule(faults)
        #: Problems that fail the run: a fault not performed, a node not brought back.
        self.errors: list[str] = []
        #: When sending started: the clock's zero (wall clock, and monotonic).
        self.sending_ns: int | None = None
        self._started = 0.0
        self._begun: set[int] = set()
        self._done = threading.Event()
        self._lock = threading.Lock()
        self._down: set[str] = set()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Sending started: the clock starts (the first call only) and the faults follow
        at their times."""
        if self._thread is not None:
            return
        self.sending_ns = time.time_ns()
        self._started = time.monotonic()
        self._thread = threading.Thread(target=self._run, name=f"faults-p{self.point}", daemon=True)
        self._thread.start()

    def declared_down(self) -> set[str]:
        """Nodes down by declaration right now (their death is no failure)."""
        with self._lock:
            return set(self._down)

    def _run(self) -> None:
        """Begin and end the faults at their times; a fault that begins late (its node, or
        a peer, was still being brought back) ends as late, keeping its declared length."""
        due = [step for step in self.plan if step[2]]  # the ends follow their beginnings
        heapq.heapify(due)
        while due:
            seconds, i, begins = heapq.heappop(due)
            if self._done.wait(max(0.0, self._started + seconds - time.monotonic())):
                return
            if not begins:
                self.records[i].ended_ns = self._end(i, "until")
                continue
            late = time.monotonic() - self._started - seconds
            self._begin(i)
            record = self.records[i]
            if i in self._begun and late >= 0.05:
                record.late_s = round(late, 1)
            if i in self._begun and record.until_s is not None:
                heapq.heappush(due, (record.until_s + max(0.0, late), i, False))
            elif i in self._begun and record.action == "power-loss":  # back at once
                heapq.heappush(due, (seconds + max(0.0, late), i, False))

    def _begin(self, i: int) -> None:
        record = self.records[i]
        try:
            target = self.actuator.target(self.selectors[i], self.declared_down())
            record.node, record.leader = target.name, target.leader
            with self._lock:  # declared before it happens: the runner never sees it undeclared
                self._down |= self._nodes(target.name)
            record.began_ns = self.actuator.begin(record)
        except Exception as exc:  # no leader known, the node refused, S3 refused the marker …
            record.error = f"not performed: {first_line(exc)}"
            self.errors.append(f"fault {i} ({record.describe()}) was {record.error}")
            self.say(f"fault {i} ({record.describe()}) {record.error}")
            with self._lock:
                self._down -= self._nodes(record.node)
            return
        self._begun.add(i)
        role = "leader" if record.leader else "not the leader"
        self.say(f"fault {i}: {record.action} {record.node} ({role})")

    def _nodes(self, name: str) -> set[str]:
        return set(self.every) if name == ALL_NODES else {name}

    def _end(self, i: int, why: Why) -> int | None:
        """Bring the node of fault ``i`` back; when it was (None: it failed, or is known
        only at :meth:`Actuator.settle`)."""
        record = self.records[i]
        try:
            when = self.actuator.end(record, why)
        except Exception as exc:
            record.error = f"{record.node} could not be brought back: {first_line(exc)}"
            self.errors.append(f"fault {i} ({record.describe()}): {record.error}")
            return None
        with self._lock:
            self._down -= self._nodes(record.node)
        if when is not None:
            self.say(f"fault {i}: {record.node} back")
        return when

    def finish(self, restore: bool, complete: bool = True) -> PointTimeline:
        """Stop the clock; bring back nodes still down when ``restore`` (another point
        follows); with ``complete`` (the point was not interrupted) a fault that never
        began is an error. The point's timeline."""
        self._done.set()
        if self._thread is not None:
            self._thread.join()
        self.actuator.settle(self.records)
        for i, record in enumerate(self.records):
            if i not in self._begun and not record.error and complete:
                record.error = "not performed: the point ended first"
                self.errors.append(f"fault {i} ({record.describe()}) was {record.error}")
            elif restore and record.down_at_end and not record.error:
                record.restored_ns = self._end(i, "restore")
        return PointTimeline(point=self.point, sending_ns=self.sending_ns, faults=self.records)


class ClusterFaults:
    """The actuator of a local run: acts on the node processes of the cluster, where
    ``"leader"`` and ``"follower"`` are what the cluster says about ``destination``."""

    def __init__(
        self, cluster: LocalCluster, destination: Destination, pins: CpuPins | None = None
    ) -> None:
        self.cluster = cluster
        self.destination = destination
        #: ``[broker] cpus``: a node started again starts on the broker's cores.
        self.pins = pins

    def target(self, selector: str | int, down: set[str]) -> FaultTarget:
        return self.cluster.fault_target(selector, self.destination)

    def begin(self, record: FaultRecord) -> int:
        issued = time.time_ns()
        with broker_side(self.pins):  # a power-loss without until restarts the node at once
            self.cluster.fault(record.node, record.action)
        if record.action == "power-loss" and isinstance(self.cluster, ProcessCluster):
            power = self.cluster.power
            record.power_cut = power.last_cut if power is not None else []
        return issued

    def end(self, record: FaultRecord, why: Why) -> int:
        """Bring the node back and wait until it is ready (accepts connections again): a
        fault planned meanwhile begins once it is — a node still starting when the next
        fault strikes its peers may fail to start at all. The time is the restart's."""
        issued = time.time_ns()
        with broker_side(self.pins):
            self.cluster.recover(record.node, record.action, RESTORE_TIMEOUT)
        return issued

    def settle(self, records: list[FaultRecord]) -> None:
        pass  # every time was known when it happened


def start_faults(
    scenario: Scenario,
    cluster: LocalCluster | None,
    destination: Destination,
    point: int,
    console: Console,
) -> FaultClock | None:
    """The clock of a local point's faults, or None when the scenario declares none."""
    if not scenario.faults or cluster is None:
        return None
    local = registry.get(scenario.broker.system).local
    support = local.fault_support(scenario.broker.topology) if local is not None else None
    assert support is not None  # the scenario was validated against it
    actuator = ClusterFaults(cluster, destination, CpuPins.of(scenario.broker.cpus))
    say: Console = lambda line: console(f"  {line}")  # noqa: E731
    every = [node.name for node in cluster.processes()]
    return FaultClock(point, scenario.faults, support.fails_over, actuator, say, every)
