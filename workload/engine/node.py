"""One client node: a process group (locally) or a machine (on AWS) running ``threads``
workers of one role, reporting progress once a second and writing its results when it ends.

A node spreads its workers over ``processes`` (default: one per CPU core, at most one per
worker) so that the client is not held to one core by Python's interpreter lock; each
process runs its share of the workers as threads (or asyncio tasks, where the system's
adapters are asyncio clients) and writes its own part of the node's results. A part
always writes what it recorded — also when a worker gave up, the broker died or the run
was interrupted — and a status file saying how it ended and how far its host's clock was
from the reference time (``workload.engine.clock``).
"""

from __future__ import annotations

import asyncio
import contextlib
import multiprocessing as mp
import os
import sys
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from brokers import registry
from brokers.base import Adapter, AsyncAdapter, BrokerSystem, Destination, Endpoints
from workload.engine import message
from workload.engine.caught_up import IdentityReporter
from workload.engine.client_loops import (
    run_receiver,
    run_receiver_async,
    run_sender,
    run_sender_async,
)
from workload.engine.clock import SINGLE_HOST, ClockState, read_clock
from workload.engine.naming import destination_name, point_tag, run_tag
from workload.engine.node_progress import Interval, Progress, current_second, until_next_report
from workload.engine.node_records import write_node
from workload.engine.recording import Records, WorkerRecorder
from workload.engine.signals import leave_stopping_to_the_coordinator
from workload.engine.start_gate import Once, StartGate
from workload.engine.worker import ReceiverLoop, SenderLoop, WorkerSettings
from workload.model.backlog import STEADY, BacklogSection
from workload.model.errors import RecordsNotWritten, first_line
from workload.model.results import NodeStatus, read_statuses, write_status
from workload.model.sections import LoadSection
from workload.model.sweep import SweepPoint


class StopFlag(Protocol):
    def is_set(self) -> bool: ...


class ProgressSink(Protocol):
    def put(self, item: Any) -> None: ...


class PhaseValue(Protocol):
    """The backlog phase the coordinator shares (a ``multiprocessing.Value``)."""

    value: int


@dataclass(frozen=True)
class NodeSpec:
    """Everything a node needs; picklable so it crosses into a spawned process."""

    run_dir: Path
    run_id: str
    tag: str
    point: int
    role: str  # "sender" | "receiver"
    node: int
    system: str
    endpoints: Endpoints
    params: dict[str, Any]
    destination: str
    load: LoadSection
    #: Which process of the node this is, and the workers it runs (all of them when None).
    part: int = 0
    workers: range | None = None
    #: The host's clock state before the point. The local runner's nodes share one host.
    clock: ClockState = SINGLE_HOST
    #: Seconds between the chunks of records the part writes while it runs
    #: (``[measurement] flush_interval``).
    flush_interval: float = 60.0
    #: The scenario's ``[backlog]``, whose phases the coordinator drives (local runs).
    backlog: BacklogSection | None = None

    @classmethod
    def of_point(
        cls,
        point: SweepPoint,
        role: str,
        node: int,
        *,
        run_dir: Path,
        run_id: str,
        system: str,
        endpoints: Endpoints,
        flush_interval: float = 60.0,
        backlog: BacklogSection | None = None,
    ) -> NodeSpec:
        """Node ``node`` of ``role`` at a sweep point, whole (:func:`split` into its
        processes); its tag and destination derive from the run id, the same on every
        machine."""
        tag = run_tag(run_id)
        return cls(
            run_dir=run_dir,
            run_id=run_id,
            tag=point_tag(tag, point.index),
            point=point.index,
            role=role,
            node=node,
            system=system,
            endpoints=endpoints,
            params=point.params,
            destination=destination_name(tag, point.index).name,
            load=point.load,
            flush_interval=flush_interval,
            backlog=backlog,
        )

    @property
    def worker_ids(self) -> range:
        return self.workers if self.workers is not None else range(self.load.threads_of(self.role))


def prepare_point(
    system: BrokerSystem[Any], endpoints: Endpoints, run_id: str, point: SweepPoint
) -> None:
    """Create a sweep point's destination, with the point's parameters (a failure raises);
    before any of its nodes starts."""
    params = system.params_model.model_validate(point.params)
    keyed = point.load.keys is not None
    system.prepare(endpoints, params, destination_name(run_tag(run_id), point.index, keyed))


