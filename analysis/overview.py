"""The cross-system overview: one self-contained HTML page (plotly.js inline, no network)
for a results directory holding several analysed runs, with summary charts in the spirit of
the reference study's figures — maximum throughput per system, the latency–throughput curve
of every run with its knee, and throughput, processing latency (p95 of the worst window,
p99 of the whole run), the send call's p95 and what a message costs the broker (CPU µs and
disk bytes per message, from the resource telemetry) against the number of sending threads — plus
one row per run and sweep point (the terminal table's columns). Titles, units and which way
is better come from the columns' declarations (:data:`analysis.columns.COLUMNS`).

Reads only each run's ``context.json`` and ``analysis/summary.csv`` (no Spark).
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass, field
from pathlib import Path

from analysis import charts
from analysis.column_model import Better
from analysis.columns import COLUMNS
from analysis.curve import KNEE_RULE, CurvePoint, knee_text
from analysis.curve import curve_points as report_curve_points
from analysis.report import Charts, page
from analysis.summary_row import SummaryRow, number, read_summary_csv
from analysis.summary_table import HEADLINE, TABLE, cell
from workload.model.layout import LAYOUT
from workload.model.record import PointEntry, RunContext


@dataclass
class RunSummary:
    """One analysed run: who ran, and its summary rows."""

    run_dir: Path
    run_id: str
    system: str
    title: str
    scenario: str
    rows: list[SummaryRow] = field(default_factory=list)
    name: str = ""
    #: The context's sweep points (their load orders the latency–throughput curve).
    points: list[PointEntry] = field(default_factory=list)


def load_runs(results: Path) -> list[RunSummary]:
    """Every analysed run directly under ``results`` (or ``results`` itself), oldest first;
    series names are the system title, made unique with the run id where needed."""
    candidates = (
        [results]
        if (results / LAYOUT.context).is_file()
        else sorted(p.parent for p in results.glob(f"*/{LAYOUT.context}"))
    )
    runs = []
    for run_dir in candidates:
        summary = run_dir / LAYOUT.summary
        if not summary.is_file():
            continue
        context = RunContext.of(json.loads((run_dir / LAYOUT.context).read_text()))
        rows = read_summary_csv(summary)
        broker = context.broker
        runs.append(
            RunSummary(
                run_dir,
                context.run_id if context.run_id is not None else run_dir.name,
                broker.system or "?",
                broker.name,
                context.scenario.name,
                rows,
                points=context.points,
            )
        )
    titles = [r.title for r in runs]
    for run in runs:
        run.name = run.title if titles.count(run.title) == 1 else f"{run.title} · {run.run_id}"
    return runs


def concurrency(row: SummaryRow) -> int:
    """Sending threads in the whole fleet: sender threads per node × sender nodes (a
    summary without sender threads: threads per node)."""
    return int(row.sender_threads or row.threads or 0) * int(row.sender_nodes or 0)


def _series(runs: list[RunSummary], column: str) -> dict[str, list[tuple[int, float]]]:
    """Per run: (fleet threads, value); where several points share a thread count (e.g. more
    receiver nodes), the best throughput / the lowest latency of them is shown."""
    lower_is_better = COLUMNS[column].better is Better.LOWER
    out: dict[str, list[tuple[int, float]]] = {}
    for run in runs:
        best: dict[int, float] = {}
        for row in run.rows:
            value = number(row.get(column))
            if value is None:
                continue
            x = concurrency(row)
            if x not in best or (value < best[x] if lower_is_better else value > best[x]):
                best[x] = value
        if best:
            out[run.name] = sorted(best.items())
    return out


def max_throughput(runs: list[RunSummary]) -> dict[str, float]:
    """Per run, the highest receive rate of any sweep point (send rate if nothing received)."""
    out = {}
    for run in runs:
        rates = [number(r.receive_msgs_per_s) or number(r.send_msgs_per_s) or 0.0 for r in run.rows]
        if rates:
            out[run.name] = max(rates)
    return out


#: The charts by load: one per column, titled and labelled as the column declares.
CHARTS = tuple(
    COLUMNS[name]
    for name in (
        *HEADLINE,
        # what a message costs the broker (resource telemetry), comparable across systems
        "broker_cpu_us_per_msg",
        "broker_disk_bytes_per_msg",
    )
)


def curve_points(runs: list[RunSummary]) -> list[CurvePoint]:
    """Every run's sweep points for the latency–throughput chart, one curve per run (and
    per value swept besides the load)."""
    return [p for run in runs for p in report_curve_points(run.rows, run.points, run.name)]


def render(runs: list[RunSummary]) -> str:
    """The overview page for these runs."""
    head = "<th>system</th><th>run</th>" + "".join(
        f"<th>{html.escape(title)}</th>" for _, title, _ in TABLE
    )
    body = "".join(
        f"<tr><td>{html.escape(run.title)}</td><td><a href="
        f'"{html.escape(run.run_dir.name)}/{LAYOUT.report}">{html.escape(run.run_id)}</a></td>'
        + "".join(f"<td>{html.escape(cell(r, k, f))}</td>" for k, _, f in TABLE)
        + "</tr>"
        for run in runs
        for r in run.rows
    )
    chart = Charts("overview")
    by_load = "".join(
        chart(
            charts.by_load(
                _series(runs, column.name),
                column.chart_title,
                "sending threads (threads × sender nodes)",
                f"{column.chart_title.split(' (')[0].lower()} ({column.unit})",
                log_y=column.unit == "ms",
            )
        )
        for column in CHARTS
        if any(number(r.get(column.name)) is not None for run in runs for r in run.rows)
    )
    points = curve_points(runs)
    bars = charts.bar_chart(max_throughput(runs), "Maximum receive throughput", "msgs/s")
    curve = charts.latency_throughput(
        points, "Processing latency p99 against throughput (whole run)", quantiles=("p99",)
    )
    content = f"""<h1>brokerbench — {len(runs)} run(s) compared</h1>
<h2>Maximum throughput</h2>
<div class=charts>{chart(bars)}<div><p class=muted>Highest receive rate of any sweep point of each run.</p></div></div>
<h2>Latency against throughput</h2>
<div class=charts>{chart(curve)}<div><p>One line per run: each sweep point's receive rate against the
whole-run p99 of its processing latency, points in order of the load they offered (msgs/s in
open loop, batches in flight in closed loop); hover for a point's label.</p>{knee_text(points)}
<p class=muted>{html.escape(KNEE_RULE)}</p></div></div>
<h2>By load</h2><p class=muted>Where several points of a run share a number of sending threads
(e.g. more receiver nodes), the best throughput and the lowest latency of them is shown.</p>
<div class=charts>{by_load}</div>
<h2>All sweep points</h2><table><tr>{head}</tr>{body}</table>"""
    return page(f"brokerbench — overview of {len(runs)} run(s)", content)


def write_overview(results: Path) -> Path | None:
    """Write ``results/report.html`` for every analysed run under ``results``; None when
    there are none."""
    runs = load_runs(results)
    if not runs:
        return None
    path = results / "report.html"
    path.write_text(render(runs))
    return path
