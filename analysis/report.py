"""A run's self-contained HTML report (plotly charts with plotly.js inline: one file, no
network): where the run ran, the summary table (:mod:`analysis.summary_table`) with each
point's notes, what set the pace, a capacity search's result, repeats, the
latency–throughput curve with its knee (:mod:`analysis.curve`), every point's latency
spectrum, per sweep point its charts over time (:mod:`analysis.point_charts`, from
:mod:`analysis.chart_data`) and the run context (:mod:`analysis.context_tables`). A point
with declared faults gets them marked on its time-series charts and a block of what they
did (:mod:`analysis.faults`).

Delivery is told in docs/measurement.md §5's words: a point whose records are incomplete shows
"incomplete" where lost would be, a point stopped early gets a "not drained" column, and
each says why at the end of its line. So does a point whose receivers got messages before
they were sent, by their clocks (the run context gives each point's largest clock offset),
and one with latencies beyond the histograms' range.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from analysis import charts, faults, point_charts, repeats
from analysis.capacity import Capacity, capacity
from analysis.chart_data import read_backlog, read_histograms, read_resources, read_windows
from analysis.column_model import METRIC_TITLES
from analysis.columns import COLUMNS
from analysis.context_tables import as_text, context_tables, where_it_ran
from analysis.curve import KNEE_RULE, CurvePoint, curve_points, knee_text, levels
from analysis.hdr import Bucket
from analysis.summary_row import SummaryRow
from analysis.summary_table import (
    SCOPES,
    backlog_lines,
    bound_label,
    cell,
    delivery,
    durability_line,
    fault_lines,
    html_columns,
    kept_up,
    notes,
)
from workload.model.errors import RecordsNotWritten
from workload.model.faults import read_timelines
from workload.model.layout import LAYOUT
from workload.model.record import Measurement, RunContext
from workload.model.verdict import RULES
from workload.model.verdict_time import TIME_RULES, lines_of

NS = 1_000_000_000


def fault_marks(through: faults.Through, origin_s: int) -> list[point_charts.FaultMark]:
    """A point's performed faults on its charts' time axis (seconds since ``origin_s``, the
    wall-clock second its first window starts)."""
    return [
        point_charts.FaultMark(
            label=e.label,
            start_s=e.record.began_ns / NS - origin_s,
            end_s=None if e.record.ended_ns is None else e.record.ended_ns / NS - origin_s,
        )
        for e in through.faults
        if e.record.began_ns is not None
    ]


def faults_block(row: SummaryRow, through: faults.Through | None, origin_s: int | None) -> str:
    """A point's "Faults" block: one line per fault (:func:`analysis.faults.timeline_lines`,
    when its timeline is there, with its action's time on the charts when they are drawn:
    ``origin_s``), then what they did together (:func:`fault_lines`)."""
    summary = fault_lines(row)
    if not summary and through is None:
        return ""
    items = ""
    if through is not None:
        for effect, line in zip(through.faults, faults.timeline_lines(through.faults), strict=True):
            began = effect.record.began_ns
            on_charts = (
                f" (at {began / NS - origin_s:,.1f} s on the charts)"
                if began is not None and origin_s is not None
                else ""
            )
            items += f"<li>{html.escape(line + on_charts)}</li>"
    return (
        "<h4>Faults</h4>"
        + (f"<ul class=faults>{items}</ul>" if items else "")
        + "".join(
            f"<p class=faults>{html.escape(line)}</p>" for line in summary[1 if items else 0 :]
        )
        + "<p class=muted>A fault's time counts seconds from the first confirmed send (when "
        "the faults' clock started); the charts draw each fault on their own time axis, a "
        "shaded band from its action to its node's return. Errors, duplicates and "
        "redeliveries through a fault count from its action to the next fault's action or "
        "the end of the point: much of what a fault causes comes after its node is back.</p>"
    )


def backlog_block(row: SummaryRow) -> str:
    """A point's "Backlog" block (:func:`backlog_lines`; empty without ``[backlog]``), the
    drain limit's cut-off marked."""
    lines = backlog_lines(row)
    if not lines:
        return ""
    cut = str(row.get("drain_cut_off") or "").lower() == "true"
    shown = [(line, cut and i == len(lines) - 1) for i, line in enumerate(lines)]
    return (
        "<h4>Backlog</h4>"
        + "".join(
            f"<p{' class=warn' if warn else ''}>{html.escape(line)}</p>" for line, warn in shown
        )
        + "<p class=muted>Queued is confirmed − received (redeliveries left out) at the end "
        "of each second; the chart shades the drain from its start to the catch-up "
        "(docs/measurement.md §4).</p>"
    )


