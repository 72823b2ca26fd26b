"""When a point's receivers have everything (docs/measurement.md §2).

Receivers stop once the senders are done and nothing has arrived for ``idle_timeout``
(counted from the senders' end at the earliest); on a point without faults, deaths or
errors the coordinator ends them sooner, once its live totals say every confirmed message
was received and those totals held still for :data:`QUIET_S` (or ``idle_timeout``, if
shorter). The totals are counts, not identities, so the rule is kept to points where a
count settles it: received − redelivered must equal confirmed exactly (a duplicate the
system does not flag makes it larger, and then the receivers wait out their idle timeout
as before).
"""

from __future__ import annotations

from dataclasses import dataclass

#: Seconds the totals must hold still, every confirmed message counted received, before a
#: clean point's receivers are stopped (nodes report their counts once a second).
QUIET_S = 2.0


@dataclass
class CaughtUp:
    """Watches one point's live totals; :meth:`check` says when its receivers may stop."""

    quiet_s: float
    since: float | None = None
    counts: tuple[int, int] | None = None

    @classmethod
    def for_idle_timeout(cls, idle_timeout: float) -> CaughtUp:
        return cls(min(idle_timeout, QUIET_S))

    def check(
        self,
        now: float,
        *,
        senders_done: bool,
        clean: bool,
        sent: int,
        received: int,
        redelivered: int,
        errors: int,
    ) -> bool:
        """Whether the senders are done and every confirmed message has been received,
        with the counts unchanged for ``quiet_s`` seconds up to ``now``. The quiet period
        may begin before the senders' processes have ended (their last count is the one
        already seen, or it moves and the period starts again), so that a point whose
        receivers already have everything ends as soon as they do. ``clean``: no fault or
        death at the point."""
        if not clean or errors or not sent or received - redelivered != sent:
            self.since = self.counts = None
            return False
        if (sent, received) != self.counts:
            self.counts, self.since = (sent, received), now
            return False
        return senders_done and self.since is not None and now - self.since >= self.quiet_s
