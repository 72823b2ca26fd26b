"""The cross-system overview: one self-contained HTML page for a results directory holding
several analysed runs, with summary charts in the spirit of the reference study's figures —
maximum throughput per system, and throughput, p95 processing latency and p95 send latency
against the number of sending threads — plus one row per run and sweep point.

Reads only each run's ``context.json`` and ``analysis/summary.csv`` (no Spark).
"""

from __future__ import annotations

import html
import json
from dataclasses import dataclass, field
from pathlib import Path

from analysis.columns import read_summary_csv, run_column, window_column
from analysis.report import TABLE, cell

COLORS = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#e377c2", "#17becf")


@dataclass
class RunSummary:
    """One analysed run: who ran, and its summary rows."""

    run_dir: Path
    run_id: str
    system: str
    title: str
    scenario: str
    rows: list[dict[str, str]] = field(default_factory=list)
    name: str = ""


def _float(value: str | None) -> float | None:
    try:
        return None if value in (None, "") else float(value)
    except ValueError:
        return None


def load_runs(results: Path) -> list[RunSummary]:
    """Every analysed run directly under ``results`` (or ``results`` itself), oldest first;
    series names are the system title, made unique with the run id where needed."""
    candidates = (
        [results]
        if (results / "context.json").is_file()
        else sorted(p.parent for p in results.glob("*/context.json"))
    )
    runs = []
    for run_dir in candidates:
        summary = run_dir / "analysis" / "summary.csv"
        if not summary.is_file():
            continue
        context = json.loads((run_dir / "context.json").read_text())
        rows = read_summary_csv(summary)
        broker = context.get("broker", {})
        runs.append(
            RunSummary(
                run_dir,
                str(context.get("run_id", run_dir.name)),
                str(broker.get("system", "?")),
                str(broker.get("title", broker.get("system", "?"))),
                str(context.get("scenario", {}).get("name", "?")),
                rows,
            )
        )
    titles = [r.title for r in runs]
    for run in runs:
        run.name = run.title if titles.count(run.title) == 1 else f"{run.title} · {run.run_id}"
    return runs


def concurrency(row: dict[str, str]) -> int:
    """Sending threads in the whole fleet: threads per node × sender nodes."""
    return int(row.get("threads") or 0) * int(row.get("sender_nodes") or 0)


def bar_chart(values: dict[str, float], unit: str, width: int = 560) -> str:
    """Horizontal bars, one per series, labelled with their value."""
    if not values:
        return "<p class=muted>no data</p>"
    bar, gap, label_w = 22, 8, 170
    height = len(values) * (bar + gap) + gap
    top = max(max(values.values()), 1e-9)
    parts = [f'<svg viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img">']
    for i, (name, value) in enumerate(values.items()):
        y = gap + i * (bar + gap)
        length = value / top * (width - label_w - 90)
        color = COLORS[i % len(COLORS)]
        parts.append(
            f'<text x="{label_w - 6}" y="{y + 15}" font-size="11" text-anchor="end">'
            f"{html.escape(name)}</text>"
            f'<rect x="{label_w}" y="{y}" width="{length:.1f}" height="{bar}" fill="{color}">'
            f"<title>{html.escape(name)}: {value:,.1f} {html.escape(unit)}</title></rect>"
            f'<text x="{label_w + length + 4:.1f}" y="{y + 15}" font-size="11">'
            f"{value:,.0f} {html.escape(unit)}</text>"
        )
    parts.append("</svg>")
    return "".join(parts)


