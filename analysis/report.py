"""What a person reads: the SPEC §3 table on the terminal and a self-contained HTML report
(inline SVG charts, no network) with the table, throughput and latency over time per sweep
point, and the run context.

Delivery is told in SPEC §5's words: a point whose records are incomplete shows
"incomplete" where lost would be, a point stopped early gets a "not drained" column, and
each says why at the end of its line. So does a point whose receivers got messages before
they were sent, by their clocks (the run context gives each point's largest clock offset),
and one with latencies beyond the histograms' range.
"""

from __future__ import annotations

import html
import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from analysis.columns import run_column, window_column
from workload.results import RecordsNotWritten

TABLE = [
    ("threads", "threads", "{}"),
    ("sender_nodes", "senders", "{}"),
    ("receiver_nodes", "receivers", "{}"),
    ("send_msgs_per_s", "send msgs/s", "{:,.0f}"),
    ("receive_msgs_per_s", "receive msgs/s", "{:,.0f}"),
    (window_column("processing_latency"), "proc p95 ms [window]", "{:,.1f}"),
    (run_column("processing_latency", "p99"), "proc p99 ms [run]", "{:,.1f}"),
    (window_column("send_latency"), "send call p95 ms [window]", "{:,.2f}"),
    ("lost", "lost", "{}"),
    ("duplicated", "dup", "{}"),
]


#: What the scope marks in the column titles mean.
SCOPES = "[window]: the worst latency window of the period; [run]: the whole measurement period"

COST = ("cost_per_million_usd", "$ per M msgs", "{:,.4f}")
NOT_DRAINED = ("not_drained", "not drained", "{}")
SEND_DELAY = (run_column("send_delay", "p99"), "send delay p99 ms [run]", "{:,.2f}")


