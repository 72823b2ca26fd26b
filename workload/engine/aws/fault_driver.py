"""The coordinator's side of faults on AWS: for each sweep point, the begin and end markers
of the scenario's ``[[faults]]`` at their times, and the point's timeline from the broker
machines' acknowledgements.

The coordinating client agent (sender 0, :class:`workload.engine.aws.agent.ClientAgent`) starts a
point's :class:`~workload.engine.faults.FaultClock` — the same clock as a local run's — when it
starts its own sender node for the point: that is the start of the faults' clock
(``sending_ns``; the other client machines start within the agents' poll interval of it).
Its actuator, :class:`FaultMarkers`, posts for each fault the begin marker ``at`` seconds
later and the end marker ``until`` seconds later (keys:
:class:`workload.model.layout.RunLayout`), to the node the fault's selector names at that
moment: a node index always, ``"leader"`` and ``"follower"`` as the system's cloud recipe
finds the leader (:meth:`~brokers.base.CloudRecipe.fault_leader`). Once every node of the
point is done, :meth:`FaultClock.finish <workload.engine.faults.FaultClock.finish>` brings a node
still down back when another point follows (an end marker of its own) and returns the
point's timeline — the same :class:`~workload.model.faults.PointTimeline` as a local run,
``faults/p<point>.json`` in the run — with the times the broker machines acted at.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from brokers import registry
from brokers.base import FaultTarget
from brokers.cloud import CloudFaults
from workload.engine.aws.store import RunStore, now
from workload.engine.faults import FaultClock, Why
from workload.engine.naming import destination_name, run_tag
from workload.model.faults import FaultRecord, FaultSpec
from workload.model.layout import BEGIN, END, LAYOUT
from workload.model.scenario import Scenario
from workload.model.sweep import SweepPoint

Log = Callable[[str], None]
#: Which node leads now, as a fault index (raises when it cannot be told).
Leader = Callable[[], int]


def point_clock(
    point: int, faults: list[FaultSpec], support: CloudFaults, markers: FaultMarkers, log: Log
) -> FaultClock:
    """The clock of a sweep point's faults on AWS, acting through ``markers``."""
    return FaultClock(
        point, faults, support.fails_over, markers, lambda line: log(f"point {point}: {line}")
    )


def fault_nodes(faults: CloudFaults, roles: dict[str, int]) -> list[str]:
    """Node names in the order a fault's ``node = <index>`` counts them."""
    return [f"{role}-{i}" for role in faults.roles for i in range(roles.get(role, 0))]


@dataclass
class Posted:
    """A marker the coordinator posted and the acknowledgement it awaits."""

    key: str
    ack: dict[str, object] | None = None


