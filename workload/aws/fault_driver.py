"""The coordinator's side of faults on AWS: for each sweep point, the begin and end markers
of the scenario's ``[[faults]]`` at their times, and the point's timeline from the broker
machines' acknowledgements.

The coordinating client agent (sender 0, :class:`workload.aws.agent.ClientAgent`) starts a
:class:`PointFaults` when it starts its own sender node for the point: that is the start of
the faults' clock (``sending_ns``; the other client machines start within the agents' poll
interval of it). A thread posts, for each fault, the begin marker ``at`` seconds later and
the end marker ``until`` seconds later (keys: :class:`workload.model.layout.RunLayout`), to the
node the fault's selector names at that moment: a node index always, ``"leader"`` and
``"follower"`` as the system's cloud recipe finds the leader
(:meth:`~brokers.base.CloudRecipe.fault_leader`). Once every node of the point is done,
:meth:`PointFaults.finish` brings a node still down back when another point follows (an end
marker of its own) and writes the point's timeline — the same
:class:`~workload.model.faults.PointTimeline` as a local run, ``faults/p<point>.json`` in the run —
with the times the broker machines acted at.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from brokers import registry
from brokers.cloud import CloudFaults
from workload.aws.store import RunStore, now
from workload.faults import planned, schedule
from workload.model.errors import first_line
from workload.model.faults import FaultSpec, PointTimeline
from workload.model.layout import BEGIN, END, LAYOUT
from workload.model.scenario import Scenario
from workload.model.sweep import SweepPoint
from workload.naming import destination_name, run_tag

Log = Callable[[str], None]
#: Which node leads now, as a fault index (raises when it cannot be told).
Leader = Callable[[], int]


def fault_nodes(faults: CloudFaults, roles: dict[str, int]) -> list[str]:
    """Node names in the order a fault's ``node = <index>`` counts them."""
    return [f"{role}-{i}" for role in faults.roles for i in range(roles.get(role, 0))]


@dataclass
class Posted:
    """A marker the coordinator posted and the acknowledgement it awaits."""

    key: str
    ack: dict[str, object] | None = None


class PointFaults:
    """Posts one sweep point's fault markers and writes its timeline (see the module)."""

    def __init__(
        self,
        store: RunStore,
        point: int,
        faults: list[FaultSpec],
        nodes: list[str],
        support: CloudFaults,
        leader: Leader | None,
        log: Log = print,
        ack_timeout: float = 300.0,
        poll: float = 1.0,
    ) -> None:
        self.store = store
        self.point = point
        self.nodes = nodes
        self.leader = leader
        self.log = log
        self.ack_timeout = ack_timeout
        self.poll = poll
        self.selectors = [f.node for f in faults]
        self.records = planned(faults, support.fails_over)
        self.plan = schedule(faults)
        #: Fault index → its begin marker, and its end marker.
        self.begins: dict[int, Posted] = {}
        self.ends: dict[int, Posted] = {}
        self.sending_ns: int | None = None
        self._started = 0.0
        self._done = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Sending starts: the clock starts and the markers follow at their times."""
        self.sending_ns = time.time_ns()
        self._started = time.monotonic()
        self._thread = threading.Thread(target=self._run, name=f"faults-p{self.point}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        for seconds, i, begins in self.plan:
            if self._done.wait(max(0.0, self._started + seconds - time.monotonic())):
                return
            if begins:
                self._begin(i)
            elif i in self.begins:
                self._end(i, "until")

    def _begin(self, i: int) -> None:
        record = self.records[i]
        try:
            index, leads = self._target(self.selectors[i])
            record.node, record.leader = self.nodes[index], leads
            self.begins[i] = self._post(i, BEGIN, "at")
        except Exception as exc:  # no leader known, S3 refused the marker …
            record.error = f"not performed: {first_line(exc)}"
            self.log(f"point {self.point}: fault {i} ({record.describe()}) {record.error}")
            return
        role = "leader" if leads else "not the leader"
        self.log(f"point {self.point}: fault {i}: {record.action} {record.node} ({role})")

    def _end(self, i: int, why: str) -> None:
        try:
            self.ends[i] = self._post(i, END, why)
        except Exception as exc:
            record = self.records[i]
            record.error = f"{record.node} could not be brought back: {first_line(exc)}"

    def _post(self, i: int, kind: str, why: str) -> Posted:
        record = self.records[i]
        key = LAYOUT.fault_marker(record.node, self.point, i, kind)
        self.store.put_json(
            key,
            {
                "point": self.point,
                "fault": i,
                "action": record.action,
                "why": why,
                "posted_ns": time.time_ns(),
                "at": now(),
            },
        )
        return Posted(key)

    def _target(self, selector: str | int) -> tuple[int, bool]:
        """The fault index the selector names now, and whether that node leads."""
        if isinstance(selector, int):
            if selector >= len(self.nodes):
                raise ValueError(f"no node {selector} among {', '.join(self.nodes)}")
            leads = False
            if self.leader is not None:
                try:
                    leads = self.leader() == selector
                except Exception:  # who leads is only said, not needed, here
                    leads = False
            return selector, leads
        if self.leader is None:
            raise ValueError(f"{selector!r} needs the leader, which cannot be asked on AWS")
        leader = self.leader()
        if selector == "leader":
            return leader, True
        down = {self.records[j].node for j in self.begins if j not in self.ends}
        for index, name in enumerate(self.nodes):
            if index != leader and name not in down:
                return index, False
        raise ValueError(f"no follower of {self.nodes[leader]} is up")

    def finish(self, restore: bool) -> PointTimeline:
        """The point ended: stop the clock, bring a node still down back when ``restore``
        (another point follows), and gather what the broker machines did."""
        self._done.set()
        if self._thread is not None:
            self._thread.join()
        for i, record in enumerate(self.records):
            if i in self.begins:
                record.began_ns = self._acted(i, self.begins[i])
            elif not record.error:
                record.error = "not performed: the point ended first"
        for i in list(self.ends):
            self.records[i].ended_ns = self._acted(i, self.ends[i])
        for i, record in enumerate(self.records):
            if restore and record.down_at_end and not record.error:
                self._end(i, "restore")
                if i in self.ends:
                    record.restored_ns = self._acted(i, self.ends[i])
        return PointTimeline(point=self.point, sending_ns=self.sending_ns, faults=self.records)

    def _acted(self, i: int, posted: Posted) -> int | None:
        """When the node acted on a marker (its acknowledgement); None, with the record's
        error, when it failed or did not answer within ``ack_timeout``."""
        record = self.records[i]
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
    """The faults of a whole run on AWS: a :class:`PointFaults` per sweep point."""

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

    def point(self, point: SweepPoint) -> PointFaults:
        return PointFaults(
            self.store,
            point.index,
            self.scenario.faults,
            self.nodes,
            self.support,
            self._leader(point),
            self.log,
            self.ack_timeout,
            self.poll,
        )

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
