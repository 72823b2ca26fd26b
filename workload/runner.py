"""Running a scenario locally: start (or reach) the broker, run every sweep point with its
sender and receiver node processes, record everything under ``RESULTS_DIR/<run-id>/``.

The runner never loses what was recorded: a node that fails, a broker that dies and a
Ctrl-C all end the run with the nodes' results written and the context saying how it
ended. A scenario's declared faults (:mod:`workload.faults`) act on the broker nodes
during each point; a node down by declaration is not a broker that died. Turning the
records into numbers is the analysis job's work (``analysis/``).

With ``repeat`` the sweep's points run that many times, interleaved (:func:`expand`). A
capacity search (``[search]``) runs its probes one after another as sweep points
(:class:`Probes`): each is judged from its raw records as soon as it ends, the next rate
follows from the verdicts (:mod:`workload.search`), and the context records every probe's
point as it starts and the search's record after every probe.
"""

from __future__ import annotations

import contextlib
import math
import multiprocessing as mp
import queue
import secrets
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import pyarrow as pa

from brokers import registry
from brokers.base import BrokerSystem, Endpoints, LocalCluster
from brokers.errors import BrokerError, BrokerUnavailable
from brokers.netns import Namespaces, NodeHosts
from workload.context import build_context, now_iso, point_entry, write_context
from workload.errors import one_line
from workload.faults import FaultScheduler, start_faults, write_timeline
from workload.layout import LAYOUT
from workload.naming import destination_name, point_tag, run_tag
from workload.node import NodeSpec, Progress, node_process, split
from workload.preflight import preflight
from workload.progress import ProgressView
from workload.record import ProbeRecord, RunContext
from workload.results import NodeStatus, RecordsNotWritten, read_statuses, write_status
from workload.scenario import Scenario, load_scenario
from workload.search import (
    CapacitySearch,
    describe_search,
    judge,
    measure_point,
    probe_line,
    probe_point,
    sender_workers,
    unjudged,
)
from workload.search import estimated_seconds as search_seconds
from workload.signals import signal_name
from workload.sweep import SweepPoint, describe_points, estimated_seconds, expand

Console = Callable[[str], None]


@dataclass
class RunOutcome:
    run_id: str
    run_dir: Path
    errors: list[str] = field(default_factory=list)
    interrupted: bool = False
    #: The signal that interrupted the run (SIGINT for Ctrl-C).
    signal: str = "SIGINT"

    @property
    def ok(self) -> bool:
        return not self.errors and not self.interrupted


def new_run_id(scenario: Scenario) -> str:
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    return f"{scenario.name}-{stamp}-{secrets.token_hex(2)}"


@contextlib.contextmanager
def broker_endpoints(
    scenario: Scenario, system: BrokerSystem[Any], console: Console
) -> Iterator[tuple[Endpoints, LocalCluster | None]]:
    """The broker to talk to: started here (and always stopped) or the given endpoints."""
    section = scenario.broker
    if section.deployment == "endpoints":
        yield section.given_endpoints(), None
        return
    assert system.local is not None
    reason = system.local.missing()
    if reason:
        raise BrokerUnavailable(reason)
    workdir = Path(tempfile.mkdtemp(prefix=f"brokerbench-{system.name}-"))
    # Nodes a fault isolates need hosts of their own (a network namespace each).
    isolating = any(f.action == "isolate" for f in scenario.faults)
    hosts = Namespaces() if isolating else NodeHosts()
    where = "on this machine, a network namespace per node" if isolating else "on this machine"
    console(f"starting {system.title} ({section.topology}) {where}…")
    started = time.monotonic()
    try:
        cluster = system.local.start(section.topology, scenario.broker_params(), workdir, hosts)
    except BaseException:
        hosts.close()
        shutil.rmtree(workdir, ignore_errors=True)
        raise
    console(
        f"{system.title} ready in {time.monotonic() - started:.0f} s at {', '.join(cluster.endpoints.hosts)}"
    )
    try:
        yield cluster.endpoints, cluster
    finally:
        # Stop first: nothing (not even a closed terminal) may leave a broker running.
        cluster.stop()
        console(f"{system.title} stopped")


