"""The client nodes of a local run: one process per node part on this machine, driven
through a sweep point by the coordinator (:class:`workload.engine.coordinator.Fleet`).

A point is released by starting its processes and the resource sampler
(:mod:`workload.engine.point_telemetry`: every broker node's process group, every client
node's processes, the machine); while they run, the live progress view
merges what they report, the senders' end is passed on to the receivers, the point's
faults (:mod:`workload.engine.faults`) start their clock at the first confirmed message, and a
broker node that died — unless down by a declared fault — fails the run. Ctrl-C (or a
signal the runner turns into it) stops the workers and keeps what was recorded. A node
process that left no status gets one saying so, for the analysis.
"""

from __future__ import annotations

import contextlib
import math
import multiprocessing as mp
import queue
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from brokers.base import BrokerSystem, Destination, Endpoints, LocalCluster
from workload.engine.backlog import BacklogClock, initial_phase
from workload.engine.caught_up import CaughtUp
from workload.engine.coordinator import SweepPlace
from workload.engine.faults import FaultClock, start_faults
from workload.engine.naming import destination_name
from workload.engine.node import NodeSpec, node_process, prepare_point, split
from workload.engine.node_progress import Progress
from workload.engine.point_telemetry import PointTelemetry, sampler_targets
from workload.engine.progress import ProgressView
from workload.engine.signals import held, signal_name
from workload.engine.start_gate import StartGate
from workload.engine.telemetry import Sampler
from workload.model.backlog import HOLD, write_phases
from workload.model.errors import RecordsNotWritten
from workload.model.faults import FaultRecord, PointTimeline, undeclared_death, write_timeline
from workload.model.results import NodeStatus, read_statuses, write_status
from workload.model.scenario import Scenario
from workload.model.sections import LoadSection

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


@dataclass
class _Running:
    """One released sweep point: its node processes and what watches them."""

    destination: Destination
    specs: list[NodeSpec]
    processes: list[Any]
    stop: Any
    senders_done: Any
    progress: Any
    view: ProgressView
    faults: FaultClock | None
    load: LoadSection
    telemetry: PointTelemetry
    #: When the senders were seen done (monotonic; 0 while they send).
    senders_done_at: float = 0.0
    dead_reported: set[str] = field(default_factory=set)
    #: Broker nodes that died without a declared fault, and when they were seen dead.
    deaths: list[tuple[str, int]] = field(default_factory=list)
    #: When the coordinator first heard of a confirmed send (wall-clock ns; the faults' clock).
    sending_ns: int | None = None
    #: The point's backlog phases, with ``[backlog]``.
    backlog: BacklogClock | None = None
    #: The phase shared with the node processes: held here for as long as they run (a
    #: spawned child rebuilds it from its name, which must still exist by then).
    phase: Any = None
    #: The start gate's shared count, held likewise (:mod:`workload.engine.start_gate`).
    gate: StartGate | None = None


