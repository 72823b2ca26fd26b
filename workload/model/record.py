"""The run record's shapes (docs/measurement.md §3): the run context written as ``context.json``, each of
its sweep points and a capacity search's record — typed, for every writer and reader.

:mod:`workload.engine.context` builds a :class:`RunContext`; the runner (locally) and ``brokerbench
prepare`` (on AWS) fill it in and write it; the analysis, the terminal summary, the report
and the overview read it back with :meth:`RunContext.of` — from a file or from the raw
mapping a caller holds.

A context is read leniently, as runs of every version wrote it: each model keeps the keys it
does not name (``extra="allow"``, so a record written by another version comes back
whole), and a key an older version did not write takes its default (a point's ``repeat`` 0,
``base`` its own index, ``client`` and ``processes_per_node`` None). :meth:`RunContext.dump`
gives the same mapping the runs of today write: a context that was read and dumped again is
unchanged.

A run's ``status`` reads "running" until its coordinator writes how it ended; a local run
records its coordinator (:class:`CoordinatorRecord`), so a reader on its host can tell a
run in progress from one whose coordinator is gone without writing its end
(:attr:`RunContext.ended`, :attr:`RunContext.state`).
"""

from __future__ import annotations

import json
import os
import socket
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from brokers.durability import Durability
from workload.model.layout import LAYOUT
from workload.model.sections import LoadSection

Outcome = Literal[
    "running", "below_low", "at_least_high", "within_precision", "max_probes", "incomplete"
]


class Record(BaseModel):
    """A part of the run record: keys it does not name are kept as they were."""

    model_config = ConfigDict(extra="allow")


class PointLoad(LoadSection):
    """A sweep point's resolved load: the scenario's :class:`LoadSection` as the record
    holds it — the same fields and defaults, read leniently like the rest of the record
    (keys it does not name kept, numbers as JSON gives them). ``receiver_nodes`` was
    resolved when the point was built (twice the sender nodes unless given); None only in
    a record that left it out."""

    model_config = ConfigDict(extra="allow", frozen=False, strict=False)


class PointEntry(Record):
    """One sweep point as it runs (an entry of the context's ``points``): its index, label,
    swept values, resolved load and parameters, and — with ``repeat`` — which run of which
    point of the un-repeated sweep it is."""

    point: int
    label: str = ""
    #: The swept values only.
    varied: dict[str, Any] = Field(default_factory=dict)
    #: Which run of the point this is (from 0), and the point of the un-repeated sweep it is
    #: a run of: the runs of one point share ``base`` (an older record: its own index).
    repeat: int = 0
    base: int = -1
    load: PointLoad = Field(default_factory=PointLoad)  # type: ignore[arg-type]
    params: dict[str, Any] = Field(default_factory=dict)
    #: The client library the parameters choose (None: not recorded).
    client: str | None = None
    #: Processes each client node spreads its workers over (None: not recorded, one); a
    #: receiver node's, where it differs (None: the same).
    processes_per_node: int | None = None
    receiver_processes_per_node: int | None = None

    @model_validator(mode="after")
    def _base_defaults_to_the_point(self) -> PointEntry:
        if self.base < 0:
            self.base = self.point
        return self

    @property
    def processes(self) -> int:
        """Processes per sender node (one where the record does not say)."""
        return self.processes_per_node or 1

    def processes_of(self, role: str) -> int:
        """Processes per node of ``role``: a receiver node's where the record gives them,
        else :attr:`processes`."""
        if role == "receiver" and self.receiver_processes_per_node:
            return self.receiver_processes_per_node
        return self.processes


class BrokerRecord(Record):
    """The broker: the system's name and title, what the run knew of it (deployment,
    topology, endpoints) and what its servers said of themselves (version, settings) — the
    latter as the run gave them, read through the properties below."""

    system: str = ""
    title: str = ""
    caveats: list[str] = Field(default_factory=list)
    stand_in: str = ""

    @property
    def name(self) -> str:
        """The title, else the system's name, else "?"."""
        return self.title or self.system or "?"

    def given(self, key: str) -> Any:
        """What the run recorded under ``key`` (None: nothing)."""
        return (self.model_extra or {}).get(key)

    @property
    def deployment(self) -> str | None:
        """ "local" (started by the run) or "endpoints" (given)."""
        return self.given("deployment")

    @property
    def topology(self) -> str | None:
        return self.given("topology")

    @property
    def endpoints(self) -> list[str]:
        return list(self.given("endpoints") or [])

    @property
    def version(self) -> Any:
        """The version its servers reported (None: not reported)."""
        return self.given("version")

    @property
    def key_order(self) -> bool:
        """Whether the system promises per-key order to the messages of a keyed load (the
        run's ``broker.keys``; False where it sends no keys, or the run predates keys)."""
        keys = self.given("keys")
        return isinstance(keys, Mapping) and keys.get("ordered") is True

    @property
    def durability(self) -> Durability | None:
        """What a confirmed message survives, as the run derived it from the settings read
        back (None: the system derives none, or the run predates it)."""
        return Durability.of(self.given("durability"))


