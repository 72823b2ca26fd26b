"""What the terminal shows of an analysed run: the docs/measurement.md §3 table under the
broker's durability line, a note where the run is recorded as running (still running, or
its coordinator is gone), the broker's caveats, what each point's declared faults did and
what its backlog came to, a
capacity search's result, and for repeated points their medians and ranges."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from analysis import repeats
from analysis.capacity import capacity
from analysis.summary_row import SummaryRow
from analysis.summary_table import backlog_lines, durability_line, fault_lines, text_table
from workload.model.record import RunContext

#: How ``delivery`` begins for a point whose records end in flushed chunks
#: (:mod:`analysis.records`).
DATA_ENDS = "incomplete: data ends "


def run_summary(context: RunContext | Mapping[str, Any], rows: Sequence[SummaryRow]) -> str:
    """The analysed run for the terminal (local ``run``/``report`` and AWS ``fetch``);
    ``context`` typed or as read from ``context.json``."""
    record = RunContext.of(context)
    broker = record.broker
    lines = [text_table(broker.name, list(rows), durability_line(record, rows))]
    if record.status == "running" and record.records_its_end:
        lines.append(f"  note: the run {_ended(record)}")
        if any(str(row.get("delivery") or "").startswith(DATA_ENDS) for row in rows):
            lines.append(
                "  note: its node processes were killed: each point's data ends at their last "
                "flushed chunk (delivery says where); nothing is counted lost"
            )
    lines += [f"  note: {caveat}" for caveat in broker.caveats]
    if broker.stand_in:
        lines.append(f"  note: local stand-in: {broker.stand_in}")
    lines += _by_point("Faults", rows, fault_lines)
    lines += _by_point("Backlog", rows, backlog_lines)
    if (found := capacity(record, rows)) is not None:
        lines += ["", found.line()]
    if repeats.repeated(rows):
        lines += ["", repeats.text_table(repeats.summarise(rows))]
    return "\n".join(lines)


def _by_point(
    title: str, rows: Sequence[SummaryRow], lines_of: Callable[[SummaryRow], list[str]]
) -> list[str]:
    """A titled block of what ``lines_of`` says of each point (nothing when it says nothing
    of any): the first line beside the point, the rest under it."""
    lines = []
    for row in rows:
        if said := lines_of(row):
            first, *rest = said
            lines.append(f"  point {int(row['point'])} ({row.get('label') or ''}): {first}")
            lines += [f"    {line}" for line in rest]
    return ["", title, *lines] if lines else []


def _ended(record: RunContext) -> str:
    """How the run ended, for the note under its table."""
    if record.coordinator_gone:
        return (
            f"did not finish: {record.state}, with no end recorded — what was not "
            "received is not drained, not lost"
        )
    if record.state == "running":
        return "is still running: these are its figures so far"
    return f"is {record.state}"