CSS = """body{font-family:system-ui,sans-serif;margin:2em;color:#222;max-width:1500px}
table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #ccc;padding:4px 8px;text-align:right}
td.l,table.kv td,table.kv th{text-align:left}table.kv th{font-weight:normal;color:#555}
.charts{display:grid;grid-template-columns:repeat(auto-fill,minmax(560px,1fr));gap:1em 2em}
.ctx{display:flex;gap:2em;flex-wrap:wrap;align-items:flex-start}.where{font-size:1.1em}
.muted{color:#777}.warn{color:#b00;font-weight:bold}
pre{background:#f6f6f6;padding:1em;overflow:auto;font-size:12px}"""


class Charts:
    """Embeds the figures of one page, each with its own id (a figure of None is nothing:
    a chart without data)."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.count = 0

    def __call__(self, fig: Any) -> str:
        if fig is None:
            return ""
        self.count += 1
        return f"<div>{charts.embed(fig, f'{self.prefix}-{self.count}')}</div>"


def page(title: str, body: str) -> str:
    """A self-contained page: plotly.js once, in the head; ``#chart-errors`` lists any
    chart that failed to draw."""
    return f"""<!doctype html><html><head><meta charset="utf-8">
<title>{html.escape(title)}</title><style>{CSS}</style>
{charts.ERROR_SCRIPT}
{charts.plotly_script()}</head><body>
<ul id=chart-errors class=warn hidden></ul>
{body}
</body></html>"""


def _point_section(
    row: SummaryRow,
    windows: list[point_charts.Window],
    histograms: dict[str, list[Bucket]],
    chart: Charts,
    marks: list[point_charts.FaultMark],
    block: str,
    resources: list[tuple[str, str, list[point_charts.ResourceSeries]]] = [],  # noqa: B006
    backlog: point_charts.BacklogSeries | None = None,
) -> str:
    number = int(row["point"])
    label = str(row.get("label") or "")
    figures = []
    if backlog is not None:
        figures.append(chart(point_charts.backlog_over_time(backlog)))
    if windows:
        figures.append(
            chart(point_charts.throughput_over_time(windows, "Throughput per window", marks))
        )
        for metric, title in METRIC_TITLES.items():
            figures.append(
                chart(point_charts.latency_over_time(windows, metric, f"{title} per window", marks))
            )
    for title, unit, series in resources:
        figures.append(chart(point_charts.resources_over_time(series, title, unit, marks, windows)))
    spectra = {METRIC_TITLES[m]: histograms[m] for m in METRIC_TITLES if histograms.get(m)}
    figures.append(chart(charts.spectrum_chart(spectra, "Latency by percentile (whole run)")))
    drawn = "".join(f for f in figures if f)
    return f"<h3>Point {number}: {html.escape(label)}</h3>{block}" + (
        f"<div class=charts>{drawn}</div>"
        if drawn
        else "<p class=muted>no latency windows or histograms for this point</p>"
    )


def pace_block(rows: Sequence[SummaryRow]) -> str:
    """What set each point's pace, with the figures the verdict read and its rules."""
    if not any(r.get("limited_by") for r in rows):
        return ""
    shown = [
        COLUMNS[c].shown
        for c in (
            "broker_cpu_pct",
            "client_cpu_pct",
            "client_process_cpu_pct",
            "host_cpu_pct",
            "broker_disk_write_ops_s",
            "broker_disk_busy_pct",
            "broker_gc_ms_per_s",
            "broker_cpu_us_per_msg",
            "broker_cpu_trend",
            "broker_disk_bytes_per_msg",
            "stall_s",
        )
    ]
    head = "<th>point</th><th>limited by</th>" + "".join(
        f"<th>{html.escape(title)}</th>" for _, title, _ in shown
    )
    body = "".join(
        f'<tr><td style="text-align:left">{int(r["point"])}: {html.escape(str(r.get("label") or ""))}</td>'
        f'<td{" class=warn" if bound_label(r) else ""} style="text-align:left" '
        f'title="{html.escape(str(r.get("limited_reason") or ""))}">'
        f"{html.escape(str(r.get('limited_by') or '–'))}</td>"
        + "".join(f"<td>{html.escape(cell(r, k, f))}</td>" for k, _, f in shown)
        + "</tr>"
        for r in rows
    )
    reasons = "".join(
        f"<li>Point {int(r['point'])}: <b>{html.escape(str(r.get('limited_by')))}</b> — "
        f"{html.escape(str(r.get('limited_reason') or ''))}{phase_list(r)}</li>"
        for r in rows
        if r.get("limited_by")
    )
    return (
        "<h2>What set the pace</h2>"
        f"<table><tr>{head}</tr>{body}</table><ul>{reasons}</ul>"
        f"<p class=muted>{RULES}</p><p class=muted>{TIME_RULES}</p>"
    )


