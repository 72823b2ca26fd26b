"""Running a scenario locally: start (or reach) the broker, run every sweep point with its
sender and receiver node processes (:class:`~workload.engine.local_fleet.LocalFleet`, sequenced by
the :class:`~workload.engine.coordinator.Coordinator`), record everything under
``RESULTS_DIR/<run-id>/``.

The runner never loses what was recorded: a node that fails, a broker that dies and a
Ctrl-C all end the run with the nodes' results written and the context saying how it
ended. A scenario's declared faults (:mod:`workload.engine.faults`) act on the broker nodes
during each point; a node down by declaration is not a broker that died. Turning the
records into numbers is the analysis job's work (``analysis/``).

With ``repeat`` the sweep's points run that many times, interleaved (:func:`expand`). A
capacity search (``[search]``) runs its probes one after another as sweep points
(:class:`Probes`): each is judged from its raw records as soon as it ends, the next rate
follows from the verdicts (:mod:`workload.engine.search`), and the context records every probe's
point as it starts and the search's record after every probe.
"""

from __future__ import annotations

import contextlib
import math
import secrets
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import pyarrow as pa

from brokers import lazyfs, registry
from brokers.base import BrokerSystem, Endpoints, LocalCluster
from brokers.errors import BrokerError, BrokerUnavailable
from brokers.netns import Namespaces, NodeHosts
from brokers.power import data_on
from brokers.watchdog import WATCHDOG
from workload.engine.context import broker_entry, build_context, now_iso, point_entry
from workload.engine.coordinator import Coordinator, SweepPlace, places
from workload.engine.cpu_pins import CpuPins, broker_side
from workload.engine.local_fleet import LocalFleet, RunOutcome
from workload.engine.naming import run_tag
from workload.engine.preflight import preflight
from workload.engine.search import (
    CapacitySearch,
    describe_search,
    judge,
    measure_point,
    probe_line,
    probe_point,
    unjudged,
)
from workload.engine.search import estimated_seconds as search_seconds
from workload.engine.signals import signal_name
from workload.model.errors import RecordsNotWritten, UserError, one_line
from workload.model.layout import LAYOUT
from workload.model.record import CoordinatorRecord, ProbeRecord, RunContext, write_context
from workload.model.scenario import Scenario, expand
from workload.model.scenario_file import load_scenario
from workload.model.sweep import SweepPoint, describe_points

Console = Callable[[str], None]


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
    reason = lazyfs.missing() if lazy_disks(scenario) else None
    if reason:  # exit 2, nothing started
        raise UserError(f"a power-loss fault needs the lazy filesystem: {reason}")
    workdir = Path(tempfile.mkdtemp(prefix=f"brokerbench-{system.name}-"))
    WATCHDOG.watch_dir(workdir)  # at once: a coordinator killed during start-up leaves nothing
    # Nodes a fault isolates need hosts of their own (a network namespace each).
    isolating = any(f.action == "isolate" for f in scenario.faults)
    hosts = Namespaces() if isolating else NodeHosts()
    where = "on this machine, a network namespace per node" if isolating else "on this machine"
    disks = lazy_disks(scenario)
    if disks is not None:
        where += f", data on the lazy filesystem ({_model(disks)})"
    pins = CpuPins.of(section.cpus)
    if pins is not None:
        where += f", {pins.words()}"
    console(f"starting {system.title} ({section.topology}) {where}…")
    started = time.monotonic()
    try:
        with data_on(disks), broker_side(pins):
            cluster = system.local.start(section.topology, scenario.broker_params(), workdir, hosts)
    except BaseException:
        hosts.close()
        shutil.rmtree(workdir, ignore_errors=True)
        WATCHDOG.release_dir(workdir)
        raise
    console(
        f"{system.title} ready in {time.monotonic() - started:.0f} s at {', '.join(cluster.endpoints.hosts)}"
    )
    try:
        yield cluster.endpoints, cluster
    finally:
        # Stop first: nothing (not even a closed terminal) may leave a broker running.
        cluster.stop()
        shutil.rmtree(workdir, ignore_errors=True)
        WATCHDOG.release_dir(workdir)
        console(f"{system.title} stopped")


def lazy_disks(scenario: Scenario) -> lazyfs.LazyDisks | None:
    """A scenario with a power-loss fault keeps its nodes' data on the lazy filesystem, in
    the model of a journaling filesystem (ext4, XFS: a file's sync commits its own creation
    and renames), nothing written back unsynced; without one, data is where it is."""
    if not any(f.action == "power-loss" for f in scenario.faults):
        return None
    return lazyfs.LazyDisks(writeback="never", metadata="ordered")


def _model(disks: lazyfs.LazyDisks) -> str:
    return (
        f"writeback {disks.writeback}, metadata {disks.metadata}, "
        f"at most {disks.max_dirty_bytes >> 20} MiB unsynced"
    )


def run_scenario(scenario_path: Path, results_root: Path, console: Console = print) -> RunOutcome:
    """Run every sweep point of a scenario — or its capacity search, probe by probe; raises
    only for what happens before recording."""
    scenario = load_scenario(scenario_path)
    system = registry.get(scenario.broker.system)
    search = (
        CapacitySearch(scenario.search, scenario.load.sender_workers)
        if scenario.search is not None
        else None
    )
    points = expand(scenario) if search is None else []
    run_id = new_run_id(scenario)
    run_dir = results_root / run_id
    outcome = RunOutcome(run_id, run_dir)
    tag = run_tag(run_id)
    preflight(results_root, points if search is None else _search_bound(scenario))
    pins = CpuPins.of(scenario.broker.cpus) if scenario.broker.deployment == "local" else None
    with (
        broker_endpoints(scenario, system, console) as (endpoints, cluster),
        pins.clients_side() if pins is not None else contextlib.nullcontext(),
    ):
        broker_info = broker_entry(scenario, system, endpoints, scenario.broker.topology)
        disks = lazy_disks(scenario) if cluster is not None else None
        if disks is not None:  # the model its power-loss faults were measured in
            broker_info["lazy_fs"] = disks.describe()
        if pins is not None:  # the broker's cores and the clients'
            broker_info["cpus"] = pins.describe()
        context = build_context(
            run_id,
            scenario,
            str(scenario_path),
            system,
            points,
            broker_info,
            coordinator=CoordinatorRecord.this_process(),
        )
        if search is not None:
            context.search = search.record  # saved as it stands at every save
        _save_context(run_dir, context)
        if search is None:
            console(f"run {run_id}: {describe_points(points, scenario.repeat)} → {run_dir}")
        else:
            console(f"run {run_id}: {describe_search(scenario)} → {run_dir}")
        try:
            fleet = LocalFleet(scenario, system, endpoints, cluster, tag, outcome, console)
            if search is None:
                Coordinator(fleet).run(places(points))
            else:
                Probes(scenario, system, Coordinator(fleet), outcome, console).run(search, context)
        except KeyboardInterrupt as exc:  # between two points: no node runs
            outcome.interrupted, outcome.signal = True, signal_name(exc)
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
    """Runs a capacity search's probes, one sweep point each through the coordinator,
    judging each as it ends."""

    scenario: Scenario
    system: BrokerSystem[Any]
    coordinator: Coordinator
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
            remaining_s = search_seconds(self.scenario, spec.max_probes - index - 1)
            self.coordinator.point(SweepPlace(point, spec.max_probes, remaining_s))
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
                f"probe {point.index}: its records cannot be read ({one_line(str(exc))})"
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


__all__ = ["BrokerError", "RunOutcome", "run_scenario"]