def run_scenario(scenario_path: Path, results_root: Path, console: Console = print) -> RunOutcome:
    """Run every sweep point of a scenario — or its capacity search, probe by probe; raises
    only for what happens before recording."""
    scenario = load_scenario(scenario_path)
    system = registry.get(scenario.broker.system)
    search = (
        CapacitySearch(scenario.search, sender_workers(scenario))
        if scenario.search is not None
        else None
    )
    points = expand(scenario) if search is None else []
    run_id = new_run_id(scenario)
    run_dir = results_root / run_id
    outcome = RunOutcome(run_id, run_dir)
    tag = run_tag(run_id)
    preflight(results_root, points if search is None else _search_bound(scenario))
    with broker_endpoints(scenario, system, console) as (endpoints, cluster):
        described = system.describe(endpoints, scenario.broker_params())
        broker_info = {
            "deployment": scenario.broker.deployment,
            "topology": scenario.broker.topology,
            "endpoints": list(endpoints.hosts),
            **described,
        }
        context = build_context(run_id, scenario, str(scenario_path), system, points, broker_info)
        if search is not None:
            context.search = search.record  # saved as it stands at every save
        _save_context(run_dir, context)
        if search is None:
            console(f"run {run_id}: {describe_points(points, scenario.repeat)} → {run_dir}")
        else:
            console(f"run {run_id}: {describe_search(scenario)} → {run_dir}")
        try:
            if search is None:
                remaining = estimated_seconds(points)
                for point in points:
                    remaining -= estimated_seconds([point])
                    run_point(
                        scenario,
                        system,
                        endpoints,
                        cluster,
                        point,
                        len(points),
                        tag,
                        outcome,
                        console,
                        remaining_s=max(0.0, remaining),
                    )
                    if outcome.interrupted or outcome.errors:
                        break
            else:
                probes = Probes(scenario, system, endpoints, cluster, tag, outcome, console)
                probes.run(search, context)
        finally:
            context.finished = now_iso()
            context.status = (
                "interrupted" if outcome.interrupted else "failed" if outcome.errors else "complete"
            )
            context.errors = outcome.errors
            if search is not None:
                search.stop(_why_stopped(outcome) or "the run stopped before the search ended")
            try:
                _save_context(run_dir, context)
            except RecordsNotWritten as exc:
                outcome.errors.append(str(exc))
    if search is not None:
        console(search.record.result)
    return outcome


def _why_stopped(outcome: RunOutcome) -> str:
    """Why the run stopped a search ("" if it did not)."""
    if outcome.interrupted:
        return f"the run was interrupted ({outcome.signal})"
    if outcome.errors:
        return f"the run failed ({outcome.errors[0]})"
    return ""


def _search_bound(scenario: Scenario) -> list[SweepPoint]:
    """What a search may run at most, for the checks before it starts: every probe at
    ``high``."""
    assert scenario.search is not None
    high = scenario.search.high
    return [probe_point(scenario, i, high) for i in range(scenario.search.max_probes)]


