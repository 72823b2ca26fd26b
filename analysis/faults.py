"""What a sweep point's declared faults did (issue 12): the fault timeline, the failover
gaps, the errors during each fault, and confirmed messages not received split into lost
and unavailable.

Inputs are a run directory's fault timelines (``faults/p<point>.json``, written by
:mod:`workload.faults`) and its raw tables (:mod:`workload.results`), read with pyarrow —
no Spark session is needed. The raw records count per second, so gaps are in whole
seconds:

* **send gap** — the longest run of consecutive seconds without a confirmed send that
  overlaps the fault (from its action to its node coming back, or to the end of the
  records), within the senders' records; **receive gap** the same for receives. Times are
  on the faults' clock: seconds after the coordinator heard of the first confirmed send,
  what ``at`` and ``until`` count. A stall
  shorter than a second, or one that straddles a second boundary without emptying a
  whole second, shows as 0. A gap that lasts to the end of the records has
  ``resumed = False``.
* **errors** — failed calls of every worker from the second of the fault's action to the
  later of the node's return and the end of the gaps it opened.
* **unavailable** — confirmed, not received, at a point where a fault left a leader down
  that nothing replaced (a system without automatic fail-over, a fault without
  ``until``): the messages stayed on that node. Otherwise such messages are **lost**. The
  raw records do not say where each message was stored, so a point's missing messages are
  all one or all the other.
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from workload.faults import FaultRecord, PointTimeline, read_timelines
from workload.results import read_point

NS = 1_000_000_000


@dataclass(frozen=True)
class Gap:
    """The longest stretch of whole seconds without a confirmed send (or a receive)."""

    seconds: int = 0
    #: When its first whole second began, on the faults' clock (see :class:`FaultEffect`).
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


@dataclass(frozen=True)
class PointFaults:
    """A sweep point's faults, and its confirmed messages that were not received."""

    point: int
    faults: list[FaultEffect]
    confirmed: int
    #: Confirmed and never received: ``lost`` + ``unavailable``.
    missing: int
    lost: int
    unavailable: int


@dataclass
class Activity:
    """Per second: what one role's workers did (counts summed over workers and nodes)."""

    #: Seconds with at least one confirmed send (senders) or receive (receivers).
    active: set[int]
    #: The first active second and the last second with any record (None: no records).
    first: int | None
    last: int | None


def split_missing(missing: int, timeline: PointTimeline | None) -> tuple[int, int]:
    """``(lost, unavailable)`` of a point's confirmed messages that were never received.

    For the Spark job: its ``lost`` of a drained point is this function's ``missing``.
    """
    if timeline is not None and any(f.leaves_data_unavailable for f in timeline.faults):
        return 0, missing
    return missing, 0


def analyse_faults(run_dir: Path | str) -> dict[int, PointFaults]:
    """Every point of a run that declared faults, by point index (empty without faults)."""
    run_dir = Path(run_dir)
    timelines = read_timelines(run_dir)
    results = {}
    for point, timeline in timelines.items():
        confirmed, missing = _missing(
            read_point(run_dir, "sent_ranges", point, ["node", "worker", "seq_lo", "seq_hi"]),
            read_point(run_dir, "received", point, ["sender_node", "sender_worker", "seq"]),
        )
        lost, unavailable = split_missing(missing, timeline)
        results[point] = PointFaults(
            point=point,
            faults=point_effects(run_dir, timeline),
            confirmed=confirmed,
            missing=missing,
            lost=lost,
            unavailable=unavailable,
        )
    return results


def point_effects(run_dir: Path, timeline: PointTimeline) -> list[FaultEffect]:
    """Each fault of one point and what it did, from that point's raw ``seconds`` rows only."""
    columns = ["role", "second", "sent", "received", "errors"]
    return fault_effects(timeline, read_point(run_dir, "seconds", timeline.point, columns))


def fault_effects(timeline: PointTimeline, seconds: pa.Table) -> list[FaultEffect]:
    """Each fault's gaps and errors from a point's raw ``seconds`` rows (any workers)."""
    by_second = seconds.group_by(["role", "second"]).aggregate(
        [("sent", "sum"), ("received", "sum"), ("errors", "sum")]
    )
    rows = by_second.to_pylist()
    sending = _activity(rows, "sender", "sent_sum")
    receiving = _activity(rows, "receiver", "received_sum")
    errors: dict[int, int] = defaultdict(int)
    for row in rows:
        errors[row["second"]] += row["errors_sum"]
    origin = sending.first
    clock = timeline.sending_ns if timeline.sending_ns is not None else (origin or 0) * NS
    effects = []
    for record in timeline.faults:
        if record.began_ns is None or origin is None:
            effects.append(FaultEffect(record, None, None, Gap(), Gap(), 0))
            continue
        begins = record.began_ns // NS
        back = record.ended_ns if record.ended_ns is not None else None
        ends = back // NS if back is not None else max(sending.last or begins, receiving.last or 0)
        send_gap = _longest_gap(sending, begins, ends)
        receive_gap = _longest_gap(receiving, begins, ends)
        gaps = (send_gap, receive_gap)  # still in absolute seconds here
        settled = max(
            [ends] + [int(g.start_s) + g.seconds - 1 for g in gaps if g.start_s is not None]
        )
        effects.append(
            FaultEffect(
                record,
                began_s=(record.began_ns - clock) / NS,
                ended_s=(back - clock) / NS if back is not None else None,
                send_gap=_relative(send_gap, clock),
                receive_gap=_relative(receive_gap, clock),
                errors=sum(n for s, n in errors.items() if begins <= s <= settled),
            )
        )
    return effects


