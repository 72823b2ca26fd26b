"""A scenario's ``[[faults]]`` and what became of them: each declared fault
(:class:`FaultSpec`) and, per sweep point, its timeline (:class:`PointTimeline`, the
wall-clock time of each action), which the run writes as ``faults/p<point>.json`` and the
analysis reads back.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, WithJsonSchema, model_validator

from brokers.base import ALL_NODES, FAULT_ROLES
from workload.model.bounds import MAX_FAULT_NODE, Duration, PositiveDuration, Strict
from workload.model.errors import conflict, write_whole
from workload.model.layout import LAYOUT


def check_selector(value: Any) -> Any:
    """A fault's ``node``: ``"leader"``, ``"follower"``, a node index or ``"all"`` (a
    power-loss's alone; one message if not)."""
    if value in FAULT_ROLES or value == ALL_NODES:
        return value
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_FAULT_NODE:
        return value
    raise ValueError(
        f'expected "leader", "follower" or a node index (0 to {MAX_FAULT_NODE}) — or, for a '
        f'power-loss, "all" — got {value!r}'
    )


def describe_fault(action: str, node: str | int, at: float, until: float | None) -> str:
    """A fault in words: ``kill leader at 20 s until 40 s``, ``pause node 2 at 5 s``."""
    who = f"node {node}" if isinstance(node, int) or node.isdigit() else node
    return f"{action} {who} at {at:g} s" + (f" until {until:g} s" if until is not None else "")


class FaultSpec(Strict):
    """One fault of ``[[faults]]``: what happens to which broker node, and when."""

    at: Duration = Field(
        description="When the fault begins: seconds after the start of sending of each sweep "
        "point; within load.duration."
    )
    action: Literal["kill", "stop", "pause", "isolate", "power-loss"] = Field(
        description="kill (SIGKILL), stop (clean shutdown), pause (SIGSTOP until `until`), "
        "isolate (cut off from peers and clients until `until`; systems whose nodes run in "
        "network namespaces of their own), power-loss (every named node at the same instant "
        "loses what it did not sync and dies, SIGKILL; back at `until`, or at once, with only "
        "its synced data: data directories on the lazy filesystem, docs/durability.md)."
    )
    node: Annotated[
        str | int,
        BeforeValidator(check_selector),
        WithJsonSchema(
            {
                "anyOf": [
                    {"enum": [*FAULT_ROLES, ALL_NODES]},
                    {"type": "integer", "minimum": 0, "maximum": MAX_FAULT_NODE},
                ]
            }
        ),
    ] = Field(
        description='"leader", "follower" (what leads is the system\'s to say, see docs/faults.md) '
        'or a node index from 0; a power-loss also "all", its default (every broker node).',
    )
    until: PositiveDuration | None = Field(
        None,
        description="When the node returns (restart after kill/stop/power-loss, resume after "
        "pause): seconds after the start of sending, after `at`, at most load.duration. Unset: "
        "it stays down until the point ends (and is brought back before the next point); a "
        "power-loss's nodes come back at once.",
    )

    @model_validator(mode="before")
    @classmethod
    def _all_nodes_by_default(cls, data: Any) -> Any:
        """A power-loss that names no node cuts every broker node."""
        if isinstance(data, dict) and data.get("action") == "power-loss" and "node" not in data:
            return {**data, "node": ALL_NODES}
        return data

    @model_validator(mode="after")
    def _all_is_a_power_loss(self) -> FaultSpec:
        if self.node == ALL_NODES and self.action != "power-loss":
            raise conflict(("node",), f"node = \"all\" is a power-loss's, not a {self.action}'s")
        return self

    @model_validator(mode="after")
    def _until_after_at(self) -> FaultSpec:
        if self.until is not None and self.until <= self.at:
            raise conflict(
                ("until", "at"),
                f"until ({self.until:g} s) must come after at ({self.at:g} s)",
            )
        return self

    def describe(self) -> str:
        """``kill leader at 20 s until 40 s``, ``pause node 2 at 5 s``."""
        return describe_fault(self.action, self.node, self.at, self.until)


#: A fault that began this many seconds after its ``at`` or later says so.
LATE_S = 1.0
#: A fault whose node was down for less than this share of its declared window says so,
#: and marks its point (its figures are not those of the fault the scenario declares).
SHORT_SHARE = 0.8


