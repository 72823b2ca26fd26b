"""What a sweep point's declared faults did (issue 12): the fault timeline, the failover
gaps, the errors, duplicates and redeliveries through each fault, and confirmed messages
not received split into lost and unavailable.

Inputs are a run directory's fault timelines (``faults/p<point>.json``, written by
:mod:`workload.engine.faults`) and its raw tables (:mod:`workload.model.results`), read with pyarrow —
no Spark session is needed. The raw records count per second and mark the tenths of each
second in which a worker confirmed a send or received a message (``active_tenths``), so
gaps are measured to 0.1 s:

* **send gap** — the longest run of consecutive tenths of a second without a confirmed
  send by any sender worker that overlaps the fault (from its action to its node coming
  back, or to the end of the records), within the senders' records; **receive gap** the
  same for receives. Times are on the faults' clock: seconds after the coordinator heard
  of the first confirmed send, what ``at`` and ``until`` count. A stall shorter than a
  tenth of a second shows as 0 (records written before the tenths were recorded count
  whole seconds). A gap that lasts to the end of the records has ``resumed = False``.
* **errors**, **duplicated** and **redelivered** through a fault — within the fault's
  *window*, from the second of its action to the next fault's action (or to the end of
  the point's records): failed calls of every worker, duplicate receipts (each receipt of
  a message after its first, counted at the second it arrived) and messages the
  receivers' clients flagged as redelivered (the ``redelivered`` counter of the
  ``seconds`` rows). A window does not end when the node comes back: what a fault causes
  often comes after — a client's reconnection, what a dead consumer had not acknowledged
  delivered again once a claim timeout passes (a Redis master killed in
  ``redis-failover``: every redelivery in the second after it came back, none during the
  gap). Windows follow one another (a second counts for the latest fault begun by then),
  so a point's figures through its faults are their sums: from its first fault's action
  on. Its totals (every second of its records, before the faults too) go with them.
* **unavailable** — confirmed, not received, at a point where a fault left a leader down
  that nothing replaced (a system without automatic fail-over, a fault without
  ``until``): the messages stayed on that node. Otherwise such messages are **lost**. The
  raw records do not say where each message was stored, so a point's missing messages are
  all one or all the other.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa

from analysis.summary_row import Figures
from workload.model.faults import FaultRecord, PointTimeline, read_timelines
from workload.model.results import SLOT_NS, SLOTS, read_point

NS = 1_000_000_000
#: Every slot of a second: what a second with activity but no slots recorded (records
#: written before the slots were) counts as.
WHOLE_SECOND = (1 << SLOTS) - 1


@dataclass(frozen=True)
class Gap:
    """The longest stretch without a confirmed send (or a receive), in tenths of a second."""

    seconds: float = 0.0
    #: When it began, on the faults' clock (see :class:`FaultEffect`).
    start_s: float | None = None
    #: Sends (receives) came again before the records end.
    resumed: bool = True


@dataclass(frozen=True)
class FaultEffect:
    """One fault of one point and what it did."""

    record: FaultRecord
    #: When its action was issued and when its node came back at ``until`` (None: it did
    #: not), on the faults' clock: seconds after the coordinator heard of the first send,
    #: what ``at`` and ``until`` count.
    began_s: float | None
    ended_s: float | None
    send_gap: Gap
    receive_gap: Gap
    errors: int
    duplicated: int = 0
    redelivered: int = 0

    @property
    def label(self) -> str:
        """What was done to which node, e.g. ``kill n2 (leader)``."""
        if self.record.undeclared:
            return f"{self.record.node} died (undeclared)"
        role = "leader" if self.record.leader else "not the leader"
        return f"{self.record.action} {self.record.node} ({role})"


@dataclass(frozen=True)
class Through:
    """A point's faults and what happened through them together (from the first fault's
    action on: the union of their windows), and the point's totals."""

    faults: list[FaultEffect]
    errors: int = 0
    duplicated: int = 0
    redelivered: int = 0
    duplicated_total: int = 0
    redelivered_total: int = 0