def summary_columns(result: PointFaults) -> dict[str, object]:
    """Flat columns for ``summary.csv`` and the text table: :func:`effect_columns` and the
    unavailable messages."""
    return {**effect_columns(result.faults), "unavailable": result.unavailable}


def effect_columns(effects: list[FaultEffect]) -> dict[str, object]:
    """The faults in words, the longest gaps (whole seconds) and the errors during them."""
    return {
        "faults": "; ".join(
            f"{e.record.describe()} ({e.record.node or 'not performed'})" for e in effects
        ),
        "send_gap_s": max((e.send_gap.seconds for e in effects), default=0),
        "receive_gap_s": max((e.receive_gap.seconds for e in effects), default=0),
        "fault_errors": sum(e.errors for e in effects),
    }


def timeline_lines(result: PointFaults) -> list[str]:
    """One line per fault, for the console and the report."""
    lines = []
    for e in result.faults:
        record = e.record
        if e.began_s is None:
            lines.append(f"fault {record.index}: {record.describe()}: {record.error or 'no data'}")
            continue
        back = f", back at {e.ended_s:.1f} s" if e.ended_s is not None else ", not back"
        role = "leader" if record.leader else "not the leader"
        lines.append(
            f"fault {record.index}: {record.action} {record.node} ({role}) at {e.began_s:.1f} s"
            f"{back}; no confirmed send for {_gap(e.send_gap)}, no receive for "
            f"{_gap(e.receive_gap)}; {e.errors} errors"
        )
    return lines


def _gap(gap: Gap) -> str:
    return f"{gap.seconds} s" + ("" if gap.resumed else " (to the end)")


def _activity(rows: Iterable[dict[str, int]], role: str, column: str) -> Activity:
    mine = [r for r in rows if r["role"] == role]
    active = {r["second"] for r in mine if r[column] > 0}
    return Activity(
        active=active,
        first=min(active) if active else None,
        last=max((r["second"] for r in mine), default=None),
    )


def _longest_gap(activity: Activity, begins: int, ends: int) -> Gap:
    """The longest run of inactive seconds within the records that overlaps
    ``[begins, ends]`` (absolute seconds; the gap's start is absolute too)."""
    if activity.first is None or activity.last is None:
        return Gap()
    best = Gap()
    start: int | None = None
    for second in range(activity.first, activity.last + 2):
        inactive = second <= activity.last and second not in activity.active
        if inactive and start is None:
            start = second
        elif not inactive and start is not None:
            length = second - start
            if start <= ends and second - 1 >= begins and length > best.seconds:
                best = Gap(length, start, resumed=second <= activity.last)
            start = None
    return best


def _relative(gap: Gap, clock_ns: int) -> Gap:
    """``gap`` with its start (an absolute second) on the clock that began at ``clock_ns``."""
    if gap.start_s is None:
        return gap
    return Gap(gap.seconds, round(gap.start_s - clock_ns / NS, 3), gap.resumed)


def _missing(sent_ranges: pa.Table, received: pa.Table) -> tuple[int, int]:
    """``(confirmed, confirmed and never received)`` from the raw delivery tables."""
    if sent_ranges.num_rows == 0:
        return 0, 0
    seen: dict[tuple[int, int], list[int]] = defaultdict(list)
    if received.num_rows:
        unique = received.group_by(["sender_node", "sender_worker", "seq"]).aggregate([])
        for node, worker, seq in zip(
            unique["sender_node"].to_pylist(),
            unique["sender_worker"].to_pylist(),
            unique["seq"].to_pylist(),
            strict=True,
        ):
            seen[(node, worker)].append(seq)
    for seqs in seen.values():
        seqs.sort()
    confirmed = pc.sum(pc.add(pc.subtract(sent_ranges["seq_hi"], sent_ranges["seq_lo"]), 1))
    total = int(confirmed.as_py() or 0)
    got = 0
    for node, worker, lo, hi in zip(
        *(sent_ranges[c].to_pylist() for c in ("node", "worker", "seq_lo", "seq_hi")),
        strict=True,
    ):
        seqs = seen.get((node, worker), [])
        got += bisect.bisect_right(seqs, hi) - bisect.bisect_left(seqs, lo)
    return total, total - got
