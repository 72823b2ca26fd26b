"""The client machines of an AWS run, as the coordinating agent (sender node 0) drives them
through each sweep point (:class:`workload.coordinator.Fleet`) with markers in the run's S3
prefix (:class:`workload.model.layout.RunLayout`).

* prepare: ``brokerbench prepare`` on this machine (point 0 also writes the run context),
  and its files uploaded;
* release: the point's ready marker, ok or the preparation's error;
* run: this machine's own sender node (:meth:`ClientAgent.take_part
  <workload.aws.agent.ClientAgent.take_part>`) — its start starts the faults' clock, and
  the fault markers follow at their times (:mod:`workload.aws.fault_driver`);
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
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from workload.aws.fault_driver import PointFaults, RunFaults
from workload.aws.store import now
from workload.coordinator import SweepPlace
from workload.model.faults import write_timeline
from workload.model.layout import LAYOUT
from workload.model.record import load_context
from workload.model.results import NodeStatus, write_status
from workload.model.sweep import SweepPoint

if TYPE_CHECKING:
    from workload.aws.agent import ClientAgent


def participants(point: SweepPoint) -> list[tuple[str, int]]:
    """(role, node) of every client node that takes part in a sweep point."""
    return [("sender", n) for n in range(point.load.sender_nodes)] + [
        ("receiver", n) for n in range(point.receiver_nodes)
    ]


@dataclass
class S3Fleet:
    """The client machines of an AWS run, coordinated by ``agent`` (see the module)."""

    agent: ClientAgent
    faults: RunFaults | None = None
    #: Everything went well so far (the agent's exit code).
    ok: bool = True
    _ready: dict[str, Any] = field(default_factory=dict, init=False)
    _point_faults: PointFaults | None = field(default=None, init=False)
    #: Of the point awaited: nodes that never started, and how many others are late.
    _absent: list[tuple[str, int]] = field(default_factory=list, init=False)
    _late: int = field(default=0, init=False)

    @property
    def stopped(self) -> bool:
        return False

    def prepare(self, place: SweepPlace) -> str | None:
        agent = self.agent
        prepared, message = agent.commands.prepare(place.point.index)
        agent.upload_new()
        return None if prepared else message

    def release(self, place: SweepPlace, problem: str | None) -> None:
        self._ready = {"ok": problem is None, "error": problem or "", "at": now()}
        self.agent.store.put_json(LAYOUT.ready(place.point.index), self._ready)

    def run(self, place: SweepPlace) -> None:
        """This machine's sender node of the point; the faults' clock starts with it."""
        point = place.point

        def starting() -> None:
            if self.faults is not None:
                self._point_faults = self.faults.point(point)
                self._point_faults.start()

        self.ok = self.agent.take_part(point, self._ready, starting) and self.ok

    def await_nodes(self, place: SweepPlace) -> None:
        """Wait until every node of the point has posted its done marker, for at most the
        point's budget — and, ``start_grace`` into the run, not for nodes that have not
        even posted their started marker (:meth:`collect` closes the point for those)."""
        agent, point = self.agent, place.point
        expected = {LAYOUT.done(point.index, r, n): (r, n) for r, n in participants(point)}
        deadline = time.monotonic() + agent.budget(point)
        while True:
            present = agent.store.keys(LAYOUT.markers)
            missing = [who for key, who in expected.items() if key not in present]
            absent = [who for who in missing if LAYOUT.started(*who) not in present]
            clock = time.monotonic()
            if not missing or clock >= deadline:
                break
            if len(absent) == len(missing) and agent.elapsed >= agent.start_grace:
                break
            time.sleep(agent.poll)
        self._absent, self._late = absent, len(missing) - len(absent)

    def finish_faults(self, place: SweepPlace, restore: bool) -> None:
        """Write and upload the timeline of the point (after bringing back a node still
        down when ``restore``); a fault that failed or was not performed is not ok."""
        faults, self._point_faults = self._point_faults, None
        if faults is None:
            return
        agent = self.agent
        timeline = faults.finish(restore)
        write_timeline(agent.run_dir, timeline)
        uploaded = LAYOUT.timeline(timeline.point) not in agent.upload_new()
        errors = [
            f"fault {r.index} ({r.describe()}): {r.error}" for r in timeline.faults if r.error
        ]
        for error in errors:
            agent.log(f"point {timeline.point}: {error}")
        self.ok = uploaded and not errors and self.ok

    def collect(self, place: SweepPlace) -> None:
        point = place.point.index
        for role, node in self._absent:
            self._close_for(point, role, node)
        if self._late:
            self.agent.log(f"point {point}: no result from {self._late} node(s) in time; going on")

    def _close_for(self, point: int, role: str, node: int) -> None:
        """Post, for a node that never started, its statuses of ``point`` and its done
        marker."""
        agent = self.agent
        error = (
            f"never started: no {LAYOUT.started(role, node)} marker "
            f"{agent.elapsed:.0f} s into the run"
        )
        for part in range(self._parts(point)):
            write_status(agent.run_dir, NodeStatus(point, role, node, False, error, part))
        failed = agent.upload_new()
        agent.store.put_json(
            LAYOUT.done(point, role, node),
            {
                "ok": False,
                "error": error,
                "failed_uploads": failed,
                "at": now(),
                "posted_by": f"{agent.role}-{agent.node}",
            },
        )
        agent.log(f"point {point}: {role} {node} {error}; closed without it")

    def _parts(self, point: int) -> int:
        """Processes per node at ``point`` as the context this coordinator prepared says:
        the analysis expects records or a status of each."""
        try:
            return load_context(self.agent.run_dir).points[point].processes
        except (OSError, ValueError, LookupError):
            return 1