@dataclass
class LocalFleet:
    """Node processes on this machine (see the module); errors and interruption go to
    ``outcome``."""

    scenario: Scenario
    system: BrokerSystem[Any]
    endpoints: Endpoints
    cluster: LocalCluster | None
    tag: str
    outcome: RunOutcome
    console: Console
    _running: _Running | None = field(default=None, init=False)

    @property
    def stopped(self) -> bool:
        return self.outcome.interrupted or bool(self.outcome.errors)

    def prepare(self, place: SweepPlace) -> str | None:
        """Say which point starts and create its destination (a failure raises)."""
        point = place.point
        rate = f" rate={point.load.rate:g}/s per sender worker" if point.load.rate else ""
        repeat = self.scenario.repeat
        run = f" (run {point.repeat + 1} of {repeat})" if repeat > 1 else ""
        load = point.load
        senders, receivers = load.threads_of("sender"), load.threads_of("receiver")
        threads = (
            f"threads={senders}"
            if senders == receivers
            else f"sender_threads={senders} receiver_threads={receivers}"
        )
        self.console(
            f"{place.position}: {threads} "
            f"sender_nodes={load.sender_nodes} receiver_nodes={point.receiver_nodes} "
            f"message_size={load.message_size.label}{rate}{run}"
        )
        prepare_point(self.system, self.endpoints, self.outcome.run_id, point)
        return None

    def release(self, place: SweepPlace, problem: str | None) -> None:
        """Start the point's node processes (``problem`` is always None: a failed
        preparation raised)."""
        point = place.point
        destination = destination_name(self.tag, point.index, point.load.keys is not None)
        ctx = mp.get_context("spawn")
        stop, senders_done, progress = ctx.Event(), ctx.Event(), ctx.Queue()
        section = self.scenario.backlog
        phase = ctx.Value("i", initial_phase(section))
        receivers = point.receiver_nodes * point.load.threads_of("receiver")
        gate = StartGate(ctx.Value("i", 0), receivers)
        nodes = [
            NodeSpec.of_point(
                point,
                role,
                node,
                run_dir=self.outcome.run_dir,
                run_id=self.outcome.run_id,
                system=self.system.name,
                endpoints=self.endpoints,
                flush_interval=self.scenario.measurement.flush_interval,
                backlog=section,
            )
            for role, count in (
                ("receiver", point.receiver_nodes),
                ("sender", point.load.sender_nodes),
            )
            for node in range(count)
        ]
        specs = [part for node_spec in nodes for part in split(node_spec)]
        processes = [
            ctx.Process(
                target=node_process,
                args=(spec, stop, progress, senders_done, phase, gate),
                name=f"{spec.role}-{spec.node}.{spec.part}",
            )
            for spec in specs
        ]
        label = f"{place.position} {point.label}"
        view = ProgressView(label, point=point, remaining_s=place.remaining_s)
        faults = start_faults(self.scenario, self.cluster, destination, point.index, self.console)
        telemetry = PointTelemetry.of(self.outcome.run_dir, self.scenario)
        running = self._running = _Running(
            destination,
            specs,
            processes,
            stop,
            senders_done,
            progress,
            view,
            faults,
            point.load,
            telemetry,
        )
        running.phase, running.gate = phase, gate
        if section is not None:
            # Bytes queued are reckoned from the mean message size.
            mean_size = math.ceil(point.load.message_size.average)
            running.backlog = BacklogClock(section, point.index, mean_size, phase)
        with self._guard(place, running):
            for process in processes:
                process.start()
            telemetry.sampler = Sampler(
                self.outcome.run_id,
                point.index,
                lambda: sampler_targets(self.cluster, running.specs, running.processes),
                self.scenario.measurement.telemetry_interval,
                host_data_dir=self.outcome.run_dir,
            ).start()

    def run(self, place: SweepPlace) -> None:
        """Watch the processes until they end: progress, the senders' end, the faults'
        clock, broker nodes that died."""
        running = self._current()
        if not self.outcome.interrupted:
            with self._guard(place, running):
                self._watch(running)

    @contextlib.contextmanager
    def _guard(self, place: SweepPlace, running: _Running) -> Iterator[None]:
        """Ctrl-C (or a signal turned into it) stops the workers, keeping what they
        recorded; any other exception stops them and ends the point's faults, then goes on."""
        try:
            yield
        except KeyboardInterrupt as exc:
            self._interrupted(exc, running)
            _join(running.processes, timeout=60)
        except BaseException:
            self._stop(running)
            self.finish_faults(place, restore=not place.last)
            raise

    def _interrupted(self, exc: BaseException, running: _Running | None) -> None:
        """A stopping signal: the run ends after this point, its workers told to stop."""
        if running is not None:
            running.stop.set()
        if self.outcome.interrupted:
            return
        self.outcome.interrupted = True
        self.outcome.signal = signal_name(exc)
        self.console(
            f"\ninterrupted ({self.outcome.signal}): stopping the workers and keeping "
            "what was recorded…"
        )

    @contextlib.contextmanager
    def _step(self) -> Iterator[None]:
        """A step of a point's end (its nodes stopping, its faults ending, its statuses
        read) runs to its end; a stopping signal that came meanwhile takes effect after it:
        the run is interrupted and no further point runs (it was lost inside the wait for
        the nodes before)."""
        try:
            with held():
                yield
        except KeyboardInterrupt as exc:
            self._interrupted(exc, self._running)

    def _watch(self, running: _Running) -> None:
        processes, view, faults = running.processes, running.view, running.faults
        senders = [
            p for p, spec in zip(processes, running.specs, strict=True) if spec.role == "sender"
        ]
        caught_up = CaughtUp.for_point(running.load.idle_timeout, len(senders), faults is None)
        flush_interval = self.scenario.measurement.flush_interval
        while any(p.is_alive() for p in processes):
            _drain(running.progress, view, timeout=0.25, caught_up=caught_up)
            gate = running.gate
            view.receivers_joining(None if gate is None or gate.open() else gate.count())
            view.tick()
            if time.monotonic() - running.telemetry.flushed_at >= flush_interval:
                running.telemetry.flush()
            if not running.senders_done_at and not any(p.is_alive() for p in senders):
                running.senders_done_at = time.time()
            # Receivers may idle out once the senders are done — with a backlog, only once
            # its drain has nothing queued.
            drained = running.backlog is None or running.backlog.drained(self._queued(running))
            if running.senders_done_at and drained and not running.senders_done.is_set():
                running.senders_done.set()
            sent, received, errors = view.totals()
            if not running.stop.is_set() and caught_up.check(
                time.monotonic(),
                senders_done=running.senders_done.is_set(),
                clean=faults is None and not running.deaths,
                sent=sent,
                received=received,
                errors=errors,
            ):
                running.stop.set()  # every confirmed identity is in: no idle timeout to wait
            if running.sending_ns is None and view.totals()[0] > 0:
                running.sending_ns = time.time_ns()
                if faults is not None:
                    faults.start()
            if running.backlog is not None:
                self._backlog(running)
            if self.cluster is not None:
                # A node down by a declared fault is no failure; any other death is.
                declared = faults.declared_down() if faults is not None else set()
                dead = set(self.cluster.dead_nodes()) - declared - running.dead_reported
                for name in dead:
                    running.dead_reported.add(name)
                    running.deaths.append((name, time.time_ns()))
                    how = self.cluster.death(name)
                    self.outcome.errors.append(
                        f"broker node {name} died during the run" + (f" ({how})" if how else "")
                    )

    def _backlog(self, running: _Running) -> None:
        """Move the backlog's phases on; at the drain limit, stop the point."""
        clock = running.backlog
        assert clock is not None
        queued = self._queued(running)
        was = clock.phase
        if clock.tick(running.sending_ns, queued, bool(running.senders_done_at)):
            running.stop.set()
            self.console(
                f"\n  drain limit ({clock.section.drain_limit:g} s) reached with {queued:,} "
                "message(s) queued by the latest progress reports: stopping the point (what "
                "is still queued counts as not drained)"
            )
        elif clock.phase != was:
            phases = clock.phases
            what = (
                "receivers hold: the backlog builds"
                if clock.phase == HOLD
                else f"the drain begins ({phases.drain_reason}; {queued:,} queued by the "
                "latest progress reports)"
            )
            self.console(f"\n  {what}")

    @staticmethod
    def _queued(running: _Running) -> int:
        """Messages queued by the nodes' latest progress reports: confirmed sent −
        received, redeliveries left out."""
        sent, received, _ = running.view.totals()
        return max(0, sent - (received - running.view.redelivered))

    def await_nodes(self, place: SweepPlace) -> None:
        """Stop the node processes still running (nodes ignore SIGTERM: a last one is
        killed) and close the progress view."""
        with self._step():
            self._stop(self._current())

    def finish_faults(self, place: SweepPlace, restore: bool) -> None:
        """End the point's faults (bringing nodes back when ``restore`` and the point was
        not interrupted) and keep the timeline."""
        with self._step():
            self._finish_faults(place, restore)

    def _finish_faults(self, place: SweepPlace, restore: bool) -> None:
        running = self._current()
        faults = running.faults
        if faults is None and not running.deaths:
            return
        complete = not self.outcome.interrupted
        if faults is not None:
            timeline = faults.finish(restore=restore and complete, complete=complete)
            self.outcome.errors.extend(faults.errors)
            sending_ns = faults.sending_ns
        else:
            timeline = PointTimeline(point=place.point.index, faults=[])
            sending_ns = timeline.sending_ns = running.sending_ns
        timeline.faults += self._deaths(running, len(timeline.faults), sending_ns)
        try:
            write_timeline(self.outcome.run_dir, timeline)
        except RecordsNotWritten as exc:
            self.outcome.errors.append(str(exc))

    def _deaths(self, running: _Running, first: int, sending_ns: int | None) -> list[FaultRecord]:
        """Undeclared deaths as fault records after the declared ones (``first`` on), so
        that the analysis says what they did (gaps, lost or unavailable, duplicates)."""
        local = self.system.local
        support = local.fault_support(self.scenario.broker.topology) if local else None
        fails_over = support.fails_over if support is not None else False
        return [
            undeclared_death(first + i, name, died_ns, sending_ns, fails_over)
            for i, (name, died_ns) in enumerate(running.deaths)
        ]

    def collect(self, place: SweepPlace) -> None:
        """Every node part's status: a failed one is an error, a missing one is written
        (it exited without results) and named; the backlog's phases are kept."""
        with self._step():
            self._collect(place)

    def _collect(self, place: SweepPlace) -> None:
        running, self._running = self._current(), None
        run_dir, point = self.outcome.run_dir, place.point
        if running.backlog is not None:
            try:
                write_phases(run_dir, running.backlog.phases)
            except RecordsNotWritten as exc:
                self.outcome.errors.append(str(exc))
        statuses = {
            (s.role, s.node, s.part): s for s in read_statuses(run_dir) if s.point == point.index
        }
        for spec, process in zip(running.specs, running.processes, strict=True):
            status = statuses.get((spec.role, spec.node, spec.part))
            who = f"{spec.role} node {spec.node}" + (f" (process {spec.part})" if spec.part else "")
            if status is None:
                self.outcome.errors.append(_record_missing(run_dir, spec, process, who))
            elif not status.ok:
                self.outcome.errors.append(f"{who}: {status.error}")
        if any(s.errors for s in statuses.values()) and not self.outcome.errors:
            failed = sum(s.errors for s in statuses.values())
            self.console(
                f"  note: {failed} failed call(s), not retried: a failed send's batch is "
                "abandoned (see the errors column)"
            )

    def _current(self) -> _Running:
        assert self._running is not None, "no sweep point released"
        return self._running

    def _stop(self, running: _Running) -> None:
        _drain(running.progress, running.view, timeout=0)
        warmup = self.scenario.measurement.warmup or 0.0
        judged = running.telemetry.end(
            running.view, running.senders_done_at, running.load, warmup, self.console
        )
        running.view.close(judged)
        running.stop.set()
        _join(running.processes, timeout=5)
        for process in running.processes:
            if process.is_alive():
                process.kill()  # nodes ignore SIGTERM: stopping them is the coordinator's
                process.join(timeout=5)


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


def _drain(progress: Any, view: ProgressView, timeout: float, caught_up: Any = None) -> None:
    """Hand the nodes' reports to the view and, with one, to the early end (:class:`CaughtUp`)."""
    try:
        item = progress.get(timeout=timeout) if timeout else progress.get_nowait()
        while True:
            if isinstance(item, Progress):
                view.update(item)
                if caught_up is not None:
                    caught_up.update(item)
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
