"""Comparing two runs: baseline vs contender per sweep point (Rally's ``compare`` idea).

Works on the analysed ``analysis/summary.csv`` of each run — small per-point rows, no Spark.
Sweep points are matched by their load (threads, sender nodes, receiver nodes, message
size), so two runs of the same scenario compare point by point even when one of them
stopped early. Every metric knows which direction is better.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

from analysis.columns import QUANTILE_TITLES, read_summary_csv, run_column, window_column
from workload.errors import UserError

#: The load that identifies a sweep point across runs.
POINT_KEY = ("threads", "sender_nodes", "receiver_nodes", "message_size")
#: Relative changes smaller than this are reported as unchanged.
NOISE = 0.02


class Better(Enum):
    HIGHER = "higher"
    LOWER = "lower"


@dataclass(frozen=True)
class Metric:
    column: str
    title: str
    unit: str
    better: Better


METRICS: tuple[Metric, ...] = (
    Metric("send_msgs_per_s", "send throughput", "msgs/s", Better.HIGHER),
    Metric("receive_msgs_per_s", "receive throughput", "msgs/s", Better.HIGHER),
    Metric(window_column("processing_latency"), "processing p95, worst window", "ms", Better.LOWER),
    *(
        Metric(
            run_column("processing_latency", q),
            f"processing {QUANTILE_TITLES[q]}, whole run",
            "ms",
            Better.LOWER,
        )
        for q in ("p50", "p99", "p999", "max")
    ),
    Metric(window_column("send_latency"), "send call p95, worst window", "ms", Better.LOWER),
    Metric(run_column("send_latency", "p99"), "send call p99, whole run", "ms", Better.LOWER),
    Metric(run_column("send_delay", "p99"), "send delay p99, whole run", "ms", Better.LOWER),
    Metric("lost", "lost messages", "msgs", Better.LOWER),
    Metric("not_drained", "not drained (run stopped early)", "msgs", Better.LOWER),
    Metric("duplicated", "duplicated messages", "msgs", Better.LOWER),
    Metric("redelivered", "redelivered messages", "msgs", Better.LOWER),
    Metric("errors", "errors", "", Better.LOWER),
)


class Verdict(Enum):
    BETTER = "better"
    WORSE = "worse"
    SAME = "same"
    UNKNOWN = "n/a"


@dataclass(frozen=True)
class Change:
    """One metric of one sweep point: baseline, contender and what changed."""

    point: str
    metric: Metric
    baseline: float | None
    contender: float | None

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
    def verdict(self) -> Verdict:
        delta = self.absolute
        if delta is None:
            return Verdict.UNKNOWN
        relative = self.relative
        if delta == 0 or (relative is not None and abs(relative) < NOISE):
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


def summary_path(run_dir: Path) -> Path:
    return run_dir / "analysis" / "summary.csv"


def load_summary(run_dir: Path) -> list[dict[str, str]]:
    """A run's summary rows; a one-line error when the run was never analysed."""
    path = summary_path(run_dir)
    if not path.is_file():
        if not (run_dir / "context.json").is_file():
            raise UserError(f"{run_dir}: not a run directory (no context.json)")
        raise UserError(f"{run_dir}: not analysed yet; run 'brokerbench report {run_dir}' first")
    return read_summary_csv(path)


def _number(value: str | None) -> float | None:
    if value in (None, ""):
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    return None if math.isnan(number) else number


def point_name(row: dict[str, str]) -> str:
    """A readable, run-independent name of a sweep point."""
    return (
        f"threads={row['threads']} senders={row['sender_nodes']} "
        f"receivers={row['receiver_nodes']} size={row['message_size']}"
    )


def _key(row: dict[str, str]) -> tuple[str, ...]:
    return tuple(str(row.get(k, "")) for k in POINT_KEY)


def compare_rows(
    baseline: Iterable[dict[str, str]],
    contender: Iterable[dict[str, str]],
    baseline_name: str = "baseline",
    contender_name: str = "contender",
    metrics: tuple[Metric, ...] = METRICS,
) -> Comparison:
    """Match sweep points by load and compare every metric."""
    base = {_key(r): r for r in baseline}
    cont = {_key(r): r for r in contender}
    changes = [
        Change(
            point_name(base[key]),
            metric,
            _number(base[key].get(metric.column)),
            _number(cont[key].get(metric.column)),
        )
        for key in base
        if key in cont
        for metric in metrics
    ]
    return Comparison(
        baseline_name,
        contender_name,
        changes,
        [point_name(base[k]) for k in base if k not in cont],
        [point_name(cont[k]) for k in cont if k not in base],
    )


def compare_runs(baseline: Path, contender: Path) -> Comparison:
    return compare_rows(
        load_summary(baseline), load_summary(contender), baseline.name, contender.name
    )


def _value(value: float | None) -> str:
    if value is None:
        return "–"
    if value.is_integer() or abs(value) >= 1000:
        return f"{value:,.0f}"
    return f"{value:,.2f}"


def _delta(change: Change) -> tuple[str, str]:
    if change.absolute is None:
        return "–", "–"
    absolute = ("+" if change.absolute > 0 else "") + _value(change.absolute)
    relative = "–" if change.relative is None else f"{change.relative:+.1%}"
    return absolute, relative


COLUMNS = ("sweep point", "metric", "better", "baseline", "contender", "change", "%", "verdict")


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
                _value(change.baseline),
                _value(change.contender),
                absolute,
                relative,
                change.verdict.value,
            )
        )
    return rows


def text_report(comparison: Comparison) -> str:
    """The comparison as a fixed-width table, one line per sweep point and metric."""
    rows = table_rows(comparison)
    widths = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(COLUMNS)]

    def line(cells: tuple[str, ...]) -> str:
        return "  ".join(
            c.ljust(w) if i < 3 else c.rjust(w)
            for i, (c, w) in enumerate(zip(cells, widths, strict=True))
        ).rstrip()

    out = [
        f"baseline:  {comparison.baseline}",
        f"contender: {comparison.contender}",
        "",
        line(COLUMNS),
        line(tuple("-" * w for w in widths)),
    ]
    previous = None
    for row in rows:
        if previous is not None and row[0] != previous:
            out.append("")
        previous = row[0]
        out.append(line(row))
    for name in comparison.only_baseline:
        out.append(f"only in baseline:  {name}")
    for name in comparison.only_contender:
        out.append(f"only in contender: {name}")
    if not rows:
        out.append("no sweep point in common (points are matched by threads, nodes and size)")
    return "\n".join(out)


def write_csv(comparison: Comparison, path: Path) -> None:
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(
            [
                "point",
                "metric",
                "better",
                "baseline",
                "contender",
                "absolute",
                "relative",
                "verdict",
            ]
        )
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