class FaultRecord(BaseModel):
    """One declared fault at one sweep point: what was planned and what happened when."""

    model_config = ConfigDict(extra="forbid")

    #: Its position in the scenario's ``[[faults]]``.
    index: int
    action: str
    #: ``"leader"``, ``"follower"`` or the node index, as the scenario says.
    selector: str
    at_s: float
    until_s: float | None = None
    #: The node process it acted on, and whether that node led when the fault began.
    node: str = ""
    leader: bool = False
    #: The system elects a new leader by itself (:class:`~brokers.base.FaultSupport`).
    fails_over: bool = True
    #: When the action was issued, when the node was brought back at ``until``, and when it
    #: was brought back after the point (a fault without ``until``); wall-clock ns.
    began_ns: int | None = None
    ended_ns: int | None = None
    restored_ns: int | None = None
    #: How much later than ``at_s`` it began (seconds): it waited for a node that an earlier
    #: fault's ``until`` brought back to be ready. Its end moved by as much, so the declared
    #: window holds unless the point ended first.
    late_s: float = 0.0
    #: Why the fault was not performed or the node could not be brought back.
    error: str = ""
    #: A power-loss: per node cut, its lazy filesystem's final status at the cut — ``node``,
    #: the model (``writeback``, ``metadata``), ``dropped_bytes``, ``dropped_files``,
    #: ``undone_metadata``, ``written_through_bytes`` (past its memory bound: what was lost
    #: is then a lower bound) … (:mod:`brokers.lazyfs`).
    power_cut: list[dict[str, Any]] = Field(default_factory=list)
    #: Not in the scenario: a broker node that died by itself (action ``"died"``; the run
    #: fails, but what the death did is analysed as a declared fault's effect is).
    undeclared: bool = False

    @property
    def down_at_end(self) -> bool:
        """The node was still down (killed, stopped or paused) when the point ended."""
        return self.began_ns is not None and self.ended_ns is None

    @property
    def leaves_data_unavailable(self) -> bool:
        """It left a leader down that nothing replaced — or a node that died undeclared
        (whether it led is not known) on a system that does not fail over: what only it
        could serve was unavailable to the receivers until the point ended."""
        return self.down_at_end and (self.leader or self.undeclared) and not self.fails_over

    def shortfall(self) -> str:
        """How the fault did not run as declared, in words (empty: it did): it began at
        least :data:`LATE_S` late, or its node was down for less than :data:`SHORT_SHARE`
        of its declared window (the point ended first: measured to the node's return
        after the point, an upper bound)."""
        if self.undeclared or self.began_ns is None:
            return ""
        said = []
        if self.late_s >= LATE_S:
            said.append(f"began {self.late_s:.1f} s late")
        back = self.ended_ns if self.ended_ns is not None else self.restored_ns
        if self.until_s is not None and back is not None:
            declared, lasted = self.until_s - self.at_s, (back - self.began_ns) / 1e9
            if lasted < SHORT_SHARE * declared:
                said.append(f"lasted {lasted:.1f} s of {declared:g} s declared")
        return "; ".join(said)

    def describe(self) -> str:
        if self.undeclared:
            return f"{self.node} died at {self.at_s:g} s (undeclared)"
        return describe_fault(self.action, self.selector, self.at_s, self.until_s)


def undeclared_death(
    index: int, node: str, died_ns: int, sending_ns: int | None, fails_over: bool
) -> FaultRecord:
    """The record of a broker node seen dead at ``died_ns`` without a declared fault
    (``sending_ns``: the point's clock; None before the first confirmed send)."""
    at = max(0.0, (died_ns - sending_ns) / 1e9) if sending_ns is not None else 0.0
    return FaultRecord(
        index=index,
        action="died",
        selector=node,
        at_s=round(at, 1),
        node=node,
        fails_over=fails_over,
        began_ns=died_ns,
        undeclared=True,
    )


class PointTimeline(BaseModel):
    """The faults of one sweep point."""

    model_config = ConfigDict(extra="forbid")

    point: int
    #: When the coordinator first heard of a confirmed message: the faults' clock starts.
    sending_ns: int | None = None
    faults: list[FaultRecord]


def timeline_path(run_dir: Path, point: int) -> Path:
    return run_dir / LAYOUT.timeline(point)


def write_timeline(run_dir: Path, timeline: PointTimeline) -> None:
    """Write a point's timeline whole (through a renamed temporary file) or raise
    :class:`~workload.model.errors.RecordsNotWritten`."""
    write_whole(
        timeline_path(run_dir, timeline.point),
        lambda tmp: tmp.write_text(timeline.model_dump_json(indent=1)),
    )


def read_timelines(run_dir: Path) -> dict[int, PointTimeline]:
    """Every point's timeline in a run directory (none for a run without faults)."""
    timelines = [
        PointTimeline.model_validate_json(path.read_text())
        for path in sorted((run_dir / LAYOUT.faults).glob(LAYOUT.timelines))
    ]
    return {t.point: t for t in timelines}