def processes_for(load: LoadSection, role: str, cpus: int | None = None) -> int:
    """How many processes a node of ``role`` spreads its workers over (never more than
    its workers)."""
    wanted = load.processes or cpus or os.cpu_count() or 1
    return max(1, min(load.threads_of(role), wanted))


def split(spec: NodeSpec, cpus: int | None = None) -> list[NodeSpec]:
    """The node's processes: its workers in contiguous shares, as even as they divide."""
    count = processes_for(spec.load, spec.role, cpus)
    threads = spec.load.threads_of(spec.role)
    bounds = [threads * i // count for i in range(count + 1)]
    return [replace(spec, part=i, workers=range(bounds[i], bounds[i + 1])) for i in range(count)]


def run_node(
    spec: NodeSpec,
    stop: StopFlag,
    progress: ProgressSink | None = None,
    senders_done: StopFlag | None = None,
    phase: PhaseValue | None = None,
    gate: StartGate | None = None,
) -> NodeStatus:
    """Run the workers of one node to the end and write their results; ``phase``, with a
    backlog, is the phase the coordinator has the point in (:mod:`workload.engine.backlog`);
    ``gate``, locally, holds the senders until the point's receivers are in
    (:mod:`workload.engine.start_gate`)."""
    system = registry.get(spec.system)
    params = system.params_model.model_validate(spec.params)
    destination = Destination(spec.destination, keyed=spec.load.keys is not None)
    # Only senders use the payloads (receivers keep no pool).
    pool = message.payload_pool(spec.load, seed=spec.node) if spec.role == "sender" else []
    recorders = [WorkerRecorder(spec.role, spec.node, w) for w in spec.worker_ids]
    settings = [
        WorkerSettings(
            tag=spec.tag,
            node=spec.node,
            worker=w,
            load=spec.load,
            pool=pool,
            stop_requested=stop.is_set,
            senders_done=senders_done.is_set if senders_done is not None else lambda: True,
            seed=hash((spec.run_id, spec.point, spec.node, w)) & 0xFFFFFFFF,
            receive_batch=spec.load.receive_batch or system.receive_batch,
            backlog=spec.backlog,
            phase=(lambda: int(phase.value)) if phase is not None else lambda: STEADY,
            joined=Once(gate.settle) if gate is not None and spec.role == "receiver" else Once(),
        )
        for w in spec.worker_ids
    ]
    errors: list[str] = []
    interval = Interval(recorders if spec.role == "receiver" else [], current_second())
    # Only where its reports go: once it looked, the recorders keep what they replace for it.
    identities = IdentityReporter(spec.role, recorders) if progress is not None else None
    # Never flush a second the progress reports may still read.
    flusher = Flusher(spec, recorders, lambda: interval.last - Interval.SETTLE).start()

    def report(done: bool = False, latency: dict[int, int] | None = None) -> None:
        if progress is not None:
            latency = interval.take(current_second()) if latency is None else latency
            counts = (spec.point, spec.role, spec.node, spec.part, *_totals(recorders), done)
            new = identities.take() if identities is not None else None
            progress.put(
                Progress(*counts, interval.redelivered, processing_latency=latency, identities=new)
            )

    # A sender's client is handed to its loop once the point's receivers are in.
    held = gate if spec.role == "sender" else None

    def connect() -> Adapter[Any]:
        adapter = system.connect_blocking(spec.endpoints, params, destination)
        if held is not None:
            held.wait(stop.is_set)
        return adapter

    async def connect_async() -> AsyncAdapter[Any]:
        adapter = await system.connect_async(spec.endpoints, params, destination)
        if held is not None:
            await held.wait_async(stop.is_set)
        return adapter

    try:
        if system.asyncio:
            asyncio.run(_run_async(spec, connect_async, settings, recorders, errors, report))
        else:
            _run_threads(spec, connect, settings, recorders, errors, report)
    except Exception as exc:
        errors.append(first_line(exc))
    finally:
        left = flusher.stop()
        # The last interval's latencies, read before the records leave the recorders.
        last = interval.take(current_second()) if progress is not None else {}
        status = _keep_results(spec, recorders, errors, left)
        report(done=True, latency=last)
    return status


class Flusher:
    """Writes a node part's records in chunks while its workers run (docs/measurement.md
    §5): every ``flush_interval`` it takes out of each recorder the seconds that ended
    :data:`LAG` seconds ago and every identity so far, and writes them as the part's next
    chunk (:func:`write_node` with a cut). A run killed midway keeps every chunk written; a
    worker's memory holds at most an interval's records. A chunk that cannot be written
    stays in memory and goes into the next chunk, or the part's final files (:meth:`stop`):
    a chunk's cut never claims records that are not in it or an earlier chunk."""

    #: Seconds a chunk's cut lies behind the flush: a second keeps changing for a moment
    #: after it ends, and the progress reports read the last few again (:class:`Interval`).
    LAG = Interval.SETTLE + 2

    def __init__(
        self,
        spec: NodeSpec,
        recorders: list[WorkerRecorder],
        keep_from: Callable[[], int] | None = None,
    ) -> None:
        self.spec = spec
        self.recorders = recorders
        #: The earliest second that must stay in the recorders (the progress reports'
        #: next read), if any.
        self.keep_from = keep_from
        #: Records taken whose chunk could not be written.
        self.pending: list[Records] = []
        self.chunks = 0
        #: The cut of the last chunk: every chunk's is later (its file name holds it).
        self.last_cut = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="flusher", daemon=True)

    def start(self) -> Flusher:
        self._thread.start()
        return self

    def stop(self) -> list[Records]:
        """End flushing (a chunk being written is finished first); what was taken but not
        written."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()
        return self.pending

    def _loop(self) -> None:
        while not self._stop.wait(self.spec.flush_interval):
            cut = current_second() - self.LAG
            self.flush(cut if self.keep_from is None else min(cut, self.keep_from()))

    def flush(self, cut: int) -> None:
        """Write the records before wall-clock second ``cut`` (and every received identity)
        as a chunk; nothing when ``cut`` is not past the last chunk's (a flush late by a
        second, a clock stepped back): the records wait for the next."""
        if cut <= self.last_cut:
            return
        self.last_cut = cut
        spec = self.spec
        taken = [*self.pending, *(recorder.take(cut) for recorder in self.recorders)]
        try:
            write_node(
                spec.run_dir, spec.run_id, spec.point, spec.role, spec.node, taken, spec.part, cut
            )
        except RecordsNotWritten:
            self.pending = taken
            return
        self.pending = []
        self.chunks += 1


def _keep_results(
    spec: NodeSpec,
    recorders: list[WorkerRecorder],
    errors: list[str],
    pending: list[Records] | None = None,
) -> NodeStatus:
    """Write the part's records (what its recorders hold, and ``pending`` chunks that could
    not be written) and its status; the status. A results file that cannot be
    written (a full disk, a read-only directory) is one line here, in this process, and the
    first thing the part's status says."""
    unwritten: list[str] = []
    left = [*(pending or []), *(recorder.take() for recorder in recorders)]
    try:
        write_node(spec.run_dir, spec.run_id, spec.point, spec.role, spec.node, left, spec.part)
    except RecordsNotWritten as exc:
        unwritten.append(str(exc))
    sent, received, error_count = _totals(recorders)
    status = NodeStatus(
        point=spec.point,
        role=spec.role,
        node=spec.node,
        part=spec.part,
        ok=not errors and not unwritten,
        error="; ".join([*unwritten[:1], *errors[:1]]),
        sent=sent,
        received=received,
        errors=error_count,
        clock_offset_s=spec.clock.offset_s,
        clock_source=spec.clock.source,
    )
    try:
        write_status(spec.run_dir, status)
    except RecordsNotWritten as exc:
        unwritten.append(str(exc))
    if unwritten:
        with contextlib.suppress(OSError, ValueError):  # a closed terminal
            lead = "\r\033[K" if sys.stderr.isatty() else ""  # over the progress line
            line = f"{lead}brokerbench: {status.key.who}: {unwritten[0]}"
            print(line, file=sys.stderr, flush=True)
    return status


