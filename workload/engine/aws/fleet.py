"""The client machines of an AWS run, as the coordinating agent (sender node 0) drives them
through each sweep point (:class:`workload.engine.coordinator.Fleet`) with markers in the run's S3
prefix (:class:`workload.model.layout.RunLayout`).

* prepare: ``brokerbench prepare`` on this machine (point 0 also writes the run context),
  and its files uploaded;
* release: the point's ready marker, ok or the preparation's error;
* run: this machine's own sender node (:meth:`ClientAgent.take_part
  <workload.engine.aws.agent.ClientAgent.take_part>`) — its start starts the faults' clock, and
  the fault markers follow at their times (:mod:`workload.engine.aws.fault_driver`);
* await: every node's done marker, for at most the point's budget — and, ``start_grace``
  into the run, not for nodes that have not even posted their started marker;
* faults: the point's timeline, after bringing a node still down back (another point
  follows), written and uploaded;
* collect: for each node that never started, its statuses (the analysis names it in the
  point's *incomplete*) and its done marker (``cloud wait`` ends); nodes that started but
  posted nothing in time are counted in the log.

Unlike a local run, nothing here stops the run early: a failed point is recorded and the
next one follows; :attr:`S3Fleet.ok` says whether everything went well.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from workload.engine.aws.fault_driver import RunFaults
from workload.engine.aws.store import Log, RunStore, Uploader, now
from workload.engine.coordinator import SweepPlace
from workload.engine.faults import FaultClock
from workload.model.faults import write_timeline
from workload.model.layout import LAYOUT
from workload.model.record import load_context
from workload.model.results import NodeStatus, write_status
from workload.model.sweep import SweepPoint


def participants(point: SweepPoint) -> list[tuple[str, int]]:
    """(role, node) of every client node that takes part in a sweep point."""
    return [("sender", n) for n in range(point.load.sender_nodes)] + [
        ("receiver", n) for n in range(point.receiver_nodes)
    ]


class OwnNode(Protocol):
    """The coordinating machine's own part of the run (the agent's,
    :class:`~workload.engine.aws.agent.ClientAgent`)."""

    def prepare(self, point: int) -> tuple[bool, str]: ...

    def take_part(
        self,
        point: SweepPoint,
        ready: dict[str, Any] | None,
        starting: Callable[[], None] | None = None,
    ) -> bool: ...

    def budget(self, point: SweepPoint) -> float: ...

    @property
    def elapsed(self) -> float: ...


@dataclass
class S3Fleet:
    """The client machines of an AWS run, coordinated through ``store`` (see the module);
    what the coordinating machine recorded goes up through ``uploader``."""

    store: RunStore
    uploader: Uploader
    own: OwnNode
    log: Log
    #: The coordinating node's name (``sender-0``), on markers it posts for others.
    name: str
    faults: RunFaults | None = None
    #: How long into the run a node may take to post its started marker.
    start_grace: float = 900.0
    #: Seconds between looks at the markers.
    poll: float = 2.0
    #: Everything went well so far (the agent's exit code).
    ok: bool = True
    _ready: dict[str, Any] = field(default_factory=dict, init=False)
    _point_faults: FaultClock | None = field(default=None, init=False)
    #: Of the point awaited: nodes that never started, and how many others are late.
    _absent: list[tuple[str, int]] = field(default_factory=list, init=False)
    _late: int = field(default=0, init=False)

    @property
    def stopped(self) -> bool:
        return False

    def prepare(self, place: SweepPlace) -> str | None:
        prepared, message = self.own.prepare(place.point.index)
        self.uploader.upload_new()
        return None if prepared else message

    def release(self, place: SweepPlace, problem: str | None) -> None:
        self._ready = {"ok": problem is None, "error": problem or "", "at": now()}
        self.store.put_json(LAYOUT.ready(place.point.index), self._ready)

    def run(self, place: SweepPlace) -> None:
        """This machine's sender node of the point; the faults' clock starts with it."""
        point = place.point

        def starting() -> None:
            if self.faults is not None:
                self._point_faults = self.faults.point(point)
                self._point_faults.start()

        self.ok = self.own.take_part(point, self._ready, starting) and self.ok

    def await_nodes(self, place: SweepPlace) -> None:
        """Wait until every node of the point has posted its done marker, for at most the
        point's budget — and, ``start_grace`` into the run, not for nodes that have not
        even posted their started marker (:meth:`collect` closes the point for those)."""
        point = place.point
        expected = {LAYOUT.done(point.index, r, n): (r, n) for r, n in participants(point)}
        deadline = time.monotonic() + self.own.budget(point)
        while True:
            present = self.store.keys(LAYOUT.markers)
            missing = [who for key, who in expected.items() if key not in present]
            absent = [who for who in missing if LAYOUT.started(*who) not in present]
            clock = time.monotonic()
            if not missing or clock >= deadline:
                break
            if len(absent) == len(missing) and self.own.elapsed >= self.start_grace:
                break
            time.sleep(self.poll)
        self._absent, self._late = absent, len(missing) - len(absent)

    def finish_faults(self, place: SweepPlace, restore: bool) -> None:
        """Write and upload the timeline of the point (after bringing back a node still
        down when ``restore``); a fault that failed or was not performed is not ok."""
        faults, self._point_faults = self._point_faults, None
        if faults is None:
            return
        timeline = faults.finish(restore)
        write_timeline(self.uploader.run_dir, timeline)
        uploaded = LAYOUT.timeline(timeline.point) not in self.uploader.upload_new()
        errors = [
            f"fault {r.index} ({r.describe()}): {r.error}" for r in timeline.faults if r.error
        ]
        for error in errors:
            self.log(f"point {timeline.point}: {error}")
        self.ok = uploaded and not errors and self.ok

    def collect(self, place: SweepPlace) -> None:
        point = place.point.index
        for role, node in self._absent:
            self._close_for(point, role, node)
        if self._late:
            self.log(f"point {point}: no result from {self._late} node(s) in time; going on")

    def _close_for(self, point: int, role: str, node: int) -> None:
        """Post, for a node that never started, its statuses of ``point`` and its done
        marker."""
        error = (
            f"never started: no {LAYOUT.started(role, node)} marker "
            f"{self.own.elapsed:.0f} s into the run"
        )
        for part in range(self._parts(point, role)):
            write_status(self.uploader.run_dir, NodeStatus(point, role, node, False, error, part))
        failed = self.uploader.upload_new()
        self.store.put_json(
            LAYOUT.done(point, role, node),
            {
                "ok": False,
                "error": error,
                "failed_uploads": failed,
                "at": now(),
                "posted_by": self.name,
            },
        )
        self.log(f"point {point}: {role} {node} {error}; closed without it")

    def _parts(self, point: int, role: str) -> int:
        """Processes per node of ``role`` at ``point`` as the context this coordinator
        prepared says: the analysis expects records or a status of each."""
        try:
            return load_context(self.uploader.run_dir).points[point].processes_of(role)
        except (OSError, ValueError, LookupError):
            return 1
