"""Comparing two runs: baseline vs contender per sweep point (Rally's ``compare`` idea).

Works on the analysed ``analysis/summary.csv`` of each run — small per-point rows, no Spark.
Sweep points are matched by their load (threads, sender nodes, receiver nodes, message
size) and label (the swept values), so two runs of the same scenario compare point by point
even when one of them stopped early. Every metric knows which direction is better: the
summary columns compared are :data:`METRICS`, and each column's declaration
gives its title, unit and direction. A point run more than once (``repeat``) compares by its
median, and its measured range is the noise band.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from enum import Enum
from pathlib import Path

from analysis.capacity import Capacity, capacity
from analysis.column_model import Better, Column, run_column, window_column
from analysis.columns import COLUMNS
from analysis.repeats import Spread, spread
from analysis.summary_row import SummaryRow, read_summary_csv
from workload.model.errors import UserError
from workload.model.layout import LAYOUT
from workload.model.record import RunContext
from workload.model.slo import format_ms
from workload.model.sweep import SWEEPABLE

#: The load that identifies a sweep point across runs: what a sweep may vary.
POINT_KEY = SWEEPABLE
#: Relative changes smaller than this are reported as unchanged.
NOISE = 0.02


@dataclass(frozen=True)
class Metric:
    """What compare compares: a summary column (:meth:`of`), or a figure of its own (a
    search's capacity)."""

    column: str
    title: str
    unit: str
    better: Better
    #: Compared only where a side's point declared faults (empty elsewhere).
    faults: bool = False

    @classmethod
    def of(cls, column: Column) -> Metric:
        """A summary column as compare shows it: its long title, unit and direction."""
        if column.better is None:
            raise ValueError(f"{column.name}: no better direction, not a metric")
        return cls(column.name, column.long, column.unit, column.better, column.faults_only)


#: What compare compares, in its order (the faults' columns only where a point declared them).
METRICS: tuple[Metric, ...] = tuple(
    Metric.of(COLUMNS[name])
    for name in (
        "send_msgs_per_s",
        "receive_msgs_per_s",
        window_column("processing_latency"),
        *(run_column("processing_latency", q) for q in ("p50", "p99", "p999", "max")),
        window_column("send_latency"),
        run_column("send_latency", "p99"),
        run_column("send_delay", "p99"),
        "lost",
        "not_drained",
        "lost_on_power_loss",
        "duplicated",
        "redelivered",
        "errors",
        "send_gap_s",
        "receive_gap_s",
        "fault_errors",
        "unavailable",
        "fault_duplicated",
        "fault_redelivered",
        "broker_cpu_us_per_msg",
        "client_cpu_us_per_msg",
        "broker_disk_bytes_per_msg",
        "broker_gc_ms_per_s",
        "broker_cpu_trend",
        "stall_s",
    )
)


class Verdict(Enum):
    BETTER = "better"
    WORSE = "worse"
    SAME = "same"
    UNKNOWN = "n/a"


@dataclass(frozen=True)
class Change:
    """One metric of one sweep point: baseline, contender and what changed.

    With repeats (a scenario's ``repeat``), each side is the median over the point's runs and
    carries their range: the change counts only where the two ranges do not overlap — the
    measured spread is the noise band. Without repeats on both sides, a relative change
    below :data:`NOISE` is reported as unchanged.
    """

    point: str
    metric: Metric
    baseline: float | None
    contender: float | None
    baseline_spread: Spread | None = None
    contender_spread: Spread | None = None

    @classmethod
    def of(cls, point: str, metric: Metric, base: Spread | None, cont: Spread | None) -> Change:
        """The change of the two sides' medians, with their spreads."""
        b, c = (None if s is None else s.median for s in (base, cont))
        return cls(point, metric, b, c, base, cont)

    @property
    def absolute(self) -> float | None:
        if self.baseline is None or self.contender is None:
            return None
        return self.contender - self.baseline

    @property
    def relative(self) -> float | None:
        """Change as a fraction of the baseline; None when the baseline is 0 or missing."""
        if self.absolute is None or not self.baseline:
            return None
        return self.absolute / abs(self.baseline)

    @property
    def measured_noise(self) -> bool:
        """Whether both sides ran repeatedly, so the noise band is their measured spread."""
        sides = (self.baseline_spread, self.contender_spread)
        return all(s is not None and s.n > 1 for s in sides)

    @property
    def verdict(self) -> Verdict:
        delta = self.absolute
        if delta is None:
            return Verdict.UNKNOWN
        relative = self.relative
        if self.measured_noise:
            assert self.baseline_spread is not None and self.contender_spread is not None
            if delta == 0 or self.baseline_spread.overlaps(self.contender_spread):
                return Verdict.SAME
        elif delta == 0 or (relative is not None and abs(relative) < NOISE):
            return Verdict.SAME
        improved = delta > 0 if self.metric.better is Better.HIGHER else delta < 0
        return Verdict.BETTER if improved else Verdict.WORSE


@dataclass(frozen=True)
class Comparison:
    baseline: str
    contender: str
    changes: list[Change]
    only_baseline: list[str]
    only_contender: list[str]
    #: Points whose two runs were limited by different things: (point, baseline's verdict,
    #: contender's) — their figures measure different limits.
    limits: list[tuple[str, str, str]] = field(default_factory=list)
    #: What makes the two runs different setups (the system, its topology, where it ran):
    #: their figures compare the setups, not a change.
    differences: list[str] = field(default_factory=list)
    #: What a confirmed message survives in each run (its durability line; "" where the
    #: run derived none): where they differ, the figures compare different guarantees.
    durability: tuple[str, str] = ("", "")
    #: How each run ended where it did not complete ("" where it did, or its context
    #: does not say): a run stopped early compares what it ran.
    states: tuple[str, str] = ("", "")
    #: Points a side ran disturbed (processes outside it took over a tenth of the machine).
    disturbed: list[str] = field(default_factory=list)


def summary_path(run_dir: Path) -> Path:
    return run_dir / LAYOUT.summary


def load_summary(run_dir: Path) -> list[SummaryRow]:
    """A run's summary rows; a one-line error when the run was never analysed."""
    path = summary_path(run_dir)
    if not path.is_file():
        if not (run_dir / LAYOUT.context).is_file():
            raise UserError(f"{run_dir}: not a run directory (no {LAYOUT.context})")
        raise UserError(f"{run_dir}: not analysed yet; run 'brokerbench report {run_dir}' first")
    return read_summary_csv(path)


def point_name(row: SummaryRow) -> str:
    """A readable, run-independent name of a sweep point."""
    senders, receivers = _cell(row, "sender_threads"), _cell(row, "receiver_threads")
    threads = (
        f"threads={senders}"
        if senders == receivers
        else f"sender_threads={senders} receiver_threads={receivers}"
    )
    return (
        f"{threads} senders={row['sender_nodes']} "
        f"receivers={row['receiver_nodes']} size={row['message_size']}"
    )


def _cell(row: SummaryRow, key: str) -> str:
    """A point's value of a sweepable key; sender and receiver threads are ``threads`` in
    a summary written before they were counted apart."""
    value = row.get(key)
    if value in (None, "") and key in ("sender_threads", "receiver_threads"):
        value = row.get("threads")
    return str(value if value is not None else "")


def _key(row: SummaryRow) -> tuple[str, ...]:
    return (*(_cell(row, k) for k in POINT_KEY), str(row.get("label", "")))


def _runs(rows: Iterable[SummaryRow]) -> dict[tuple[str, ...], list[SummaryRow]]:
    """Summary rows by sweep point: the runs of each (one, or ``repeat`` of them)."""
    by_key: dict[tuple[str, ...], list[SummaryRow]] = {}
    for row in rows:
        by_key.setdefault(_key(row), []).append(row)
    return by_key


def compare_rows(
    baseline: Iterable[SummaryRow],
    contender: Iterable[SummaryRow],
    baseline_name: str = "baseline",
    contender_name: str = "contender",
    metrics: tuple[Metric, ...] = METRICS,
) -> Comparison:
    """Match sweep points by load and label, and compare every metric (medians and spreads
    where a point ran more than once); the faults' metrics only where a side's point
    declared faults."""
    base = _runs(baseline)
    cont = _runs(contender)
    changes, limits, disturbed = [], [], []
    for key in base:
        if key not in cont:
            continue
        for name, side in ((baseline_name, base[key]), (contender_name, cont[key])):
            if any(str(r.get("disturbed")) == "True" for r in side):
                disturbed.append(f"{point_name(base[key][0])} ({name})")
        limited = [
            "/".join(dict.fromkeys(str(r.get("limited_by") or "unknown") for r in side))
            for side in (base[key], cont[key])
        ]
        if limited[0] != limited[1]:
            limits.append((point_name(base[key][0]), limited[0], limited[1]))
        faulted = any(r.get("faults") for r in (*base[key], *cont[key]))
        for metric in metrics:
            if metric.faults and not faulted:
                continue
            b = spread(r.get(metric.column) for r in base[key])
            c = spread(r.get(metric.column) for r in cont[key])
            changes.append(Change.of(point_name(base[key][0]), metric, b, c))
    return Comparison(
        baseline_name,
        contender_name,
        changes,
        [point_name(base[k][0]) for k in base if k not in cont],
        [point_name(cont[k][0]) for k in cont if k not in base],
        limits,
        disturbed=disturbed,
    )


def compare_runs(baseline: Path, contender: Path) -> Comparison:
    base_rows, cont_rows = load_summary(baseline), load_summary(contender)
    comparison = compare_rows(base_rows, cont_rows, baseline.name, contender.name)
    contexts = _context(baseline), _context(contender)
    found = capacity(contexts[0], base_rows), capacity(contexts[1], cont_rows)
    if found[0] is not None and found[1] is not None:
        comparison.changes.insert(0, capacity_change(found[0], found[1]))
    return replace(
        comparison,
        differences=setup_differences(*contexts),
        durability=(durability_line(contexts[0]), durability_line(contexts[1])),
        states=(run_state(contexts[0]), run_state(contexts[1])),
    )


def run_state(context: dict[str, object]) -> str:
    """How the run ended where it did not complete ("" where it did, or where its context
    cannot say: a run on AWS records no end); a run recorded as running whose coordinator
    is gone reads "interrupted (the coordinator is gone)"."""
    record = RunContext.of(context)
    if record.status in ("complete", None) or not record.records_its_end:
        return ""
    return record.state


def durability_line(context: dict[str, object]) -> str:
    """The run's durability line ("" where its context records none)."""
    durability = RunContext.of(context).broker.durability
    return durability.line if durability is not None else ""


#: What a run's context says of its setup: (path in the context, what it is called).
SETUP = (
    (("broker", "system"), "system"),
    (("broker", "topology"), "topology"),
    (("broker", "deployment"), "deployment"),
    (("broker", "version"), "broker version"),
)


def setup_differences(baseline: dict[str, object], contender: dict[str, object]) -> list[str]:
    """What differs between two runs' setups ("system: redis vs postgresql"); a field that
    either context lacks is not compared."""
    found = []
    for path, name in SETUP:
        values = []
        for context in (baseline, contender):
            value: object = context
            for key in path:
                value = value.get(key) if isinstance(value, dict) else None
            values.append(value)
        if None not in values and values[0] != values[1]:
            found.append(f"{name}: {values[0]} vs {values[1]}")
    return found


def _context(run_dir: Path) -> dict[str, object]:
    path = run_dir / LAYOUT.context
    return dict(json.loads(path.read_text())) if path.is_file() else {}


def capacity_change(baseline: Capacity, contender: Capacity) -> Change:
    """Two capacity searches compared: the highest rate that held on each side, with the
    bracket each search narrowed it to as its range — a capacity is known only within its
    bracket, so overlapping brackets are the same."""
    slo = f"p99 ≤ {format_ms(baseline.slo_p99_ms)} ms"
    if contender.slo_p99_ms != baseline.slo_p99_ms:
        slo += f" vs ≤ {format_ms(contender.slo_p99_ms)} ms"
    metric = Metric("capacity_at_slo_msgs_per_s", f"capacity at SLO {slo}", "msgs/s", Better.HIGHER)

    def side(found: Capacity) -> Spread | None:
        if found.holding is None:
            return None
        # The bracket is half-open: the failing rate itself is not a possible capacity.
        top = found.holding if found.failing is None else math.nextafter(found.failing, 0.0)
        return Spread(found.holding, found.holding, top, 2)

    return Change.of("capacity search", metric, side(baseline), side(contender))


def _value(value: float | None) -> str:
    if value is None:
        return "–"
    if value.is_integer() or abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:,.2f}"