@dataclass
class Probes:
    """Runs a capacity search's probes, one sweep point each, judging each as it ends."""

    scenario: Scenario
    system: BrokerSystem[Any]
    endpoints: Endpoints
    cluster: LocalCluster | None
    tag: str
    outcome: RunOutcome
    console: Console

    def run(self, search: CapacitySearch, context: RunContext) -> None:
        """Probe until the search is over or the run stops; each probe's point is in the
        context (saved) before it starts, and the search's record after it ends."""
        spec = search.spec
        warmup_s = math.ceil(self.scenario.measurement.warmup or 0)
        index = 0
        while (rate := search.next_rate()) is not None:
            point = probe_point(self.scenario, index, rate)
            context.points.append(point_entry(self.system, point))
            if not self._save(context):
                search.stop(_why_stopped(self.outcome))
                return
            run_point(
                self.scenario,
                self.system,
                self.endpoints,
                self.cluster,
                point,
                spec.max_probes,
                self.tag,
                self.outcome,
                self.console,
                remaining_s=search_seconds(self.scenario, spec.max_probes - index - 1),
            )
            probe = self._judge(point, warmup_s, spec.slo_p99)
            search.add(probe)
            self.console(probe_line(probe))
            if probe.holds is None:
                search.stop(probe.reason)
                return
            index += 1

    def _judge(self, point: SweepPoint, warmup_s: int, slo_p99_s: float) -> ProbeRecord:
        """The probe's record: judged from its raw records — unless the run stopped."""
        why = _why_stopped(self.outcome)
        if why:
            return unjudged(point, why)
        try:
            measures = measure_point(self.outcome.run_dir, point.index, warmup_s)
        except (OSError, pa.ArrowException) as exc:
            self.outcome.errors.append(
                f"probe {point.index + 1}: its records cannot be read ({one_line(str(exc))})"
            )
            return unjudged(point, _why_stopped(self.outcome))
        return judge(point, measures, slo_p99_s)

    def _save(self, context: RunContext) -> bool:
        try:
            _save_context(self.outcome.run_dir, context)
        except RecordsNotWritten as exc:
            self.outcome.errors.append(str(exc))
            return False
        return True


def _save_context(run_dir: Path, context: RunContext) -> None:
    """Write the run context; a full disk or a read-only directory is one line naming it."""
    try:
        run_dir.mkdir(parents=True, exist_ok=True)
        write_context(run_dir, context)
    except OSError as exc:
        with contextlib.suppress(OSError):  # the partial file ``write_context`` left
            (run_dir / f".{LAYOUT.context}.tmp").unlink(missing_ok=True)
        raise RecordsNotWritten(run_dir / LAYOUT.context, exc) from exc


