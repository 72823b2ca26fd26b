"""The resource telemetry of one local sweep point: what the sampler reads, its rows kept as
they come, and the closing line's judgement of what set the pace.

The local fleet (:mod:`workload.engine.local_fleet`) starts a
:class:`~workload.engine.telemetry.Sampler` when it releases a point, over the
:func:`sampler_targets` of the moment (every broker node's process group, every client
node's processes). While the point runs, :meth:`PointTelemetry.flush` writes the rows so
far as a chunk every flush interval, so that a run killed later keeps them; at the point's
end :meth:`PointTelemetry.end` stops the sampler, writes the rest and says, from the
rows of the sending seconds after the warm-up, what set the pace (the analysis judges
again over the exact measurement period).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from brokers.base import LocalCluster
from workload.engine.cpu_pins import CpuPins
from workload.engine.node import NodeSpec
from workload.engine.progress import ProgressView
from workload.engine.telemetry import Sampler, Target, node_means, process_groups
from workload.model.errors import RecordsNotWritten
from workload.model.results import read_telemetry_chunks, write_telemetry
from workload.model.scenario import Scenario
from workload.model.sections import LoadSection
from workload.model.verdict import NodeUsage, point_usage, verdict

Console = Callable[[str], None]


def sampler_targets(
    cluster: LocalCluster | None, specs: list[NodeSpec], processes: list[Any]
) -> list[Target]:
    """What the sampler reads now: each broker node's process group and each client node's
    processes."""
    targets = []
    if cluster is not None:
        groups = process_groups()
        targets += [
            Target(
                "broker",
                node.name,
                tuple(groups.get(node.group, ()) if node.group is not None else ()),
                node.data_dir,
                node.interface,
            )
            for node in cluster.processes()
        ]
    clients: dict[tuple[str, int], list[int]] = {}
    for spec, process in zip(specs, processes, strict=True):
        pids = clients.setdefault((spec.role, spec.node), [])
        if process.pid is not None and process.is_alive():
            pids.append(process.pid)
    targets += [
        Target(role, f"{role}-{node}", tuple(pids)) for (role, node), pids in clients.items()
    ]
    return targets


@dataclass
class PointTelemetry:
    """The sampler of one released point (see the module) and its rows not yet in the
    final file."""

    run_dir: Path
    sampler: Sampler | None = None
    #: When the sampler's rows were last written as a chunk (monotonic), and rows whose
    #: chunk could not be written (they go into the final file).
    flushed_at: float = field(default_factory=time.monotonic)
    unflushed: list[dict[str, Any]] = field(default_factory=list)
    #: Whether a chunk of telemetry was written (the closing line reads them back).
    flushed: bool = False
    #: ``[broker] cpus``: the cores of the broker and of the clients (the closing line
    #: judges each side against its own).
    pinned: tuple[int, int] | None = None

    @classmethod
    def of(cls, run_dir: Path, scenario: Scenario) -> PointTelemetry:
        """A point's telemetry, knowing the cores ``[broker] cpus`` pinned each side to."""
        local = scenario.broker.deployment == "local"
        pins = CpuPins.of(scenario.broker.cpus) if local else None
        return cls(run_dir, pinned=None if pins is None else pins.cores)

    def flush(self) -> None:
        """Write the sampler's rows so far as a chunk (a run killed later keeps them) and
        drop them from memory; rows that cannot be written wait for the final file."""
        self.flushed_at = time.monotonic()
        sampler = self.sampler
        if sampler is None:
            return
        rows = sampler.take()
        if not rows:
            return
        try:
            write_telemetry(self.run_dir, rows, cut=int(time.time()))
            self.flushed = True
        except RecordsNotWritten:
            self.unflushed += rows

    def end(
        self,
        view: ProgressView,
        senders_done_at: float,
        load: LoadSection,
        warmup: float,
        console: Console,
    ) -> str:
        """Stop the sampler, keep its rows, and judge from them what set the pace (the
        analysis judges again over the exact measurement period)."""
        sampler, self.sampler = self.sampler, None
        if sampler is None:
            return ""
        rows = [*self.unflushed, *sampler.stop()]
        self.unflushed = []
        if sampler.failure:
            console(f"  note: {sampler.failure} (the rows before it are kept)")
        try:
            write_telemetry(self.run_dir, rows)
        except RecordsNotWritten as exc:
            console(f"  note: telemetry not kept: {exc}")
        if self.flushed:  # the closing line judges the whole point
            rows = read_telemetry_chunks(self.run_dir, sampler.point) + rows
        first, last = view.sending_span()
        if not first:
            return ""
        start, end = int(first + warmup) + 1, int(senders_done_at or last) - 1
        if end < start:  # a point too short for whole seconds after its warm-up
            start, end = int(first), int(senders_done_at or last)
        usage = point_usage(
            (NodeUsage.of_row(r) for r in node_means(rows, start, end)),
            rate=load.rate,
            workers=load.sender_workers,
            max_in_flight=load.max_in_flight,
            send_msgs_per_s=view.send_rate(),
            pinned=self.pinned,
        )
        judged = verdict(usage)
        return f"{judged.limit} ({judged.reason})"