def xy_chart(
    series: dict[str, list[tuple[int, float]]],
    x_title: str,
    unit: str,
    width: int = 560,
    height: int = 220,
) -> str:
    """Lines with markers; x values are categories (the sweep's thread counts), evenly spaced."""
    xs = sorted({x for values in series.values() for x, _ in values})
    if not xs:
        return "<p class=muted>no data</p>"
    ymax = max((y for values in series.values() for _, y in values), default=0.0)
    ymax = max(ymax, 1e-9) * 1.1
    left, right, top, bottom = 60, 20, 28, 36
    plot_w, plot_h = width - left - right, height - top - bottom

    def px(x: int) -> float:
        return left + (xs.index(x) + 0.5) / len(xs) * plot_w

    def py(y: float) -> float:
        return top + plot_h - y / ymax * plot_h

    parts = [
        f'<svg viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img">',
        f'<line x1="{left}" y1="{top + plot_h}" x2="{width - right}" y2="{top + plot_h}" '
        'stroke="#999"/>',
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + plot_h}" stroke="#999"/>',
        f'<text x="4" y="{top + 4}" font-size="10">{ymax:,.1f}</text>',
        f'<text x="4" y="{top + 16}" font-size="10">{html.escape(unit)}</text>',
        f'<text x="{left - 8}" y="{top + plot_h}" font-size="10" text-anchor="end">0</text>',
        f'<text x="{left + plot_w / 2:.0f}" y="{height - 4}" font-size="10" '
        f'text-anchor="middle">{html.escape(x_title)}</text>',
    ]
    for x in xs:
        parts.append(
            f'<text x="{px(x):.1f}" y="{top + plot_h + 14}" font-size="10" '
            f'text-anchor="middle">{x}</text>'
        )
    for i, (name, values) in enumerate(series.items()):
        color = COLORS[i % len(COLORS)]
        ordered = sorted(values)
        coords = " ".join(f"{px(x):.1f},{py(y):.1f}" for x, y in ordered)
        parts.append(f'<polyline fill="none" stroke="{color}" stroke-width="2" points="{coords}"/>')
        for x, y in ordered:
            parts.append(
                f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3" fill="{color}">'
                f"<title>{html.escape(name)} @ {x}: {y:,.2f} {html.escape(unit)}</title></circle>"
            )
        parts.append(
            f'<text x="{left + 8 + 130 * (i % 4)}" y="{12 + 12 * (i // 4)}" font-size="10" '
            f'fill="{color}">{html.escape(name)}</text>'
        )
    parts.append("</svg>")
    return "".join(parts)


def _series(runs: list[RunSummary], column: str) -> dict[str, list[tuple[int, float]]]:
    """Per run: (fleet threads, value); where several points share a thread count (e.g. more
    receiver nodes), the best throughput / the lowest latency of them is shown."""
    lower_is_better = "latency" in column
    out: dict[str, list[tuple[int, float]]] = {}
    for run in runs:
        best: dict[int, float] = {}
        for row in run.rows:
            value = _float(row.get(column))
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
        rates = [
            _float(r.get("receive_msgs_per_s")) or _float(r.get("send_msgs_per_s")) or 0.0
            for r in run.rows
        ]
        if rates:
            out[run.name] = max(rates)
    return out


CHARTS = (
    ("send_msgs_per_s", "Send throughput", "msgs/s"),
    ("receive_msgs_per_s", "Receive throughput", "msgs/s"),
    (window_column("processing_latency"), "Processing latency p95 (worst window)", "ms"),
    (run_column("processing_latency", "p99"), "Processing latency p99 (whole run)", "ms"),
    (window_column("send_latency"), "Send call latency p95 (worst window)", "ms"),
)


def render(runs: list[RunSummary]) -> str:
    """The overview page for these runs."""
    head = "<th>system</th><th>run</th>" + "".join(
        f"<th>{html.escape(title)}</th>" for _, title, _ in TABLE
    )
    body = "".join(
        f"<tr><td>{html.escape(run.title)}</td><td><a href="
        f'"{html.escape(run.run_dir.name)}/analysis/report.html">{html.escape(run.run_id)}</a></td>'
        + "".join(f"<td>{html.escape(cell(r, k, f))}</td>" for k, _, f in TABLE)
        + "</tr>"
        for run in runs
        for r in run.rows
    )
    charts = "".join(
        f"<div><h3>{html.escape(title)}</h3>"
        f"{xy_chart(_series(runs, column), 'sending threads (threads × sender nodes)', unit)}"
        "</div>"
        for column, title, unit in CHARTS
    )
    return f"""<!doctype html><html><head><meta charset="utf-8">
<title>brokerbench — overview of {len(runs)} run(s)</title>
<style>body{{font-family:system-ui,sans-serif;margin:2em;color:#222}}table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:4px 8px;text-align:right}}.row{{display:flex;gap:2em;flex-wrap:wrap}}
.muted{{color:#888}}</style></head><body>
<h1>brokerbench — {len(runs)} run(s) compared</h1>
<h2>Maximum throughput</h2>
<p class=muted>Highest receive rate of any sweep point of each run.</p>
{bar_chart(max_throughput(runs), "msgs/s")}
<h2>By load</h2><div class=row>{charts}</div>
<h2>All sweep points</h2><table><tr>{head}</tr>{body}</table>
</body></html>"""


def write_overview(results: Path) -> Path | None:
    """Write ``results/report.html`` for every analysed run under ``results``; None when
    there are none."""
    runs = load_runs(results)
    if not runs:
        return None
    path = results / "report.html"
    path.write_text(render(runs))
    return path