class CostRecord(Record):
    """The AWS fleet of a run on AWS: its region and instances per type."""

    region: str = ""
    instances: dict[str, int] = Field(default_factory=dict)

    @property
    def prices(self) -> Any:
        """A price table other than the packaged one, where the record names one
        (``analysis.prices.load_prices``)."""
        return (self.model_extra or {}).get("prices")


class Measurement(Record):
    """The scenario's ``[measurement]`` (seconds; a hand-written record may give a text)."""

    warmup: int | float | str | None = None
    window: int | float | str | None = None
    step: int | float | str | None = None


class ScenarioRecord(Record):
    """The resolved scenario as recorded (``workload.engine.context.recorded_scenario``)."""

    name: str = "?"
    description: str = ""
    measurement: Measurement = Field(default_factory=Measurement)
    repeat: int = 1


class ProbeRecord(BaseModel):
    """One probe: the sweep point it ran as, its total target rate and how it came out."""

    #: The sweep point (its index in the run, from 0; printed as ``probe <point>``).
    point: int
    #: Target msgs/s in total over every sender worker, and per worker (``load.rate``).
    rate: float
    rate_per_worker: float
    #: None: not judged — the run stopped during the probe (see ``reason``).
    holds: bool | None
    reason: str
    send_msgs_per_s: float | None = None
    receive_msgs_per_s: float | None = None
    measured_seconds: int | None = None
    errors: int | None = None
    processing_latency_p99_ms: float | None = None


class SearchRecord(BaseModel):
    """A capacity search as the run context records it (its ``search``)."""

    #: The scenario's ``[search]`` as given (``slo_p99`` in seconds).
    spec: dict[str, float | int]
    slo_p99_ms: float
    #: Sender workers of every probe (``threads × sender_nodes``).
    sender_workers: int
    probes: list[ProbeRecord] = []
    #: The bracket: the highest rate that held and the lowest that failed (msgs/s in
    #: total; None: none yet). The capacity at SLO is at least the one and below the other.
    highest_holding: float | None = None
    lowest_failing: float | None = None
    outcome: Outcome = "running"
    #: The search ended by its own rule (False: running, or stopped by the run).
    complete: bool = False
    #: Why an incomplete search stopped ("the run was interrupted (SIGINT)").
    note: str = ""
    #: The result in words (the line printed at the end).
    result: str = ""


