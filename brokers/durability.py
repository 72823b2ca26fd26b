"""What a confirmed message survives (docs/measurement.md §6), as one short line.

Each system derives its :class:`Durability` from the settings its ``describe`` read back
from the running servers and from the run's parameters (``BrokerSystem.durability``), in
its own folder: whether a confirmed message is on more than one node, whether it was
fsynced before the confirmation, and what the confirmation means. The run context records
it beside the settings (``broker.durability``); the terminal table, the report and
``compare`` show its :attr:`Durability.line` — after a power-loss fault, with what the run
measured beside it (:meth:`Durability.measured`) — and ``compare`` warns when two runs'
lines differ.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, fields
from typing import Any


@dataclass(frozen=True, slots=True)
class Durability:
    """Three facts about a confirmed message, each with its words for the reader."""

    #: A confirmed message is on more than one node (synchronously or not: ``replication``
    #: says which).
    replicated: bool
    #: E.g. "single node, not replicated", "replicated asynchronously to 2 replicas: …".
    replication: str
    #: The broker fsyncs what it confirms before confirming it (per message or batch).
    fsync_per_message: bool
    #: E.g. "fsync per commit", "fsync every second: a confirmed message can be lost on a crash".
    fsync: str
    #: What the confirmation guarantees, e.g. "committed locally".
    confirmed: str

    @property
    def line(self) -> str:
        """The one line the reader sees, e.g. "single node, not replicated; fsync per
        commit; confirmed = committed locally"."""
        return f"{self.replication}; {self.fsync}; confirmed = {self.confirmed}"

    def measured(self, measurement: str) -> str:
        """The line with what a run measured of the claim beside it (the line alone without
        a measurement), e.g. "claimed: single node, not replicated; fsync every second: …;
        confirmed = … — measured: 1,103 of 18,523 confirmed messages lost on a power cut of
        every node"."""
        return f"claimed: {self.line} — measured: {measurement}" if measurement else self.line

    def record(self) -> dict[str, Any]:
        """As the run context records it (:meth:`of` reads it back)."""
        return asdict(self)

    @classmethod
    def of(cls, recorded: object) -> Durability | None:
        """The durability a run context recorded; None where it recorded none (a run of a
        system that derives none, or of an older version) or something else."""
        if not isinstance(recorded, Mapping):
            return None
        try:
            return cls(**{f.name: recorded[f.name] for f in fields(cls)})
        except (KeyError, TypeError):
            return None


def as_int(value: Any) -> int | None:
    """A setting read back as an integer; None where it is none (missing or not a number)."""
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def not_replicated(nodes: int = 1) -> str:
    """The replication words of a system whose confirmed message is on one node only."""
    return "single node, not replicated" if nodes <= 1 else f"{nodes} nodes, not replicated"


#: What a reader must know of a confirmation that an fsync did not precede.
LOST_ON_CRASH = "a confirmed message can be lost on a crash"
#: … and of one that no replica had received when it was given.
LOST_ON_FAILOVER = "a confirmed message can be lost on a fail-over"
