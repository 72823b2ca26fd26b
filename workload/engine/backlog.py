"""The backlog clock of a sweep point (``[backlog]``, docs/measurement.md §4): the coordinator
drives the phases that every worker reads from one shared number (:data:`STEADY`,
:data:`HOLD`, :data:`DRAIN` of :mod:`workload.model.backlog`).

Receivers hold from ``at`` seconds after the point's first confirmed send (from the start
when ``at`` is 0) until the build ends: ``build`` seconds after the later of the hold and
the first confirmed send, ``build_messages`` (or ``build_bytes``) queued, or every sender
finished — whichever comes first. Queued is the coordinator's count from the nodes'
progress reports (once a second): confirmed sent − received, redeliveries left out; it is
trusted for the build from :data:`COUNT_SETTLES` seconds into the hold, once every node has
reported since the receivers stopped (at its start it still lacks what receivers took since
their last report: at 4,000 msgs/s up to 4,000 messages, which would end a small build at
once). The
drain then runs until the point ends by itself, or ``drain_limit`` after it began, when the
coordinator stops every worker and says so (:class:`BacklogPhases`, written for the
analysis: what is still queued then is *not drained*, never lost). Receivers do not idle
out while the drain has messages queued (:meth:`BacklogClock.drained`): a client that must
first join a group (Kafka) may take longer than ``idle_timeout`` to receive its first.
"""

from __future__ import annotations

import time
from typing import Protocol

from workload.model.backlog import DRAIN, HOLD, STEADY, BacklogPhases, BacklogSection

NS = 1_000_000_000
#: Seconds into a hold before its queued count can end the build: every node reports
#: once a second, so by then each has reported since the receivers stopped.
COUNT_SETTLES = 1.5


class SharedPhase(Protocol):
    """The shared number the workers read (a ``multiprocessing.Value``)."""

    value: int


def initial_phase(section: BacklogSection | None) -> int:
    """The phase a point's workers start in: holding when receivers start late."""
    return HOLD if section is not None and section.at == 0 else STEADY


class BacklogClock:
    """Moves one point through its backlog phases, from the coordinator's loop (:meth:`tick`)."""

    def __init__(
        self, section: BacklogSection, point: int, message_size: int, shared: SharedPhase
    ) -> None:
        self.section = section
        self.shared = shared
        self.target = section.build_target(message_size)
        self.phases = BacklogPhases(point=point, drain_limit_s=section.drain_limit)
        shared.value = initial_phase(section)
        if shared.value == HOLD:
            self.phases.hold_ns = time.time_ns()

    @property
    def phase(self) -> int:
        return int(self.shared.value)

    def tick(self, sending_ns: int | None, queued: int, senders_done: bool) -> bool:
        """Advance the phases: ``sending_ns`` is when the first confirmed send was seen
        (None before), ``queued`` the coordinator's count now, ``senders_done`` whether
        every sender has finished. True once the drain limit is reached: the point must be
        stopped (it is recorded as cut off)."""
        now = time.time_ns()
        phases = self.phases
        if self.phase == STEADY:
            due = sending_ns is not None and now >= sending_ns + int(self.section.at * NS)
            if due and not senders_done:
                phases.hold_ns = now
                self.shared.value = HOLD
            return False
        if self.phase == HOLD:
            reason = self._build_over(now, sending_ns, queued, senders_done)
            if reason:
                phases.drain_ns = now
                phases.drain_reason = reason
                phases.queued_at_drain = queued
                self.shared.value = DRAIN
            return False
        assert phases.drain_ns is not None
        if phases.cut_off_ns is None and now >= phases.drain_ns + int(
            self.section.drain_limit * NS
        ):
            phases.cut_off_ns = now
            phases.queued_at_cut_off = queued
            return True
        return False

    def drained(self, queued: int) -> bool:
        """Whether receivers may idle out, the senders being done: not while the backlog
        builds, nor while the drain has messages queued (a receiver that stopped then would
        leave them behind, counted lost; the drain limit ends a drain that cannot finish)."""
        return self.phase == STEADY or (self.phase == DRAIN and queued == 0)

    def _build_over(self, now: int, sending_ns: int | None, queued: int, senders_done: bool) -> str:
        """Why the build is over now, or "" while it goes on."""
        build = self.section.build
        if sending_ns is not None and build is not None:
            since = max(self.phases.hold_ns or sending_ns, sending_ns)
            if now >= since + int(build * NS):
                return "build elapsed"
        settled = now >= (self.phases.hold_ns or now) + int(COUNT_SETTLES * NS)
        if self.target is not None and settled and queued >= self.target:
            return (
                "build_messages reached"
                if self.section.build_messages is not None and queued >= self.section.build_messages
                else "build_bytes reached"
            )
        if senders_done:
            return "senders finished"
        return ""