def _shown(value: float | None, runs: Spread | None) -> str:
    """A side's value, with the range of its runs where it ran more than once."""
    if runs is None or runs.n < 2:
        return _value(value)
    return f"{_value(value)} [{_value(runs.low)}–{_value(runs.high)}]"


def _delta(change: Change) -> tuple[str, str]:
    if change.absolute is None:
        return "–", "–"
    absolute = ("+" if change.absolute > 0 else "") + _value(change.absolute)
    relative = "–" if change.relative is None else f"{change.relative:+.1%}"
    return absolute, relative


HEADER = ("sweep point", "metric", "better", "baseline", "contender", "change", "%", "verdict")


def table_rows(comparison: Comparison) -> list[tuple[str, ...]]:
    rows: list[tuple[str, ...]] = []
    for change in comparison.changes:
        absolute, relative = _delta(change)
        unit = f" [{change.metric.unit}]" if change.metric.unit else ""
        rows.append(
            (
                change.point,
                change.metric.title + unit,
                change.metric.better.value,
                _shown(change.baseline, change.baseline_spread),
                _shown(change.contender, change.contender_spread),
                absolute,
                relative,
                change.verdict.value,
            )
        )
    return rows


def noise_band(comparison: Comparison) -> str:
    """How "same" was decided, in words."""
    measured = [c.measured_noise for c in comparison.changes if c.absolute is not None]
    fixed = f"changes under {NOISE:.0%} count as the same"
    if measured and all(measured):
        return "the measured range of each point's repeats (ranges that overlap are the same)"
    if any(measured):
        return f"the measured range of repeats where both runs repeated a point; elsewhere {fixed}"
    return f"{fixed} (no repeats: set `repeat` in the scenario to measure the noise)"