def columns(rows: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    """The table's columns: "not drained" only where a point was stopped early, send delay
    only where a point ran open loop, cost only where a run carries it (runs on AWS)."""
    table = list(TABLE)
    for extra, after, shown in (
        (NOT_DRAINED, "lost", any(delivery(r).startswith("not drained") for r in rows)),
        (SEND_DELAY, window_column("send_latency"), any(_has(r, SEND_DELAY[0]) for r in rows)),
        (COST, "duplicated", any(_has(r, COST[0]) for r in rows)),
    ):
        if shown:
            at = next(i for i, (key, _, _) in enumerate(table) if key == after)
            table.insert(at + 1, extra)
    return table


def _has(row: dict[str, Any], key: str) -> bool:
    return row.get(key) not in (None, "")


def delivery(row: dict[str, Any]) -> str:
    """The point's delivery in SPEC §5's words ("drained", "not drained: …", "incomplete: …");
    "" for summaries written before it was recorded."""
    return str(row.get("delivery") or "")


def cell(row: dict[str, Any], key: str, fmt: str) -> str:
    """One cell of a summary row: lost reads "incomplete" where a node's records are missing."""
    if key == "lost" and delivery(row).startswith("incomplete"):
        return "incomplete"
    return _cell(row.get(key), fmt)


def notes(row: dict[str, Any]) -> list[str]:
    """What a reader must know about a point's figures, each a few words."""
    found = [] if kept_up(row) else ["receivers did not keep up"]
    if delivery(row) not in ("", "drained"):
        found.append(delivery(row))
    found.extend(note for note in (negative_note(row), clipped_note(row)) if note)
    if fault := fault_note(row):
        found.append(fault)
    return found


def fault_note(row: dict[str, Any]) -> str:
    """The note on a point with declared faults ("" without any): what was done, the longest
    stretches without a confirmed send and without a receive, and what stayed unavailable."""
    if not row.get("faults"):
        return ""
    note = (
        f"fault: {row['faults']}; no confirmed send for {row.get('send_gap_s')} s, "
        f"no receive for {row.get('receive_gap_s')} s, {row.get('fault_errors')} errors"
    )
    unavailable = row.get("unavailable")
    if unavailable not in (None, "", 0, "0"):
        note += f"; {unavailable} confirmed messages unavailable (left on a node that is down)"
    return note


def negative_note(row: dict[str, Any]) -> str:
    """The note on a point with negative processing latencies ("" without any)."""
    return _count_note(
        row,
        "negative_latencies",
        "messages received before they were sent by the receiver's clock: "
        "clocks differ by more than the latency",
    )


def clipped_note(row: dict[str, Any]) -> str:
    """The note on a point with latencies beyond the histograms' range ("" without any)."""
    return _count_note(
        row, "clipped_latencies", "latencies beyond 10 min (the histograms' range) read as 10 min"
    )


def _count_note(row: dict[str, Any], column: str, what: str) -> str:
    value = row.get(column)
    count = int(value) if value not in (None, "") else 0
    return f"{count:,} {what}" if count else ""


def _cell(value: Any, fmt: str) -> str:
    if value in (None, ""):
        return "–"
    try:
        return fmt.format(float(value) if "f" in fmt else value)
    except (ValueError, TypeError):
        return str(value)


def kept_up(row: dict[str, Any]) -> bool:
    """False when the analysis flagged that receivers did not keep up with senders."""
    value = row.get("receivers_kept_up")
    return value in (None, "") or str(value) in ("True", "true")


def text_table(broker: str, rows: list[dict[str, Any]]) -> str:
    """The printed table for one broker's run."""
    table = columns(rows)
    header = [title for _, title, _ in table]
    body = [[cell(r, key, fmt) for key, _, fmt in table] for r in rows]
    widths = [
        max(len(h), *(len(b[i]) for b in body)) if body else len(h) for i, h in enumerate(header)
    ]
    lines = [
        f"{broker}  ({SCOPES})",
        "  ".join(h.rjust(w) for h, w in zip(header, widths, strict=True)),
    ]
    lines.append("  ".join("-" * w for w in widths))
    for r, cells in zip(rows, body, strict=True):
        flag = f"  ← {'; '.join(notes(r))}" if notes(r) else ""
        lines.append("  ".join(c.rjust(w) for c, w in zip(cells, widths, strict=True)) + flag)
    return "\n".join(lines)


def _delivery_cell(row: dict[str, Any]) -> str:
    text = delivery(row) or "–"
    warn = " class=warn" if text not in ("–", "drained") else ""
    return f'<td{warn} style="text-align:left">{html.escape(text)}</td>'


def _svg_lines(
    series: dict[str, list[tuple[float, float]]], unit: str, width: int = 560, height: int = 180
) -> str:
    points = [p for values in series.values() for p in values]
    if not points:
        return "<p class=muted>no data</p>"
    xmin = min(x for x, _ in points)
    xmax = max(max(x for x, _ in points), xmin + 1)
    ymax = max(max(y for _, y in points), 1e-9) * 1.1
    colors = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"]
    pad, top = 40, 26
    parts = [f'<svg viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img">']
    parts.append(
        f'<line x1="{pad}" y1="{height - 20}" x2="{width - 10}" y2="{height - 20}" stroke="#999"/>'
    )
    parts.append(f'<line x1="{pad}" y1="{top}" x2="{pad}" y2="{height - 20}" stroke="#999"/>')
    parts.append(f'<text x="2" y="{top - 2}" font-size="10">{ymax:,.1f} {html.escape(unit)}</text>')
    parts.append(f'<text x="{pad}" y="{height - 5}" font-size="10">0 s</text>')
    parts.append(
        f'<text x="{width - 60}" y="{height - 5}" font-size="10">{xmax - xmin:,.0f} s</text>'
    )
    for i, (name, values) in enumerate(series.items()):
        color = colors[i % len(colors)]
        coords = " ".join(
            f"{pad + (x - xmin) / (xmax - xmin) * (width - pad - 10):.1f},"
            f"{height - 20 - y / ymax * (height - 20 - top):.1f}"
            for x, y in sorted(values)
        )
        parts.append(
            f'<polyline fill="none" stroke="{color}" stroke-width="1.5" points="{coords}"/>'
        )
        parts.append(
            f'<text x="{pad + 110 + 140 * i}" y="10" font-size="10" fill="{color}">'
            f"{html.escape(name)}</text>"
        )
    parts.append("</svg>")
    return "".join(parts)


def _windows(run_dir: Path) -> dict[int, list[dict[str, Any]]]:
    directory = run_dir / "analysis" / "windows"
    if not directory.is_dir():
        return {}
    table = pq.read_table(directory).to_pylist()
    by_point: dict[int, list[dict[str, Any]]] = {}
    for row in table:
        by_point.setdefault(int(row["point"]), []).append(row)
    return by_point


def _clocks(rows: list[dict[str, Any]]) -> str:
    """The run context's clock table: per point, the largest clock offset of its nodes."""
    body = "".join(
        f"<tr><td>{int(r['point']) + 1}</td>"
        f'<td style="text-align:left">{html.escape(str(r.get("label")))}</td>'
        f"<td>{html.escape(_cell(r.get('clock_offset_max_ms'), '{:,.3f} ms'))}</td>"
        f'<td style="text-align:left">{html.escape(str(r.get("clock_source") or "–"))}</td></tr>'
        for r in rows
    )
    return (
        "<h3>Clocks</h3><table><tr><th>point</th><th>label</th><th>largest clock offset</th>"
        f"<th>clock source</th></tr>{body}</table>"
        "<p class=muted>Each node's clock offset from the reference time, read before the point "
        "(chrony's tracking; 0 where every node runs on one host). A processing latency "
        "includes the difference between its sender's and its receiver's clocks: up to twice "
        "the largest offset.</p>"
    )


def write_html(run_dir: Path, context: dict[str, Any], rows: list[dict[str, Any]]) -> Path:
    """Write ``analysis/report.html`` for one run and return its path."""
    broker = context["broker"]
    table = columns(rows)
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
    sections = []
    windows = _windows(run_dir)
    for r in rows:
        w = windows.get(int(r["point"]), [])
        t0 = min((x["window_start"] for x in w), default=0)
        rate = {
            "send msgs/s": [(x["window_start"] - t0, x["send_msgs_per_s"] or 0) for x in w],
            "receive msgs/s": [(x["window_start"] - t0, x["receive_msgs_per_s"] or 0) for x in w],
        }
        lat = {
            "processing p95": [
                (x["window_start"] - t0, x["processing_latency_p95"] or 0) for x in w
            ],
            "send p95": [(x["window_start"] - t0, x["send_latency_p95"] or 0) for x in w],
        }
        sections.append(
            f"<h3>Point {int(r['point']) + 1}: {html.escape(str(r.get('label')))}</h3>"
            f"<div class=row><div><h4>Throughput per window</h4>{_svg_lines(rate, 'msgs/s')}</div>"
            f"<div><h4>Latency p95 per window</h4>{_svg_lines(lat, 'ms')}</div></div>"
        )
    range_notes = "".join(
        f"<li>Point {int(r['point']) + 1}: {html.escape(note)}</li>"
        for r in rows
        for note in (negative_note(r), clipped_note(r))
        if note
    )
    caveats = "".join(f"<li>{html.escape(c)}</li>" for c in broker.get("caveats", []))
    stand_in = broker.get("stand_in")
    page = f"""<!doctype html><html><head><meta charset="utf-8">
<title>brokerbench — {html.escape(context["run_id"])}</title>
<style>body{{font-family:system-ui,sans-serif;margin:2em;color:#222}}table{{border-collapse:collapse}}
td,th{{border:1px solid #ccc;padding:4px 8px;text-align:right}}.row{{display:flex;gap:2em;flex-wrap:wrap}}
.muted{{color:#888}}.warn{{color:#b00;font-weight:bold}}pre{{background:#f6f6f6;padding:1em;overflow:auto;font-size:12px}}</style></head><body>
<h1>{html.escape(broker["title"])} — {html.escape(context["scenario"]["name"])}</h1>
<p>Run <code>{html.escape(context["run_id"])}</code>, {html.escape(str(context.get("started")))} → {html.escape(str(context.get("finished")))}, status <b>{html.escape(str(context.get("status")))}</b>.
Broker {html.escape(str(broker.get("version", "?")))}, topology {html.escape(str(broker.get("topology")))} ({html.escape(str(broker.get("deployment")))}).</p>
{f"<p><b>Local stand-in:</b> {html.escape(stand_in)}</p>" if stand_in else ""}
{f"<ul>{caveats}</ul>" if caveats else ""}
<table><tr>{head}</tr>{body}</table>
{f"<ul class=warn>{range_notes}</ul>" if range_notes else ""}
<p class=muted>Latencies are the maximum p95 over {html.escape(str(context["scenario"]["measurement"]["window"]))} s windows; rates are per whole second of the measurement period.
Processing latency runs from each message's intended send time to its receipt. A send call's latency is the broker's service time (start of the call to its confirmation), in open loop too;
there, send delay is how late a batch started against the schedule, so a stall shows in send delay and processing latency, not in the send call.</p>
{"".join(sections)}
<h2>Run context</h2>{_clocks(rows)}<details><summary>scenario, sweep points, broker settings read back, clients and host</summary>
<pre>{html.escape(json.dumps(context, indent=2, default=str))}</pre></details>
</body></html>"""
    path = run_dir / "analysis" / "report.html"
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(page)
    except OSError as exc:  # a full disk or a read-only directory: one line naming it
        raise RecordsNotWritten(path, exc) from exc
    return path
