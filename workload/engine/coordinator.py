"""The sequence of a run's sweep points, written once for every fleet of client nodes.

For each sweep point the coordinator prepares it (creates its queue or topic), releases
it to the point's sender and receiver nodes, lets it run — the scenario's faults act
during it — waits until every node of the point is done, ends the point's faults
(bringing a node still down back when another point follows) and collects every node's
status, naming the nodes that left none. Where the nodes run and how they hear of a
point is the :class:`Fleet`'s: processes on this machine
(:class:`workload.engine.local_fleet.LocalFleet`), or client machines on AWS that coordinate
through markers in the run's S3 prefix (:class:`workload.engine.aws.fleet.S3Fleet`).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Protocol

from workload.model.sweep import SweepPoint, estimated_seconds


@dataclass(frozen=True)
class SweepPlace:
    """A sweep point and its place in the run."""

    point: SweepPoint
    #: The points of the sweep (for a capacity search: the probes it may run at most).
    total: int
    #: The estimated seconds of the points after this one (:mod:`workload.model.sweep`).
    remaining_s: float = 0.0

    @property
    def position(self) -> str:
        """``point K (k of n)``: the point's number (from 0, as in every file and table of the
        run) and its place in the run, as the terminal shows them."""
        return f"point {self.point.index} ({self.point.index + 1} of {self.total})"

    @property
    def last(self) -> bool:
        """No point follows (a node still down after it need not be brought back)."""
        return self.point.index + 1 >= self.total


class Fleet(Protocol):
    """The client nodes of a run, as the coordinator drives them through one sweep point."""

    @property
    def stopped(self) -> bool:
        """The run stops here: no further point runs (interrupted, or failed)."""
        ...

    def prepare(self, place: SweepPlace) -> str | None:
        """Create the point's destination; None when done, else why it could not be."""
        ...

    def release(self, place: SweepPlace, problem: str | None) -> None:
        """Let the point's nodes run it — or, with ``problem``, tell them it cannot run."""
        ...

    def run(self, place: SweepPlace) -> None:
        """The point runs (its faults with it) until this machine's part of it ends."""
        ...

    def await_nodes(self, place: SweepPlace) -> None:
        """Wait until every node of the point is done (or given up on)."""
        ...

    def finish_faults(self, place: SweepPlace, restore: bool) -> None:
        """End the point's faults — bringing a node still down back when ``restore`` —
        and keep its timeline."""
        ...

    def collect(self, place: SweepPlace) -> None:
        """Gather every node's status of the point, naming those that left none."""
        ...


@dataclass
class Coordinator:
    """Runs sweep points one after another over a :class:`Fleet` (see the module)."""

    fleet: Fleet

    def run(self, places: Iterable[SweepPlace]) -> None:
        """Every point in order, until the fleet stops."""
        for place in places:
            self.point(place)
            if self.fleet.stopped:
                return

    def point(self, place: SweepPlace) -> None:
        """One sweep point, from its preparation to its nodes' statuses."""
        problem = self.fleet.prepare(place)
        self.fleet.release(place, problem)
        self.fleet.run(place)
        self.fleet.await_nodes(place)
        self.fleet.finish_faults(place, restore=not place.last)
        self.fleet.collect(place)


def places(points: list[SweepPoint]) -> list[SweepPlace]:
    """The places of a sweep's points, in order."""
    remaining = estimated_seconds(points)
    found = []
    for point in points:
        remaining -= estimated_seconds([point])
        found.append(SweepPlace(point, len(points), max(0.0, remaining)))
    return found