def _totals(recorders: list[WorkerRecorder]) -> tuple[int, int, int]:
    """Messages sent and received, and errors, of a part's workers so far."""
    totals = [(r.total_sent, r.total_received, r.total_errors) for r in recorders]
    return sum(t[0] for t in totals), sum(t[1] for t in totals), sum(t[2] for t in totals)


def _run_threads(
    spec: NodeSpec,
    connect: Callable[[], Adapter[Any]],
    settings: list[WorkerSettings],
    recorders: list[WorkerRecorder],
    errors: list[str],
    report: Callable[[], None],
) -> None:
    def work(i: int) -> None:
        adapter: Adapter[Any] | None = None
        try:
            adapter = connect()
            if spec.role == "sender":
                run_sender(adapter, SenderLoop(settings[i], recorders[i]))
            else:
                run_receiver(adapter, ReceiverLoop(settings[i], recorders[i]))
        except Exception as exc:
            errors.append(first_line(exc))
        finally:
            settings[i].joined()  # a receiver that ended is not awaited
            if adapter is not None:
                with contextlib.suppress(Exception):
                    adapter.close()

    threads = [
        threading.Thread(target=work, args=(i,), name=f"{spec.role}-{i}", daemon=True)
        for i in range(len(settings))
    ]
    for t in threads:
        t.start()
    while any(t.is_alive() for t in threads):
        deadline = time.monotonic() + until_next_report()
        for t in threads:
            t.join(timeout=max(0.0, deadline - time.monotonic()))
        report()