class CoordinatorRecord(Record):
    """The process that coordinates a local run (``brokerbench run``), so that a reader can
    tell a run in progress from one whose coordinator is gone without writing how it ended
    (killed with SIGKILL or by the out-of-memory killer; a full disk when it came to write
    it)."""

    host: str = ""
    #: The boot the process ran in (``/proc/sys/kernel/random/boot_id``; "" not known).
    boot: str = ""
    pid: int = 0
    #: When the process started, in clock ticks after boot (``/proc/<pid>/stat``): a process
    #: that got its pid since is not taken for it (None: not known).
    started_ticks: int | None = None

    @classmethod
    def this_process(cls) -> CoordinatorRecord:
        return cls.of_process(os.getpid())

    @classmethod
    def of_process(cls, pid: int) -> CoordinatorRecord:
        """Process ``pid`` of this host."""
        return cls(host=socket.gethostname(), boot=_boot(), pid=pid, started_ticks=_ticks(pid))

    def gone(self) -> bool | None:
        """Whether the process has ended (None: this host cannot tell — it ran elsewhere)."""
        if not self.pid or self.host != socket.gethostname():
            return None
        if self.boot and _boot() and self.boot != _boot():
            return True  # the machine restarted since
        try:
            os.kill(self.pid, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            pass  # a process of another user has the pid: below, its start tells
        ticks = _ticks(self.pid)
        return ticks is not None and self.started_ticks is not None and ticks != self.started_ticks


def _boot() -> str:
    try:
        return Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    except OSError:
        return ""


def _ticks(pid: int) -> int | None:
    """When process ``pid`` started, in clock ticks after boot (None: not known)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
        return int(stat.rsplit(b")", 1)[1].split()[19])
    except (OSError, IndexError, ValueError):
        return None


#: What a reader says of a run recorded as running whose coordinator is gone.
COORDINATOR_GONE = "interrupted (the coordinator is gone)"

#: Keys a context has only when they apply: left out rather than written as null.
_WHEN_GIVEN = ("search", "cost", "coordinator")


class RunContext(Record):
    """The run context: what makes two runs comparable (docs/measurement.md §3)."""

    run_id: str | None = None
    scenario_file: str | None = None
    scenario: ScenarioRecord = Field(default_factory=ScenarioRecord)
    #: The sweep points (a capacity search's probes, added as they start).
    points: list[PointEntry] = Field(default_factory=list)
    broker: BrokerRecord = Field(default_factory=BrokerRecord)
    #: Client library versions by distribution name (None: not installed).
    clients: dict[str, str | None] = Field(default_factory=dict)
    host: dict[str, Any] = Field(default_factory=dict)
    #: The clock state of one host and where every node's is (``workload.engine.context``).
    clock: dict[str, Any] = Field(default_factory=dict)
    started: str | None = None
    finished: str | None = None
    #: How the run ended (None: a record that does not say).
    status: str | None = None
    errors: list[str] = Field(default_factory=list)
    #: A run on AWS: its fleet, for the cost per million messages.
    cost: CostRecord | None = None
    #: A capacity search's record.
    search: SearchRecord | None = None
    #: The process coordinating a local run (None: not recorded — a run on AWS, an older
    #: record).
    coordinator: CoordinatorRecord | None = None

    @classmethod
    def of(cls, context: RunContext | Mapping[str, Any]) -> RunContext:
        """The typed context of a raw mapping (a parsed ``context.json``), or ``context``."""
        return context if isinstance(context, RunContext) else cls.model_validate(context)

    def dump(self) -> dict[str, Any]:
        """The context as ``context.json`` holds it (``search`` and ``cost`` only when set)."""
        absent = {key for key in _WHEN_GIVEN if getattr(self, key) is None}
        return self.model_dump(exclude=absent)

    @property
    def records_its_end(self) -> bool:
        """Whether the run's status says how it ended once it ends: a local run records
        its coordinator, which writes it; on AWS the coordinating agent writes it after
        the last point, so a run still "running" there may be in progress or may have lost
        its coordinating machine (as may records older than the coordinator's)."""
        return self.status != "running" or self.coordinator is not None

    @property
    def coordinator_gone(self) -> bool:
        """Recorded as running, but its coordinator has ended: the run did not finish and
        nobody wrote how it ended."""
        return (
            self.status == "running"
            and self.coordinator is not None
            and bool(self.coordinator.gone())
        )

    @property
    def ended(self) -> str | None:
        """How the run ended as far as a reader can tell: its status, but "interrupted" for
        a run recorded as running whose coordinator is gone."""
        return "interrupted" if self.coordinator_gone else self.status

    @property
    def state(self) -> str:
        """The run's status for people: "complete", "failed", "interrupted", "running" —
        :data:`COORDINATOR_GONE` for one recorded as running whose coordinator is gone, and
        a note where this host cannot tell."""
        if self.coordinator_gone:
            return COORDINATOR_GONE
        if self.status is None:
            return "not recorded"
        coordinator = self.coordinator
        if self.status == "running" and coordinator is not None and coordinator.gone() is None:
            return (
                f"running, or interrupted: its coordinator (pid {coordinator.pid} on "
                f"{coordinator.host}) cannot be seen from here"
            )
        return self.status

    def point(self, index: int) -> PointEntry | None:
        """The sweep point of that index (None: not in the context)."""
        return next((p for p in self.points if p.point == index), None)


def write_context(run_dir: Path, context: RunContext) -> None:
    """Write ``context.json`` (through a temporary file: a reader sees a whole one)."""
    tmp = run_dir / f".{LAYOUT.context}.tmp"
    tmp.write_text(json.dumps(context.dump(), indent=2, default=str))
    tmp.rename(run_dir / LAYOUT.context)


def read_raw_context(run_dir: Path) -> dict[str, Any]:
    """``context.json`` as written (for what renders the whole of it)."""
    return dict(json.loads((run_dir / LAYOUT.context).read_text()))


def load_context(run_dir: Path) -> RunContext:
    """The run context of ``run_dir``, typed."""
    return RunContext.of(read_raw_context(run_dir))
