"""A node's clocks: how far its wall clock is from the reference time (docs/measurement.md §3's
clock-sync offset), and its wall and monotonic clocks read together (:func:`clock_pair`) or
set against each other (:func:`unstepped`).

Processing latency is the receiver's wall-clock time minus the send time the sender's wall
clock stamped into the message, so the two clocks' offset from each other is part of it.
Before each sweep point a client node on a machine of its own reads its clock state from
chrony (``chronyc -c tracking``) into its status; the nodes of a local run share one host
and one clock, so their offset from each other is 0 (:data:`SINGLE_HOST`).
"""

from __future__ import annotations

import shutil
import subprocess
import time
from dataclasses import dataclass

from workload.model.errors import one_line


@dataclass(frozen=True)
class ClockState:
    """A host's clock offset and where it comes from."""

    #: This host's clock minus the reference time, in seconds; None when not known.
    offset_s: float | None
    #: "single host", "chrony: <reference server> (stratum <n>)", or "unknown: <why>".
    source: str

    def as_dict(self) -> dict[str, float | str | None]:
        """The fields a node status and the run context record."""
        return {"clock_offset_s": self.offset_s, "clock_source": self.source}


SINGLE_HOST = ClockState(0.0, "single host")

#: Fields of ``chronyc -c tracking`` (the order of chrony's ``client.c``, which prints the
#: tracking report's values comma-separated in CSV mode).
TRACKING_FIELDS = (
    "reference_id",
    "reference",
    "stratum",
    "reference_time",
    "system_time",
    "last_offset",
    "rms_offset",
    "frequency",
    "residual_frequency",
    "skew",
    "root_delay",
    "root_dispersion",
    "update_interval",
    "leap_status",
)


def parse_tracking(output: str) -> ClockState:
    """The clock state in the output of ``chronyc -c tracking``; ValueError when it is not
    that output.

    ``system_time`` is the correction chronyd is still applying to the clock, positive when
    the clock is slow (behind the reference time): the offset is its negation. A clock
    chronyd does not consider synchronised has no offset to speak of.
    """
    lines = output.strip().splitlines()
    fields = lines[0].split(",") if lines else []
    if len(fields) != len(TRACKING_FIELDS):
        raise ValueError(f"expected {len(TRACKING_FIELDS)} fields, got {len(fields)}")
    tracking = dict(zip(TRACKING_FIELDS, fields, strict=True))
    correction = float(tracking["system_time"])
    if tracking["leap_status"] == "Not synchronised":
        return ClockState(None, "unknown: chrony is not synchronised")
    reference = tracking["reference"] or tracking["reference_id"]
    offset = -correction if correction else 0.0  # not -0.0
    return ClockState(offset, f"chrony: {reference} (stratum {int(tracking['stratum'])})")


def read_clock(timeout: float = 5.0) -> ClockState:
    """This host's clock state as chrony tracks it; unknown (saying why) without chrony."""
    chronyc = shutil.which("chronyc")
    if chronyc is None:
        return ClockState(None, "unknown: chronyc not found")
    try:
        done = subprocess.run(
            [chronyc, "-c", "tracking"],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return ClockState(None, f"unknown: chronyc tracking failed ({_first_line(str(exc))})")
    if done.returncode != 0:
        why = _first_line(done.stderr or done.stdout) or f"exit code {done.returncode}"
        return ClockState(None, f"unknown: chronyc tracking failed ({why})")
    try:
        return parse_tracking(done.stdout)
    except ValueError as exc:
        return ClockState(None, f"unknown: chronyc tracking output not understood ({exc})")


def _first_line(text: str) -> str:
    lines = text.strip().splitlines()
    return one_line(lines[0]) if lines else ""


#: Two wall-clock reads around a monotonic one this close together: read together.
PAIR_NS = 5_000
#: Tries at most before the closest pair is taken.
PAIR_TRIES = 3


def clock_pair() -> tuple[int, int]:
    """The wall clock and the monotonic clock read at one moment: ``(wall ns, monotonic ns)``.

    A thread preempted between two reads (a busy machine) would tie them tens of µs apart,
    and shift every time derived from the pair — an open-loop batch's intended send times —
    by that much. So the wall clock is read on both sides of the monotonic one, again while
    the two wall reads lie more than :data:`PAIR_NS` apart (at most :data:`PAIR_TRIES` times),
    and the closest pair is taken, its wall time the middle of the two reads."""
    best_gap, best = -1, (0, 0)
    for _ in range(PAIR_TRIES):
        before = time.time_ns()
        mono = time.monotonic_ns()
        after = time.time_ns()
        gap = after - before
        if best_gap < 0 or gap < best_gap:
            best_gap, best = gap, ((before + after) // 2, mono)
        if gap <= PAIR_NS:
            break
    return best


def unstepped(timed_ns: int, started_ns: int, started_mono_ns: int, now_mono_ns: int) -> int:
    """A duration timed on the wall clock, ``timed_ns`` from a start at ``started_ns`` (wall)
    and ``started_mono_ns`` (monotonic) by that clock, that does not fit the monotonic time
    since the start: the wall clock was stepped in between, and the step is taken off. Never
    more than the monotonic time."""
    step = (time.time_ns() - now_mono_ns) - (started_ns - started_mono_ns)
    return min(max(timed_ns - step, 0), now_mono_ns - started_mono_ns)
