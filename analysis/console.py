"""What the terminal shows of an analysed run: the SPEC §3 table, the broker's caveats, a
capacity search's result, and for repeated points their medians and ranges."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from analysis import repeats
from analysis.capacity import capacity
from analysis.report import text_table


def run_summary(context: Mapping[str, Any], rows: Sequence[dict[str, Any]]) -> str:
    """The analysed run for the terminal (local ``run``/``report`` and AWS ``fetch``)."""
    broker = context.get("broker", {})
    title = str(broker.get("title") or broker.get("system") or "?")
    lines = [text_table(title, list(rows))]
    lines += [f"  note: {caveat}" for caveat in broker.get("caveats", [])]
    if broker.get("stand_in"):
        lines.append(f"  note: local stand-in: {broker['stand_in']}")
    if (found := capacity(context, rows)) is not None:
        lines += ["", found.line()]
    if repeats.repeated(rows):
        lines += ["", repeats.text_table(repeats.summarise(rows))]
    return "\n".join(lines)