def phase_list(row: SummaryRow) -> str:
    """A point's phases beside its measurement period and its stalls, each judged on its
    line ("" without any)."""
    lines = lines_of(row.get("phase_verdicts"))
    return (
        "<ul>" + "".join(f"<li>{html.escape(line)}</li>" for line in lines) + "</ul>"
        if lines
        else ""
    )


def repeats_table(points: list[repeats.RepeatedPoint]) -> str:
    """Repeated points as an HTML table: median (min–max) of the main figures."""
    head = "<th>point</th><th>runs</th>" + "".join(
        f"<th>{html.escape(title)}</th>" for _, title, _ in repeats.TABLE
    )
    body = "".join(
        f'<tr><td style="text-align:left">{html.escape(p.label or str(p.base_point))}</td>'
        f"<td>{p.runs}</td>"
        + "".join(
            f"<td>{html.escape(repeats.show(p.spreads.get(m), fmt))}</td>"
            for m, _, fmt in repeats.TABLE
        )
        + "</tr>"
        for p in points
    )
    return (
        "<h2>Repeats</h2><p>Median (min–max) over the runs of each point, run interleaved; "
        "<code>analysis/repeats.csv</code> has every figure.</p>"
        f"<table><tr>{head}</tr>{body}</table>"
    )


def write_html(
    run_dir: Path, context: RunContext | Mapping[str, Any], rows: Sequence[SummaryRow]
) -> Path:
    """Write ``analysis/report.html`` for one run and return its path. ``context``: the run
    context, typed or as read from ``context.json`` (whose whole is shown as recorded)."""
    record = RunContext.of(context)
    recorded = record.dump() if isinstance(context, RunContext) else dict(context)
    run_id = record.run_id if record.run_id is not None else run_dir.name
    chart = Charts("chart")
    histograms = read_histograms(run_dir)
    found = capacity(record, rows)
    sections = [
        _capacity_section(found) if found is not None else "",
        repeats_table(repeats.summarise(rows)) if repeats.repeated(rows) else "",
        _curve_section(curve_points(rows, record.points), found, chart),
        _overlay_section(rows, histograms, chart),
        _sweep_points(run_dir, rows, histograms, chart),
    ]
    content = "\n".join(
        (
            _heading(record, run_id, rows),
            _summary(rows, record.scenario.measurement),
            pace_block(rows),
            "".join(sections),
            context_tables(recorded, rows),
        )
    )
    path = run_dir / LAYOUT.report
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(page(f"brokerbench — {run_id}", content))
    except OSError as exc:  # a full disk or a read-only directory: one line naming it
        raise RecordsNotWritten(path, exc) from exc
    return path


def _heading(record: RunContext, run_id: str, rows: Sequence[SummaryRow]) -> str:
    """The report's title, where and when the run ran, the broker, what a confirmed message
    survives (its durability line, with what a power cut measured of it), and its caveats."""
    broker, scenario = record.broker, record.scenario
    durability = durability_line(record, rows)
    caveats = "".join(f"<li>{html.escape(c)}</li>" for c in broker.caveats)
    stand_in = broker.stand_in
    title = f"{broker.name} — {scenario.name}"
    version = str(broker.version) if "version" in (broker.model_extra or {}) else "?"
    return f"""<h1>{html.escape(title)}</h1>
<p class=where><b>Where it ran:</b> {html.escape(where_it_ran(record))}</p>
<p>Run <code>{html.escape(run_id)}</code>, {html.escape(str(record.started))} → {html.escape(str(record.finished))}, status <b>{html.escape(record.state)}</b>.
{html.escape(broker.title or "?")} {html.escape(version)}, topology {html.escape(str(broker.topology))} ({html.escape(str(broker.deployment))}).</p>
<p class=durability><b>Durability:</b> {html.escape(durability or "not derived for this system: see the settings read back in the run context")}</p>
{f"<p><b>Local stand-in:</b> {html.escape(stand_in)}</p>" if stand_in else ""}
{f"<ul>{caveats}</ul>" if caveats else ""}"""


