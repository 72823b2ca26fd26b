"""Repeated sweep points: the median and the spread of every metric.

A scenario's ``repeat = N`` runs each sweep point N times, interleaved; every run of a point
is a sweep point of its own in ``summary.csv`` (``repeat`` 0…N−1, ``base_point`` the point
it repeats). Here the runs of one point are summarised: for every metric the median and
the range (min–max) over the repeats, written to ``analysis/repeats.csv`` and printed as a
table. ``compare`` uses the same spreads as its noise band.
"""

from __future__ import annotations

import csv
import io
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from analysis.column_model import latency_columns
from analysis.columns import COLUMNS
from analysis.summary_row import number
from analysis.summary_table import HEADLINE

#: The metrics summarised over repeats (median and range over a point's runs: rates,
#: latencies, delivery), in ``repeats.csv``'s order.
METRICS = tuple(
    COLUMNS[name].name
    for name in (
        "send_msgs_per_s",
        "receive_msgs_per_s",
        *latency_columns(),
        "lost",
        "lost_on_power_loss",
        "duplicated",
        "redelivered",
        "errors",
    )
)


@dataclass(frozen=True)
class Spread:
    """One metric over the repeats of a point: median and range."""

    median: float
    low: float
    high: float
    n: int

    @property
    def relative(self) -> float | None:
        """The range as a fraction of the median (None when the median is 0)."""
        return (self.high - self.low) / abs(self.median) if self.median else None

    def overlaps(self, other: Spread) -> bool:
        return self.low <= other.high and other.low <= self.high


def spread(values: Iterable[object]) -> Spread | None:
    """Median and range of the numeric values (None without any)."""
    numbers = [n for n in (number(v) for v in values) if n is not None]
    if not numbers:
        return None
    return Spread(statistics.median(numbers), min(numbers), max(numbers), len(numbers))


def base_point(row: Mapping[str, object]) -> int | None:
    """The sweep point a summary row repeats: its own point when it is not a repeat, None
    for a row of a summary written before repeats were recorded."""
    value = row.get("base_point")
    if value in (None, ""):
        return None
    return int(str(value))


def repeated(rows: Sequence[Mapping[str, object]]) -> bool:
    """Whether any point of these summary rows ran more than once."""
    bases = [base_point(r) for r in rows]
    return None not in bases and len(set(bases)) < len(bases)


@dataclass(frozen=True)
class RepeatedPoint:
    """The runs of one sweep point, summarised."""

    base_point: int
    label: str
    runs: int
    spreads: dict[str, Spread]


def summarise(rows: Sequence[Mapping[str, object]]) -> list[RepeatedPoint]:
    """Per point (in order of first appearance): every metric's median and range."""
    groups: dict[int, list[Mapping[str, object]]] = {}
    for i, row in enumerate(rows):
        base = base_point(row)
        groups.setdefault(i if base is None else base, []).append(row)
    out = []
    for base, group in groups.items():
        spreads = {m: s for m in METRICS if (s := spread(r.get(m) for r in group)) is not None}
        out.append(RepeatedPoint(base, str(group[0].get("label", "")), len(group), spreads))
    return out


def repeats_csv(points: Sequence[RepeatedPoint]) -> str:
    """``analysis/repeats.csv``: per point and metric, median, min and max."""
    out = io.StringIO(newline="")
    writer = csv.writer(out)
    header = ["base_point", "label", "runs"]
    header += [f"{m}_{stat}" for m in METRICS for stat in ("median", "min", "max")]
    writer.writerow(header)
    for p in points:
        cells: list[object] = [p.base_point, p.label, p.runs]
        for m in METRICS:
            s = p.spreads.get(m)
            cells += ["", "", ""] if s is None else [_fmt(s.median), _fmt(s.low), _fmt(s.high)]
        writer.writerow(cells)
    return out.getvalue()


def _fmt(value: float) -> str:
    return str(int(value)) if value.is_integer() else f"{value:.3f}"


def show(s: Spread | None, fmt: str = "{:,.1f}") -> str:
    """A spread as ``median (min–max)``; just the value for a single run."""
    if s is None:
        return "–"
    if s.n == 1 or s.low == s.high:
        return fmt.format(s.median)
    return f"{fmt.format(s.median)} ({fmt.format(s.low)}–{fmt.format(s.high)})"


#: The columns of the printed repeats table: (metric, title, format), as declared.
TABLE = tuple(COLUMNS[name].shown for name in HEADLINE)


def text_table(points: Sequence[RepeatedPoint]) -> str:
    """Median (min–max) over the repeats of every point, for the terminal."""
    header = ["point", "runs", *(title for _, title, _ in TABLE)]
    body = [
        [
            p.label or str(p.base_point),
            str(p.runs),
            *(show(p.spreads.get(m), fmt) for m, _, fmt in TABLE),
        ]
        for p in points
    ]
    widths = [max(len(h), *(len(b[i]) for b in body)) for i, h in enumerate(header)]
    lines = [
        "median (min–max) over the repeats of each point",
        "  ".join(h.rjust(w) for h, w in zip(header, widths, strict=True)),
        "  ".join("-" * w for w in widths),
    ]
    lines += ["  ".join(c.rjust(w) for c, w in zip(b, widths, strict=True)) for b in body]
    return "\n".join(lines)