def run_point(
    scenario: Scenario,
    system: BrokerSystem[Any],
    endpoints: Endpoints,
    cluster: LocalCluster | None,
    point: SweepPoint,
    total: int,
    tag: str,
    outcome: RunOutcome,
    console: Console,
    remaining_s: float = 0.0,
) -> None:
    """Run one sweep point to its end; record errors and interruption in ``outcome``.

    ``remaining_s``: the estimated time of the points after this one, for the progress
    view's ETA of the whole sweep (:func:`workload.sweep.estimated_seconds`).
    """
    position = f"[{point.index + 1}/{total}]"
    label = f"{position} {point.label}"
    rate = f" rate={point.load.rate:g}/s per sender worker" if point.load.rate else ""
    run = f" (run {point.repeat + 1} of {scenario.repeat})" if scenario.repeat > 1 else ""
    console(
        f"point {position}: threads={point.load.threads} sender_nodes={point.load.sender_nodes} "
        f"receiver_nodes={point.receiver_nodes} message_size={point.load.message_size}{rate}{run}"
    )
    destination = destination_name(tag, point.index)
    params = system.params_model.model_validate(point.params)
    system.prepare(endpoints, params, destination)
    ctx = mp.get_context("spawn")
    stop = ctx.Event()
    senders_done = ctx.Event()
    progress: Any = ctx.Queue()
    nodes = [
        NodeSpec(
            run_dir=outcome.run_dir,
            run_id=outcome.run_id,
            tag=point_tag(tag, point.index),
            point=point.index,
            role=role,
            node=node,
            system=system.name,
            endpoints=endpoints,
            params=point.params,
            destination=destination.name,
            load=point.load,
        )
        for role, count in (("receiver", point.receiver_nodes), ("sender", point.load.sender_nodes))
        for node in range(count)
    ]
    specs = [part for node_spec in nodes for part in split(node_spec)]
    processes = [
        ctx.Process(
            target=node_process,
            args=(spec, stop, progress, senders_done),
            name=f"{spec.role}-{spec.node}.{spec.part}",
        )
        for spec in specs
    ]
    view = ProgressView(label, point=point, remaining_s=remaining_s)
    dead_reported: set[str] = set()
    faults = start_faults(scenario, cluster, destination, point.index, console)
    try:
        for process in processes:
            process.start()
        senders = [p for p, spec in zip(processes, specs, strict=True) if spec.role == "sender"]
        while any(p.is_alive() for p in processes):
            _drain(progress, view, timeout=0.25)
            view.tick()
            if not senders_done.is_set() and not any(p.is_alive() for p in senders):
                senders_done.set()
            if faults is not None and view.totals()[0] > 0:
                faults.sending_started()
            if cluster is not None:
                # A node down by a declared fault is no failure; any other death is.
                declared = faults.declared_down() if faults is not None else set()
                for name in set(cluster.dead_nodes()) - declared - dead_reported:
                    dead_reported.add(name)
                    outcome.errors.append(f"broker node {name} died during the run")
    except KeyboardInterrupt as exc:
        outcome.interrupted = True
        outcome.signal = signal_name(exc)
        stop.set()
        console(
            f"\ninterrupted ({outcome.signal}): stopping the workers and keeping what was recorded…"
        )
        _join(processes, timeout=60)
    finally:
        _drain(progress, view, timeout=0)
        view.close()
        stop.set()
        _join(processes, timeout=5)
        for process in processes:
            if process.is_alive():
                process.kill()  # nodes ignore SIGTERM: stopping them is the coordinator's
                process.join(timeout=5)
        if faults is not None:
            _finish_faults(faults, outcome, restore=point.index + 1 < total)
    statuses = {
        (s.role, s.node, s.part): s
        for s in read_statuses(outcome.run_dir)
        if s.point == point.index
    }
    for spec, process in zip(specs, processes, strict=True):
        status = statuses.get((spec.role, spec.node, spec.part))
        who = f"{spec.role} node {spec.node}" + (f" (process {spec.part})" if spec.part else "")
        if status is None:
            outcome.errors.append(_record_missing(outcome.run_dir, spec, process, who))
        elif not status.ok:
            outcome.errors.append(f"{who}: {status.error}")
    if any(s.errors for s in statuses.values()) and not outcome.errors:
        failed = sum(s.errors for s in statuses.values())
        console(
            f"  note: {failed} failed call(s), not retried: a failed send's batch is abandoned "
            "(see the errors column)"
        )


def _finish_faults(faults: FaultScheduler, outcome: RunOutcome, restore: bool) -> None:
    """End the point's faults (bringing nodes back for a next point) and keep the timeline."""
    complete = not outcome.interrupted
    timeline = faults.finish(restore=restore and complete, complete=complete)
    outcome.errors.extend(faults.errors)
    try:
        write_timeline(outcome.run_dir, timeline)
    except RecordsNotWritten as exc:
        outcome.errors.append(str(exc))


def _record_missing(run_dir: Path, spec: NodeSpec, process: Any, who: str) -> str:
    """Why a node process left no status, written as its status for the analysis: it exited
    without results — unless that status cannot be written either (a full disk), which is
    then what is said."""
    error = f"exited with code {process.exitcode} without results"
    status = NodeStatus(spec.point, spec.role, spec.node, ok=False, error=error, part=spec.part)
    try:
        write_status(run_dir, status)
    except RecordsNotWritten as exc:
        return f"{who}: {exc}"
    return f"{who} {error}"


def _drain(progress: Any, view: ProgressView, timeout: float) -> None:
    try:
        item = progress.get(timeout=timeout) if timeout else progress.get_nowait()
        while True:
            if isinstance(item, Progress):
                view.update(item)
            item = progress.get_nowait()
    except (queue.Empty, EOFError, OSError):
        return


def _join(processes: list[Any], timeout: float) -> None:
    deadline = time.monotonic() + timeout
    for process in processes:
        try:
            process.join(max(0.1, deadline - time.monotonic()))
        except KeyboardInterrupt:
            break


__all__ = ["BrokerError", "RunOutcome", "run_scenario"]