def _summary(rows: Sequence[SummaryRow], measurement: Measurement) -> str:
    """The summary table, each point's notes under it, and what its figures mean."""
    table = html_columns(rows)
    head = "".join(f"<th>{html.escape(title)}</th>" for _, title, _ in table)
    head += "<th>receivers kept up</th><th>delivery</th>"
    body = "".join(
        "<tr>"
        + "".join(f"<td>{html.escape(cell(r, k, f))}</td>" for k, _, f in table)
        + ("<td>yes</td>" if kept_up(r) else "<td class=warn>no</td>")
        + _delivery_cell(r)
        + "</tr>"
        for r in rows
    )
    point_notes = "".join(
        f"<li>Point {int(r['point'])}: {html.escape(note)}</li>" for r in rows for note in notes(r)
    )
    return f"""<table><tr>{head}</tr>{body}</table>
{f"<ul class=warn>{point_notes}</ul>" if point_notes else ""}
<p class=muted>{html.escape(SCOPES)}. The headline latencies are the maximum p95 over {html.escape(as_text(measurement.window))} s windows sliding by {html.escape(as_text(measurement.step))} s; rates are per whole second of the measurement period.
Processing latency runs from each message's intended send time to its receipt. A send call's latency is the broker's service time (start of the call to its confirmation), in open loop too;
there, send delay is how late a batch started against the schedule, so a stall shows in send delay and processing latency, not in the send call.
Times on the charts count seconds from the start of the measurement (the end of the warm-up); each window is drawn at its end.</p>"""


def _delivery_cell(row: SummaryRow) -> str:
    text = delivery(row) or "–"
    warn = " class=warn" if text not in ("–", "drained") else ""
    return f'<td{warn} style="text-align:left">{html.escape(text)}</td>'


def _capacity_section(found: Capacity) -> str:
    """A capacity search's result."""
    return (
        f"<h2>Capacity at SLO</h2><p class=capacity><b>{html.escape(found.line())}</b></p>"
        "<p class=muted>The highest total rate (open loop) at which receivers kept up, the "
        "senders reached the target and the whole-run processing p99 stayed within the SLO; "
        "each probe's verdict is in the notes under the table.</p>"
    )


def _curve_section(points: list[CurvePoint], found: Capacity | None, chart: Charts) -> str:
    """The latency–throughput chart with each curve's knee in words ("" where no curve has
    two load levels); a capacity search's SLO drawn on it."""
    if not any(len(curve) >= 2 for curve in levels(points).values()):
        return ""
    slo_ms = None if found is None else found.slo_p99_ms
    return (
        "<h2>Latency against throughput</h2>"
        f"<div class=charts>{chart(charts.latency_throughput(points, slo_ms=slo_ms))}<div>"
        "<p>Each sweep point's receive rate against its whole-run processing latency, points "
        "in order of the load they offered (msgs/s in open loop, batches in flight in closed "
        "loop); hover for a point's label.</p>"
        f"{knee_text(points)}<p class=muted>{html.escape(KNEE_RULE)}</p></div></div>"
    )


def _overlay_section(
    rows: Sequence[SummaryRow], histograms: dict[int, dict[str, list[Bucket]]], chart: Charts
) -> str:
    """Every point's processing-latency spectrum on one chart ("" for fewer than two)."""
    overlay = {
        f"{int(r['point'])}: {r.get('label') or ''}": histograms[int(r["point"])][
            "processing_latency"
        ]
        for r in rows
        if histograms.get(int(r["point"]), {}).get("processing_latency")
    }
    if len(overlay) < 2:
        return ""
    return (
        "<h2>Processing latency by percentile, all points</h2><div class=charts>"
        + chart(charts.spectrum_chart(overlay, "Processing latency by percentile (whole run)"))
        + "<div><p>Each point's whole-run histogram as HdrHistogram plots it: the latency below "
        "which a share of messages stayed, the percentile on a log scale of 1/(1−p) so that the "
        "tail (99 %, 99.9 %, …) gets as much room as the body. Lines end at the maximum, drawn "
        "at 99.999 %.</p></div></div>"
    )


def _sweep_points(
    run_dir: Path,
    rows: Sequence[SummaryRow],
    histograms: dict[int, dict[str, list[Bucket]]],
    chart: Charts,
) -> str:
    """A section per sweep point: what its faults did, its charts over time (faults
    marked) and its latency spectra."""
    series = read_windows(run_dir)
    backlogs = read_backlog(run_dir, {point: s.origin_s for point, s in series.items()})
    through = {
        point: faults.point_effects(run_dir, timeline)
        for point, timeline in read_timelines(run_dir).items()
    }
    sections = ["<h2>Sweep points</h2>"]
    for r in rows:
        point = int(r["point"])
        found_faults, drawn = through.get(point), series.get(point)
        marks = (
            fault_marks(found_faults, drawn.origin_s)
            if found_faults is not None and drawn is not None
            else []
        )
        sections.append(
            _point_section(
                r,
                drawn.windows if drawn is not None else [],
                histograms.get(point, {}),
                chart,
                marks,
                faults_block(r, found_faults, drawn.origin_s if drawn is not None else None)
                + backlog_block(r),
                read_resources(run_dir, point, drawn.origin_s) if drawn is not None else [],
                backlogs.get(point),
            )
        )
    return "".join(sections)