@dataclass(frozen=True, eq=False)
class FaultFigures(Figures):
    """A point's columns of its faults: the faults in words, the longest gaps (seconds, to
    0.1 s), the errors, duplicates and redeliveries through them (from the first fault's
    action on), and its confirmed messages not received, split (None: not known)."""

    faults: str
    fault_shortfall: str
    send_gap_s: float
    receive_gap_s: float
    fault_errors: int
    fault_duplicated: int
    fault_redelivered: int
    lost: int | None
    unavailable: int | None

    @classmethod
    def of(cls, through: Through, lost: int | None, unavailable: int | None) -> FaultFigures:
        effects = through.faults
        return cls(
            "; ".join(
                f"{e.record.describe()} ({e.record.node or 'not performed'})" for e in effects
            ),
            "; ".join(
                f"fault {e.record.index} {e.record.shortfall()}"
                for e in effects
                if e.record.shortfall()
            ),
            max((e.send_gap.seconds for e in effects), default=0),
            max((e.receive_gap.seconds for e in effects), default=0),
            through.errors,
            through.duplicated,
            through.redelivered,
            lost,
            unavailable,
        )


@dataclass
class Activity:
    """Per slot (a tenth of a second, numbered from the epoch): what one role's workers did."""

    #: Slots with at least one confirmed send (senders) or receive (receivers).
    active: set[int]
    #: The first active slot and the last slot of a second with any record (None: none).
    first: int | None
    last: int | None


def split_missing(missing: int, timeline: PointTimeline | None) -> tuple[int, int]:
    """``(lost, unavailable)`` of a point's confirmed messages that were never received.

    For the Spark job: its ``lost`` of a drained point is this function's ``missing``.
    """
    if timeline is not None and any(f.leaves_data_unavailable for f in timeline.faults):
        return 0, missing
    return missing, 0


def fault_columns(run_dir: Path, missing: Mapping[int, object]) -> dict[int, FaultFigures]:
    """Per point with declared faults: what they did, and its confirmed messages that were
    not received (``missing``: Spark's ``lost``, a count at a drained point only) split into
    lost and unavailable."""
    columns = {}
    for point, timeline in read_timelines(run_dir).items():
        known = missing.get(point)
        split = split_missing(known, timeline) if isinstance(known, int) else (None, None)
        columns[point] = FaultFigures.of(point_effects(run_dir, timeline), *split)
    return columns


def point_effects(run_dir: Path, timeline: PointTimeline) -> Through:
    """What one point's faults did, from its raw ``seconds`` rows and its receipts."""
    columns = ["role", "second", "sent", "received", "errors", "redelivered", "active_tenths"]
    return fault_effects(
        timeline,
        read_point(run_dir, "seconds", timeline.point, columns),
        read_point(run_dir, "received", timeline.point, RECEIPT_COLUMNS),
    )


#: The columns of the ``received`` rows that the duplicates need.
RECEIPT_COLUMNS = ["sender_node", "sender_worker", "seq", "second"]


def fault_effects(
    timeline: PointTimeline, seconds: pa.Table, received: pa.Table | None = None
) -> Through:
    """Each fault's gaps, errors, duplicates and redeliveries from a point's raw ``seconds``
    rows (any workers) and its ``received`` rows (:data:`RECEIPT_COLUMNS`; None: no
    duplicates counted), and the same through all of them together."""
    by_second = seconds.group_by(["role", "second"]).aggregate(
        [("sent", "sum"), ("received", "sum"), ("errors", "sum"), ("redelivered", "sum")]
    )
    rows = by_second.to_pylist()
    workers = seconds.to_pylist()
    sending = _activity(workers, "sender", "sent")
    receiving = _activity(workers, "receiver", "received")
    errors: dict[int, int] = defaultdict(int)
    redelivered: dict[int, int] = defaultdict(int)
    for row in rows:
        errors[row["second"]] += row["errors_sum"]
        redelivered[row["second"]] += row["redelivered_sum"]
    duplicated = _duplicates(received)
    origin = sending.first
    clock = timeline.sending_ns if timeline.sending_ns is not None else (origin or 0) * SLOT_NS
    effects = []
    union: set[int] = set()
    last = max(sending.last or 0, receiving.last or 0) // SLOTS
    for record in timeline.faults:
        if record.began_ns is None or origin is None:
            effects.append(FaultEffect(record, None, None, Gap(), Gap(), 0))
            continue
        begins = record.began_ns // NS
        back = record.ended_ns if record.ended_ns is not None else None
        # The gaps overlap the fault: from the slot of its action to that of the node's return.
        slots = (
            record.began_ns // SLOT_NS,
            back // SLOT_NS if back is not None else max(sending.last or 0, receiving.last or 0),
        )
        send_gap = _longest_gap(sending, *slots)
        receive_gap = _longest_gap(receiving, *slots)
        window = range(begins, _next_action(timeline, record, last + 1))
        union.update(window)
        effects.append(
            FaultEffect(
                record,
                began_s=(record.began_ns - clock) / NS,
                ended_s=(back - clock) / NS if back is not None else None,
                send_gap=_relative(send_gap, clock),
                receive_gap=_relative(receive_gap, clock),
                errors=_within(errors, window),
                duplicated=_within(duplicated, window),
                redelivered=_within(redelivered, window),
            )
        )
    return Through(
        effects,
        errors=_within(errors, union),
        duplicated=_within(duplicated, union),
        redelivered=_within(redelivered, union),
        duplicated_total=sum(duplicated.values()),
        redelivered_total=sum(redelivered.values()),
    )