async def _run_async(
    spec: NodeSpec,
    connect: Callable[[], Awaitable[AsyncAdapter[Any]]],
    settings: list[WorkerSettings],
    recorders: list[WorkerRecorder],
    errors: list[str],
    report: Callable[[], None],
) -> None:
    async def work(i: int) -> None:
        adapter: AsyncAdapter[Any] | None = None
        try:
            adapter = await connect()
            if spec.role == "sender":
                await run_sender_async(adapter, SenderLoop(settings[i], recorders[i]))
            else:
                await run_receiver_async(adapter, ReceiverLoop(settings[i], recorders[i]))
        except Exception as exc:
            errors.append(first_line(exc))
        finally:
            settings[i].joined()  # a receiver that ended is not awaited
            if adapter is not None:
                with contextlib.suppress(Exception):
                    await adapter.close()

    tasks = [asyncio.create_task(work(i)) for i in range(len(settings))]
    while not all(t.done() for t in tasks):
        await asyncio.wait(tasks, timeout=until_next_report())
        report()


def node_process(
    spec: NodeSpec,
    stop: StopFlag,
    progress: ProgressSink | None,
    senders_done: StopFlag | None,
    phase: PhaseValue | None = None,
    gate: StartGate | None = None,
) -> None:
    """Entry point of a spawned node process: signals are the coordinator's to handle."""
    leave_stopping_to_the_coordinator()
    run_node(spec, stop, progress, senders_done, phase, gate)


def run_node_processes(spec: NodeSpec, stop: StopFlag) -> list[NodeStatus]:
    """Run a whole node on a machine of its own (``brokerbench node``), its workers spread
    over processes; the statuses of its parts.

    The machine's clock state is read first (chrony) and recorded in every part's status.
    ``stop`` (e.g. set by SIGTERM) is passed on to every process. A process that ends
    without writing its status is reported as a failed part.
    """
    parts = split(replace(spec, clock=read_clock()))
    if len(parts) == 1:
        return [run_node(parts[0], stop)]
    ctx = mp.get_context("spawn")
    stop_all = ctx.Event()
    processes = [
        ctx.Process(target=node_process, args=(part, stop_all, None, None), name=f"part-{i}")
        for i, part in enumerate(parts)
    ]
    for process in processes:
        process.start()
    while any(p.is_alive() for p in processes):
        if stop.is_set():
            stop_all.set()
        for process in processes:
            process.join(timeout=0.5)
    written = {
        s.part: s
        for s in read_statuses(spec.run_dir)
        if (s.point, s.role, s.node) == (spec.point, spec.role, spec.node)
    }
    return [
        written.get(part.part)
        or NodeStatus(
            point=spec.point,
            role=spec.role,
            node=spec.node,
            part=part.part,
            ok=False,
            error=f"process {part.part} exited with code {process.exitcode} without results",
        )
        for part, process in zip(parts, processes, strict=True)
    ]
