"""Backlog phases (``[backlog]``, docs/measurement.md §4): receivers stay away — from the
start, or from a moment of the run — for a while or until enough messages are queued, then
drain what built up, the senders stopped or still sending; a drain that does not finish
ends at ``drain_limit`` with what is still queued reported. :class:`BacklogSection` is the
scenario's table, :class:`BacklogPhases` what the coordinator did at one point (written as
``backlog/p<K>.json``, read by the analysis), and the phase numbers the workers read from
the coordinator (:data:`STEADY`, :data:`HOLD`, :data:`DRAIN`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, Field, model_validator

from workload.model.bounds import (
    MAX_MESSAGES,
    MAX_RATE,
    MIN_DRAIN_LIMIT,
    MIN_RATE,
    Duration,
    PositiveDuration,
    Strict,
    at_least,
)
from workload.model.errors import conflict, write_whole
from workload.model.layout import LAYOUT

#: The phases a point's workers read from the coordinator: before the backlog (receivers
#: receive as usual), the backlog building (receivers hold), the drain (receivers receive;
#: senders stop or go on at ``drain_rate``).
STEADY, HOLD, DRAIN = 0, 1, 2

#: The most bytes ``build_bytes`` may ask to queue (1 PiB).
MAX_BACKLOG_BYTES = 2**50


class BacklogSection(Strict):
    """A backlog built and drained once per sweep point (docs/measurement.md §4)."""

    at: Duration = Field(
        0.0,
        description="When receivers stop receiving, seconds after the point's first "
        "confirmed send; 0: they start late, receiving nothing before the drain.",
    )
    build: PositiveDuration | None = Field(
        None,
        description="How long receivers stay away. With build_messages or build_bytes, "
        "whichever comes first ends the build.",
    )
    build_messages: int | None = Field(
        None,
        gt=0,
        le=MAX_MESSAGES,
        description="Stay away until this many messages are queued (confirmed sent − "
        "received, as the coordinator counts them once a second).",
    )
    build_bytes: int | None = Field(
        None,
        gt=0,
        le=MAX_BACKLOG_BYTES,
        description="Stay away until this many bytes are queued (queued messages × "
        "the mean load.message_size); at most 1 PiB.",
    )
    senders: Literal["stop", "continue"] = Field(
        "stop",
        description="During the drain: 'stop' ends the senders when it starts; 'continue' "
        "lets them send until load.duration ends.",
    )
    drain_rate: float | None = Field(
        None,
        ge=MIN_RATE,
        le=MAX_RATE,
        allow_inf_nan=False,
        description="With senders = 'continue': msgs/s per sender worker during the drain "
        "(open loop); unset: as before it.",
    )
    drain_limit: Annotated[
        PositiveDuration,
        at_least(
            MIN_DRAIN_LIMIT,
            "100 ms",
            "the coordinator looks at the drain every 0.25 s, and would end it later than it says",
        ),
    ] = Field(
        60.0,
        description="The drain ends this long after it started if it has not finished: the "
        "point stops, what is still queued is reported as not drained (never as lost); at "
        "least 100 ms.",
        json_schema_extra={"minimum": MIN_DRAIN_LIMIT},
    )

    @model_validator(mode="after")
    def _coherent(self) -> BacklogSection:
        if self.build is None and self.build_messages is None and self.build_bytes is None:
            raise conflict(
                ("build",),
                "say how long the backlog builds: build (a duration), build_messages or "
                "build_bytes",
            )
        if self.drain_rate is not None and self.senders != "continue":
            raise conflict(
                ("drain_rate",),
                "drain_rate sets the senders' rate during the drain: it needs senders = 'continue'",
            )
        return self

    def build_target(self, message_size: int) -> int | None:
        """Queued messages that end the build (the smaller of build_messages and
        build_bytes ÷ message_size, rounded up), or None when only a duration does."""
        targets = [n for n in (self.build_messages,) if n is not None]
        if self.build_bytes is not None:
            targets.append(max(1, -(-self.build_bytes // message_size)))
        return min(targets) if targets else None


class BacklogPhases(BaseModel):
    """What the coordinator did at one sweep point: when receivers began holding, when
    the drain began and why, and whether the drain limit cut it off (wall-clock ns)."""

    point: int
    hold_ns: int | None = None
    drain_ns: int | None = None
    #: Why the drain began: "build elapsed", "build_messages reached", "senders finished".
    drain_reason: str = ""
    #: Queued messages when the drain began, by the coordinator's count from the nodes'
    #: latest progress reports (up to a second old: the analysis counts from the records).
    queued_at_drain: int | None = None
    drain_limit_s: float = 0.0
    #: Set when the drain limit ended the point: then, and what was queued then by the
    #: coordinator's count (as ``queued_at_drain``).
    cut_off_ns: int | None = None
    queued_at_cut_off: int | None = None

    @property
    def cut_off(self) -> bool:
        return self.cut_off_ns is not None


def phases_path(run_dir: Path, point: int) -> Path:
    return run_dir / LAYOUT.backlog_phases(point)


def write_phases(run_dir: Path, phases: BacklogPhases) -> None:
    """Write a point's phases whole (through a renamed temporary file) or raise
    :class:`~workload.model.errors.RecordsNotWritten`."""
    write_whole(
        phases_path(run_dir, phases.point),
        lambda tmp: tmp.write_text(phases.model_dump_json(indent=1)),
    )


def read_phases(run_dir: Path) -> dict[int, BacklogPhases]:
    """Every point's backlog phases in a run directory (none without ``[backlog]``)."""
    found = [
        BacklogPhases.model_validate_json(path.read_text())
        for path in sorted((run_dir / LAYOUT.backlog).glob(LAYOUT.timelines))
    ]
    return {p.point: p for p in found}