@dataclass(eq=False)
class FaultMarkers:
    """The actuator of an AWS run (:class:`workload.engine.faults.Actuator`): posts a fault's begin
    and end markers to the node it names, and reads the times the node acted from its
    acknowledgements once the point ends."""

    store: RunStore
    point: int
    nodes: list[str]
    leader: Leader | None
    ack_timeout: float = 300.0
    poll: float = 1.0
    #: Fault index → its begin marker, and its end marker.
    begins: dict[int, Posted] = field(default_factory=dict, init=False)
    ends: dict[int, Posted] = field(default_factory=dict, init=False)

    def target(self, selector: str | int, down: set[str]) -> FaultTarget:
        """The node the selector names now, and whether it leads."""
        if isinstance(selector, int):
            if selector >= len(self.nodes):
                raise ValueError(f"no node {selector} among {', '.join(self.nodes)}")
            leads = False
            if self.leader is not None:
                try:
                    leads = self.leader() == selector
                except Exception:  # who leads is only said, not needed, here
                    leads = False
            return FaultTarget(self.nodes[selector], leads)
        if self.leader is None:
            raise ValueError(f"{selector!r} needs the leader, which cannot be asked on AWS")
        leader = self.leader()
        if selector == "leader":
            return FaultTarget(self.nodes[leader], True)
        for index, name in enumerate(self.nodes):
            if index != leader and name not in down:
                return FaultTarget(name, False)
        raise ValueError(f"no follower of {self.nodes[leader]} is up")

    def begin(self, record: FaultRecord) -> None:
        """Post the begin marker; when the node acted is known at :meth:`settle`."""
        self.begins[record.index] = self._post(record, BEGIN, "at")

    def end(self, record: FaultRecord, why: Why) -> int | None:
        """Post the end marker; a node brought back after the point (``restore``) is
        awaited, one at ``until`` known at :meth:`settle`."""
        posted = self.ends[record.index] = self._post(record, END, why)
        return self._acted(record, posted) if why == "restore" else None

    def settle(self, records: list[FaultRecord]) -> None:
        """The times the broker machines acted at, from their acknowledgements."""
        for i, posted in self.begins.items():
            records[i].began_ns = self._acted(records[i], posted)
        for i, posted in self.ends.items():
            records[i].ended_ns = self._acted(records[i], posted)

    def _post(self, record: FaultRecord, kind: str, why: str) -> Posted:
        key = LAYOUT.fault_marker(record.node, self.point, record.index, kind)
        self.store.put_json(
            key,
            {
                "point": self.point,
                "fault": record.index,
                "action": record.action,
                "why": why,
                "posted_ns": time.time_ns(),
                "at": now(),
            },
        )
        return Posted(key)

    def _acted(self, record: FaultRecord, posted: Posted) -> int | None:
        """When the node acted on a marker (its acknowledgement); None, with the record's
        error, when it failed or did not answer within ``ack_timeout``."""
        deadline = time.monotonic() + self.ack_timeout
        while posted.ack is None:
            posted.ack = self.store.get_json(LAYOUT.fault_ack(posted.key))
            if posted.ack is None:
                if time.monotonic() >= deadline:
                    record.error = record.error or (
                        f"no answer from the fault agent of {record.node} within "
                        f"{self.ack_timeout:.0f} s"
                    )
                    return None
                time.sleep(self.poll)
        if not posted.ack.get("ok"):
            record.error = record.error or f"{record.node}: {posted.ack.get('error')}"
            return None
        acted = posted.ack.get("acted_ns")
        return int(acted) if isinstance(acted, int) else None


@dataclass
class RunFaults:
    """The faults of a whole run on AWS: a :class:`~workload.engine.faults.FaultClock` over
    :class:`FaultMarkers` per sweep point."""

    store: RunStore
    scenario: Scenario
    support: CloudFaults
    nodes: list[str]
    log: Log = print
    ack_timeout: float = 300.0
    poll: float = 1.0

    @classmethod
    def of(cls, store: RunStore, scenario: Scenario, log: Log = print) -> RunFaults | None:
        """The run's faults; None when the scenario declares none (or, unvalidated, when
        it is no AWS stack's scenario or its system takes no faults there)."""
        roles = scenario.broker.aws_topology
        recipe = registry.get(scenario.broker.system).cloud
        support = recipe.faults_for(roles) if recipe is not None and roles else None
        if not scenario.faults or support is None or roles is None:
            return None
        return cls(store, scenario, support, fault_nodes(support, roles), log)

    def point(self, point: SweepPoint) -> FaultClock:
        markers = FaultMarkers(
            self.store, point.index, self.nodes, self._leader(point), self.ack_timeout, self.poll
        )
        return point_clock(point.index, self.scenario.faults, self.support, markers, self.log)

    def _leader(self, point: SweepPoint) -> Leader | None:
        system = registry.get(self.scenario.broker.system)
        recipe = system.cloud
        if recipe is None or not recipe.finds_leader:
            return None
        endpoints = self.scenario.broker.given_endpoints()
        params = system.params_model.model_validate(point.params)
        destination = destination_name(run_tag(self.store.run_id), point.index)
        return lambda: recipe.fault_leader(endpoints, params, destination)

    def finish(self) -> None:
        """Tell every fault agent of the run that no more markers come."""
        for node in self.nodes:
            self.store.put_json(LAYOUT.fault_finished(node), {"at": now()})