def durability_lines(lines: tuple[str, str]) -> list[str]:
    """The runs' durability: one line where they agree, a warning and both where they
    differ; nothing where neither run derived one."""
    baseline, contender = lines
    if baseline == contender:
        return [f"durability: {baseline}"] if baseline else []
    return [
        "durability differs — the figures compare different guarantees, not a change of one:",
        f"  baseline:  {baseline or '(not derived)'}",
        f"  contender: {contender or '(not derived)'}",
    ]


def text_report(comparison: Comparison) -> str:
    """The comparison as a fixed-width table, one line per sweep point and metric."""
    rows = table_rows(comparison)
    widths = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(HEADER)]

    def line(cells: tuple[str, ...]) -> str:
        return "  ".join(
            c.ljust(w) if i < 3 else c.rjust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    states = [f" ({state})" if state else "" for state in comparison.states]
    out = [
        f"baseline:  {comparison.baseline}{states[0]}",
        f"contender: {comparison.contender}{states[1]}",
        *(
            [
                "different setups — "
                + "; ".join(comparison.differences)
                + ": "
                + "'better' and 'worse' compare the setups, not a change of one"
            ]
            if comparison.differences
            else []
        ),
        *durability_lines(comparison.durability),
        f"noise band: {noise_band(comparison)}",
        "",
        line(HEADER),
        line(tuple("-" * w for w in widths)),
    ]
    previous = None
    for row in rows:
        if previous is not None and row[0] != previous:
            out.append("")
        previous = row[0]
        out.append(line(row))
    out += [
        f"what set the pace differs at {point}: {was} (baseline) vs {now} (contender) — "
        "the figures measure different limits"
        for point, was, now in comparison.limits
    ]
    out += [
        f"disturbed: {point} — processes outside the run took over a tenth of the machine"
        for point in comparison.disturbed
    ]
    out += [f"only in baseline:  {name}" for name in comparison.only_baseline]
    out += [f"only in contender: {name}" for name in comparison.only_contender]
    if not rows:
        out.append(
            "no sweep point in common (points are matched by threads, nodes, size and label)"
        )
    return "\n".join(out)


def write_csv(comparison: Comparison, path: Path) -> None:
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        f.write("point,metric,better,baseline,contender,absolute,relative,verdict\r\n")
        for c in comparison.changes:
            writer.writerow(
                [
                    c.point,
                    c.metric.column,
                    c.metric.better.value,
                    "" if c.baseline is None else c.baseline,
                    "" if c.contender is None else c.contender,
                    "" if c.absolute is None else c.absolute,
                    "" if c.relative is None else f"{c.relative:.6f}",
                    c.verdict.value,
                ]
            )