def _next_action(timeline: PointTimeline, record: FaultRecord, end: int) -> int:
    """The second the next fault after ``record`` began (in the order they began; the
    earlier in the scenario first), or ``end`` when none did."""
    assert record.began_ns is not None
    mine = (record.began_ns, record.index)
    later = [
        r.began_ns // NS
        for r in timeline.faults
        if r.began_ns is not None and (r.began_ns, r.index) > mine
    ]
    return min(later, default=end)


def _within(counts: dict[int, int], seconds: Iterable[int]) -> int:
    return sum(counts.get(s, 0) for s in seconds)


def _duplicates(received: pa.Table | None) -> dict[int, int]:
    """Per second, the receipts of messages received before (rows beyond the first receipt
    of each identity: their sum is the point's ``duplicated``)."""
    if received is None or received.num_rows == 0:
        return {}
    identity = ["sender_node", "sender_worker", "seq"]
    rows = received.group_by("second").aggregate([([], "count_all")])
    firsts = (
        received.group_by(identity)
        .aggregate([("second", "min")])
        .group_by("second_min")
        .aggregate([([], "count_all")])
    )
    out = dict(zip(rows["second"].to_pylist(), rows["count_all"].to_pylist(), strict=True))
    for second, count in zip(
        firsts["second_min"].to_pylist(), firsts["count_all"].to_pylist(), strict=True
    ):
        out[second] -= count
    return {second: n for second, n in out.items() if n}


def timeline_lines(effects: Iterable[FaultEffect]) -> list[str]:
    """One line per fault, for the console and the report."""
    lines = []
    for e in effects:
        record = e.record
        if e.began_s is None:
            lines.append(f"fault {record.index}: {record.describe()}: {record.error or 'no data'}")
            continue
        back = f", back at {e.ended_s:.1f} s" if e.ended_s is not None else ", not back"
        short = record.shortfall()
        lines.append(
            f"fault {record.index}: {e.label} at {e.began_s:.1f} s"
            f"{back}; no confirmed send for {_gap(e.send_gap)}, no receive for "
            f"{_gap(e.receive_gap)}; {e.errors} errors, {e.duplicated} duplicated, "
            f"{e.redelivered} redelivered" + (f"; not as declared: {short}" if short else "")
        )
    return lines


def _gap(gap: Gap) -> str:
    return f"{gap.seconds:g} s" + ("" if gap.resumed else " (to the end)")


def _activity(rows: Iterable[dict[str, Any]], role: str, column: str) -> Activity:
    """The slots in which ``role``'s workers were active (``column`` > 0), from per-worker
    ``seconds`` rows."""
    active: set[int] = set()
    last: int | None = None
    for row in rows:
        if row["role"] != role:
            continue
        second = row["second"]
        last = second if last is None else max(last, second)
        if row[column] > 0:
            slots = row.get("active_tenths") or WHOLE_SECOND
            active.update(second * SLOTS + i for i in range(SLOTS) if slots >> i & 1)
    return Activity(
        active=active,
        first=min(active) if active else None,
        last=last * SLOTS + SLOTS - 1 if last is not None else None,
    )


def _longest_gap(activity: Activity, begins: int, ends: int) -> Gap:
    """The longest run of inactive slots within the records that overlaps ``[begins,
    ends]`` (slots from the epoch; the gap's start is absolute seconds)."""
    if activity.first is None or activity.last is None:
        return Gap()
    best, longest = Gap(), 0
    start: int | None = None
    for slot in range(activity.first, activity.last + 2):
        inactive = slot <= activity.last and slot not in activity.active
        if inactive and start is None:
            start = slot
        elif not inactive and start is not None:
            length = slot - start
            if start <= ends and slot - 1 >= begins and length > longest:
                longest = length
                best = Gap(length / SLOTS, start / SLOTS, resumed=slot <= activity.last)
            start = None
    return best


def _relative(gap: Gap, clock_ns: int) -> Gap:
    """``gap`` with its start (absolute seconds) on the clock that began at ``clock_ns``."""
    if gap.start_s is None:
        return gap
    return Gap(gap.seconds, round(gap.start_s - clock_ns / NS, 3), gap.resumed)
