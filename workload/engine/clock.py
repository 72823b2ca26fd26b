"""How far a node's wall clock is from the reference time (docs/measurement.md §3's clock-sync offset).

Processing latency is the receiver's wall-clock time minus the send time the sender's wall
clock stamped into the message, so the two clocks' offset from each other is part of it.
Before each sweep point a client node on a machine of its own reads its clock state from
chrony (``chronyc -c tracking``) into its status; the nodes of a local run share one host
and one clock, so their offset from each other is 0 (:data:`SINGLE_HOST`).
"""

from __future__ import annotations

import shutil
import subprocess
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
