"""What a person reads: the docs/measurement.md §3 table on the terminal and a self-contained HTML report
(plotly charts with plotly.js inline: one file, no network) — where the run ran, the table,
the latency–throughput curve with its knee, latency spectra, per sweep point throughput and
latency over time, and the run context. A point with declared faults gets them marked on
its time-series charts and a block of what they did (:mod:`analysis.faults`); so does the
terminal (:func:`fault_lines`).

Delivery is told in docs/measurement.md §5's words: a point whose records are incomplete shows
"incomplete" where lost would be, a point stopped early gets a "not drained" column, and
each says why at the end of its line. So does a point whose receivers got messages before
they were sent, by their clocks (the run context gives each point's largest clock offset),
and one with latencies beyond the histograms' range.

The tables pick summary columns by name; their titles and formats are the columns'
declarations (:data:`analysis.columns.COLUMNS`).
"""

from __future__ import annotations

import html
import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from analysis import charts, faults, repeats
from analysis.capacity import capacity
from analysis.columns import (
    COLUMN,
    METRIC_TITLES,
    RUN_QUANTILES,
    SummaryRow,
    number,
    run_column,
    window_column,
)
from analysis.hdr import Bucket
from workload.model.errors import RecordsNotWritten
from workload.model.faults import read_timelines
from workload.model.layout import LAYOUT
from workload.model.record import PointEntry, RunContext
from workload.model.telemetry import HOST
from workload.model.verdict import RULES, Verdict

NS = 1_000_000_000

#: The terminal table's columns, (column, title, format) as each column declares them.
TABLE = [
    COLUMN[name].shown
    for name in (
        "threads",
        "sender_nodes",
        "receiver_nodes",
        "send_msgs_per_s",
        "receive_msgs_per_s",
        window_column("processing_latency"),
        run_column("processing_latency", "p99"),
        window_column("send_latency"),
        "lost",
        "duplicated",
    )
]


#: What the scope marks in the column titles mean.
SCOPES = "[window]: the worst latency window of the period; [run]: the whole measurement period"

#: Columns the table shows only where some point has them (see :func:`columns`).
TARGET = COLUMN["target_msgs_per_s"].shown
COST = COLUMN["cost_per_million_usd"].shown
NOT_DRAINED = COLUMN["not_drained"].shown
SEND_DELAY = COLUMN[run_column("send_delay", "p99")].shown
BROKER_CPU = COLUMN["broker_cpu_pct"].shown
LIMITED = COLUMN["limited_by"].shown


def columns(rows: Sequence[SummaryRow]) -> list[tuple[str, str, str]]:
    """The table's columns: "not drained" only where a point was stopped early, send delay
    only where a point ran open loop, cost only where a run carries it (runs on AWS), a target rate only for a
    capacity search's probes, the broker's CPU and what set the pace where the run recorded
    telemetry (last)."""
    table = list(TABLE)
    if any(_has(r, LIMITED[0]) for r in rows):
        table += [BROKER_CPU, LIMITED]
    for extra, after, shown in (
        (NOT_DRAINED, "lost", any(delivery(r).startswith("not drained") for r in rows)),
        (SEND_DELAY, window_column("send_latency"), any(_has(r, SEND_DELAY[0]) for r in rows)),
        (COST, "duplicated", any(_has(r, COST[0]) for r in rows)),
        (TARGET, "receiver_nodes", any(_has(r, TARGET[0]) for r in rows)),
    ):
        if shown:
            at = next(i for i, (key, _, _) in enumerate(table) if key == after)
            table.insert(at + 1, extra)
    return table


def _has(row: SummaryRow, key: str) -> bool:
    return row.get(key) not in (None, "")


def delivery(row: SummaryRow) -> str:
    """The point's delivery in docs/measurement.md §5's words ("drained", "not drained: …", "incomplete: …");
    "" for summaries written before it was recorded."""
    return str(row.get("delivery") or "")


def cell(row: SummaryRow, key: str, fmt: str) -> str:
    """One cell of a summary row: lost reads "incomplete" where a node's records are missing."""
    if key == "lost" and delivery(row).startswith("incomplete"):
        return "incomplete"
    return _cell(row.get(key), fmt)


def notes(row: SummaryRow) -> list[str]:
    """What a reader must know about a point's figures, each a few words."""
    found = [] if kept_up(row) else ["receivers did not keep up"]
    if delivery(row) not in ("", "drained"):
        found.append(delivery(row))
    found.extend(note for note in (negative_note(row), clipped_note(row)) if note)
    if fault := fault_note(row):
        found.append(fault)
    if slo := slo_note(row):
        found.append(slo)
    if label := bound_label(row):
        found.append(f"{label} ({row.get('limited_reason')})")
    return found


def slo_note(row: SummaryRow) -> str:
    """A capacity-search probe's verdict ("" for a sweep point)."""
    reason = row.get("slo_reason")
    if not reason:
        return ""
    holds = str(row.get("slo_holds"))
    if holds not in ("True", "False"):
        return str(reason)
    return ("holds the SLO: " if holds == "True" else "fails the SLO: ") + str(reason)


def fault_note(row: SummaryRow) -> str:
    """The note on a point with declared faults ("" without any): that it had some (what
    they did is in :func:`fault_lines`), and what stayed unavailable."""
    if not row.get("faults"):
        return ""
    note = "declared faults (what they did: Faults, below)"
    unavailable = row.get("unavailable")
    if unavailable not in (None, "", 0, "0"):
        note += f"; {unavailable} confirmed messages unavailable (left on a node that is down)"
    return note


def fault_lines(row: SummaryRow) -> list[str]:
    """What a point's declared faults did, from its summary row (none without faults): the
    faults, the failover gaps, the errors, duplicates and redeliveries within the faults'
    windows, and the point's lost, unavailable, duplicated and redelivered messages."""
    if not row.get("faults"):
        return []

    def count(key: str) -> str:
        return cell(row, key, "{:,.0f}")

    def seconds(key: str) -> str:
        return cell(row, key, "{:,.1f}")

    return [
        f"faults: {row['faults']}",
        f"failover gap: no confirmed send for {seconds('send_gap_s')} s, "
        f"no receive for {seconds('receive_gap_s')} s",
        f"through the faults: {count('fault_errors')} errors, "
        f"{count('fault_duplicated')} duplicated, {count('fault_redelivered')} redelivered",
        f"whole point: lost {count('lost')}, unavailable {count('unavailable')}, "
        f"duplicated {count('duplicated')}, redelivered {count('redelivered')}",
    ]


def negative_note(row: SummaryRow) -> str:
    """The note on a point with negative processing latencies ("" without any)."""
    return _count_note(
        row,
        "negative_latencies",
        "messages received before they were sent by the receiver's clock: "
        "clocks differ by more than the latency",
    )


def clipped_note(row: SummaryRow) -> str:
    """The note on a point with latencies beyond the histograms' range ("" without any)."""
    return _count_note(
        row, "clipped_latencies", "latencies beyond 10 min (the histograms' range) read as 10 min"
    )


def _count_note(row: SummaryRow, column: str, what: str) -> str:
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


def kept_up(row: SummaryRow) -> bool:
    """False when the analysis flagged that receivers did not keep up with senders."""
    value = row.get("receivers_kept_up")
    return value in (None, "") or str(value) in ("True", "true")


def text_table(broker: str, rows: Sequence[SummaryRow]) -> str:
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


def _delivery_cell(row: SummaryRow) -> str:
    text = delivery(row) or "–"
    warn = " class=warn" if text not in ("–", "drained") else ""
    return f'<td{warn} style="text-align:left">{html.escape(text)}</td>'


def _clocks(rows: Sequence[SummaryRow]) -> str:
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


#: Extra whole-run percentiles of processing latency in the HTML table (p99 is in TABLE).
RUN_EXTRAS = {q: COLUMN[run_column("processing_latency", q)].shown for q in ("p50", "p999", "max")}

#: What the load sweeps raise; any other swept value (a message size, a broker parameter,
#: receiver nodes) makes a curve of its own on the latency–throughput chart.
LOAD_KEYS = ("threads", "sender_nodes", "rate", "max_in_flight")


def html_columns(rows: Sequence[SummaryRow]) -> list[tuple[str, str, str]]:
    """The HTML table's columns: :func:`columns`, with processing latency's whole-run p50
    before its p99 and p99.9 and max after it."""
    table = columns(rows)
    at = next(
        i for i, (key, _, _) in enumerate(table) if key == run_column("processing_latency", "p99")
    )
    return [
        *table[:at],
        RUN_EXTRAS["p50"],
        table[at],
        RUN_EXTRAS["p999"],
        RUN_EXTRAS["max"],
        *table[at + 1 :],
    ]


def offered_load(load: dict[str, Any]) -> float:
    """What a point offers the broker, to order a sweep's points by: msgs/s in open loop
    (rate per worker × sending workers), batches in flight in closed loop."""
    workers = (number(load.get("threads")) or 0) * (number(load.get("sender_nodes")) or 1)
    rate = number(load.get("rate"))
    if rate:
        return rate * workers
    return workers * (number(load.get("max_in_flight")) or 1)


def curve_points(
    rows: Sequence[SummaryRow], points: Sequence[PointEntry], series: str = ""
) -> list[charts.CurvePoint]:
    """A run's sweep points for the latency–throughput chart: each summary row with the load
    its context point offered (``points``: the context's; rows without one fall back to their
    own threads and sender nodes), on a curve named ``series`` and the values swept besides
    the load."""
    by_index = {p.point: p for p in points}
    out = []
    for r in rows:
        point = by_index.get(int(r["point"]))
        load = (
            point.load.model_dump()
            if point is not None
            else {k: r.get(k) for k in ("threads", "sender_nodes")}
        )
        varied = point.varied if point is not None else {}
        others = " ".join(f"{k}={v}" for k, v in varied.items() if k not in LOAD_KEYS)
        label = r.get("label") or (point.label if point is not None else "")
        out.append(
            charts.CurvePoint(
                label=str(label or f"point {int(r['point']) + 1}"),
                load=offered_load(load),
                receive_msgs_per_s=number(r.get("receive_msgs_per_s")),
                latency_ms={
                    q: number(r.get(run_column("processing_latency", q))) for q in RUN_QUANTILES
                },
                series=" · ".join(s for s in (series, others) if s),
                bound=bound_label(r),
            )
        )
    return out


def bound_label(row: SummaryRow) -> str:
    """How a knee or a capacity bracket at this point is labelled when the clients or the
    shared machine set its pace ("" when the broker's figures are its own)."""
    limit = str(row.get("limited_by") or "")
    return Verdict(limit, "").label() if limit else ""


def _ms(value: float | None) -> str:
    if value is None:
        return "–"
    return f"{value:,.0f}" if value >= 100 else f"{value:.3g}"


def knee_text(points: list[charts.CurvePoint]) -> str:
    """Each curve's knee in a sentence (HTML)."""
    found = []
    for series, curve in charts.levels(points).items():
        if len(curve) < 2:
            continue
        name = f"{html.escape(series)}: " if series else ""
        at = charts.knee(curve)
        if at is None:
            found.append(f"<li>{name}no knee — {html.escape(charts.no_knee(curve))}.</li>")
            continue
        level = curve[at]
        after = curve[at + 1] if at + 1 < len(curve) else None
        text = (
            f"<li>{name}knee at <b>{html.escape(', '.join(level.labels))}</b>: "
            f"{level.receive_msgs_per_s:,.0f} msgs/s, p99 {_ms(level.p99)} ms"
        )
        if after is not None and after.p99 is not None:
            text += (
                f"; the next level ({html.escape(', '.join(after.labels))}) reached "
                f"{after.receive_msgs_per_s:,.0f} msgs/s at p99 {_ms(after.p99)} ms"
            )
        bound = [*level.bound, *(after.bound if after is not None else ())]
        if bound:
            text += (
                f". <b class=warn>Not the broker's limit — {html.escape(bound[0])}</b> "
                "(the verdict of the points at and after the knee)"
            )
        found.append(text + ".</li>")
    return f"<ul>{''.join(found)}</ul>" if found else ""


#: The resource charts of a point: (title, unit, telemetry column, roles drawn).
RESOURCE_CHARTS = (
    ("CPU per node (% of one core)", "%", "cpu_pct", ("broker", "sender", "receiver", HOST)),
    ("Disk write operations of the data device", "ops/s", "device_write_ops_s", ("broker", HOST)),
    ("Broker GC pause time", "ms/s", "gc_pause_ms_s", ("broker",)),
)


def read_resources(
    run_dir: Path, point: int, origin_s: int
) -> list[tuple[str, str, list[charts.ResourceSeries]]]:
    """A point's telemetry as the series of :data:`RESOURCE_CHARTS`, time counted from
    ``origin_s`` (its charts' origin); empty where it has none or it cannot be read. The
    data device is drawn once (the machine's row, else the first broker node's)."""
    folder = run_dir / LAYOUT.raw_table(LAYOUT.telemetry)
    try:
        files = sorted(folder.glob(f"p{point}-*.parquet"))
        rows = [r for f in files for r in pq.read_table(f).to_pylist()]
    except (OSError, ValueError):
        return []
    by_node: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in sorted(rows, key=lambda r: r["second"]):
        by_node.setdefault((r["role"], r["node"]), []).append(r)
    out = []
    for title, unit, column, roles in RESOURCE_CHARTS:
        series = [
            charts.ResourceSeries(
                f"{node} ({role})" if role != HOST else "machine",
                [r["second"] - origin_s for r in found],
                [r[column] for r in found],
            )
            for (role, node), found in by_node.items()
            if role in roles
        ]
        if column == "device_write_ops_s":
            series = series[-1:] if any(s.name == "machine" for s in series) else series[:1]
        out.append((title, unit, series))
    return out


@dataclass(frozen=True)
class WindowSeries:
    """A point's latency windows, in order; its charts count time from ``origin_s``, the
    wall-clock second its first window starts (the end of its warm-up)."""

    origin_s: int
    windows: list[charts.Window]


def read_windows(run_dir: Path) -> dict[int, WindowSeries]:
    """Each point's latency windows (``analysis/windows``) and its charts' time 0."""
    directory = run_dir / LAYOUT.windows
    if not directory.is_dir():
        return {}
    rows: dict[int, list[dict[str, Any]]] = {}
    for row in pq.read_table(directory).to_pylist():
        rows.setdefault(int(row["point"]), []).append(row)
    out = {}
    for point, found in rows.items():
        found.sort(key=lambda r: r["window_start"])
        start = found[0]["window_start"]
        windows = [
            charts.Window(
                end_s=float(r["window_start"] - start + (r.get("window_seconds") or 1)),
                seconds=float(r.get("window_seconds") or 1),
                send_msgs_per_s=r.get("send_msgs_per_s"),
                receive_msgs_per_s=r.get("receive_msgs_per_s"),
                latency_ms={
                    m: {q: r.get(f"{m}_{q}") for q in RUN_QUANTILES} for m in METRIC_TITLES
                },
            )
            for r in found
        ]
        out[point] = WindowSeries(int(start), windows)
    return out


def fault_marks(through: faults.Through, origin_s: int) -> list[charts.FaultMark]:
    """A point's performed faults on its charts' time axis (seconds since ``origin_s``, the
    wall-clock second its first window starts)."""
    return [
        charts.FaultMark(
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


def read_histograms(run_dir: Path) -> dict[int, dict[str, list[Bucket]]]:
    """Each point's merged whole-run histograms (``analysis/histograms``), by metric."""
    directory = run_dir / LAYOUT.histograms
    if not directory.is_dir():
        return {}
    out: dict[int, dict[str, list[Bucket]]] = {}
    for row in pq.read_table(directory).to_pylist():
        out.setdefault(int(row["point"]), {}).setdefault(row["metric"], []).append(
            Bucket(int(row["bucket"]), int(row["count"]), float(row["value_ms"]))
        )
    return out


def where_it_ran(context: RunContext | Mapping[str, Any]) -> str:
    """One line: the AWS fleet of a run on AWS, or the one host of a local run."""
    record = RunContext.of(context)
    host, broker, cost = record.host, record.broker, record.cost
    machine = host.get("machine_type")
    if cost is not None and cost.instances:
        fleet = ", ".join(f"{n} × {t}" for t, n in sorted(cost.instances.items()))
        region = f" in {cost.region}" if cost.region else ""
        line = f"AWS fleet{region}: {fleet}"
        if machine and machine != "local":
            line += f"; client machines {machine}"
        return line
    if not host:
        return "not recorded (the run context names no host)"
    cores = host.get("cpus")
    memory = number(host.get("memory_bytes"))
    what = "local run on" if machine in (None, "local") else f"on a {machine} machine,"
    line = f"{what} {host.get('hostname', '?')}, {cores} cores"
    if memory:
        line += f", {memory / 2**30:,.0f} GiB memory"
    if broker.deployment == "endpoints":
        line += "; broker at " + (", ".join(map(str, broker.endpoints)) or "given endpoints")
    elif broker.deployment == "local":
        line += "; the broker and every client node ran on this one host"
    return line


def _text(value: Any) -> str:
    if value in (None, ""):
        return "–"
    if isinstance(value, list):
        return (
            ", ".join(_text(v) if not isinstance(v, dict | list) else json.dumps(v) for v in value)
            or "–"
        )
    return str(value)


def _flat(value: Any, prefix: str = "") -> list[tuple[str, str]]:
    """Nested settings as (dotted key, text) pairs."""
    if isinstance(value, dict) and value:
        return [
            pair
            for k, v in value.items()
            for pair in _flat(v, f"{prefix}.{k}" if prefix else str(k))
        ]
    return [(prefix, _text(value))]


def _kv_table(pairs: list[tuple[str, str]]) -> str:
    body = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in pairs)
    return f"<table class=kv>{body}</table>"


#: Columns of the sweep point table of the run context: (key of the point's load, title).
POINT_LOAD = (
    ("threads", "threads"),
    ("sender_nodes", "senders"),
    ("receiver_nodes", "receivers"),
    ("message_size", "message bytes"),
    ("max_send_batch", "max batch"),
    ("rate", "rate per worker"),
    ("max_in_flight", "in flight"),
    ("duration", "duration s"),
)


def _from_load(key: str) -> Callable[[dict[str, Any]], Any]:
    return lambda point: (point.get("load") or {}).get(key)


def _points_table(points: list[dict[str, Any]]) -> str:
    """The context's sweep points: load, processes, client, the run of a repeated point
    (from 1; only where the scenario repeats its points) and broker parameters."""
    if not points:
        return ""
    columns: list[tuple[str, Callable[[dict[str, Any]], Any]]] = [
        (title, _from_load(key)) for key, title in POINT_LOAD
    ]
    columns += [
        ("processes per node", lambda p: p.get("processes_per_node")),
        ("client", lambda p: p.get("client")),
    ]
    if any(int(p.get("repeat") or 0) > 0 for p in points):
        columns.append(("run", lambda p: int(p.get("repeat") or 0) + 1))
    columns.append(
        (
            "broker parameters",
            lambda p: " ".join(f"{k}={v}" for k, v in (p.get("params") or {}).items()),
        )
    )
    shown = [(t, get) for t, get in columns if any(get(p) not in (None, "") for p in points)]
    head = "<th>point</th><th class=l>label</th>" + "".join(f"<th>{t}</th>" for t, _ in shown)
    body = "".join(
        f"<tr><td>{int(p.get('point', 0)) + 1}</td>"
        f"<td class=l>{html.escape(str(p.get('label', '')))}</td>"
        + "".join(f"<td>{html.escape(_text(get(p)))}</td>" for _, get in shown)
        + "</tr>"
        for p in points
    )
    return f"<h3>Sweep points</h3><table><tr>{head}</tr>{body}</table>"


def context_tables(context: dict[str, Any], rows: Sequence[SummaryRow]) -> str:
    """The run context as tables a person reads: broker and its settings read back, the
    scenario, the sweep points, the machine and client versions, the clocks; then the raw
    JSON, folded."""
    broker = {
        k: v for k, v in (context.get("broker") or {}).items() if k not in ("caveats", "stand_in")
    }
    scenario = context.get("scenario") or {}
    scenario_pairs = [
        ("name", _text(scenario.get("name"))),
        ("description", _text(scenario.get("description"))),
        ("file", _text(context.get("scenario_file"))),
        *_flat(scenario.get("measurement") or {}, "measurement"),
        *_flat(scenario.get("load") or {}, "load"),
        ("repeat", _text(scenario.get("repeat"))),
        ("faults", _text(scenario.get("faults"))),
    ]
    machine = [("where", where_it_ran(context))]
    machine += _flat(context.get("host") or {}, "host")
    if context.get("cost"):
        machine += _flat(context["cost"], "fleet")
    machine += _flat(context.get("clients") or {}, "client")
    machine += _flat(context.get("clock") or {}, "clock")
    raw = html.escape(json.dumps(context, indent=2, default=str))
    return (
        "<h2>Run context</h2><div class=ctx>"
        f"<div><h3>Broker (read back from the servers)</h3>{_kv_table(_flat(broker))}</div>"
        f"<div><h3>Scenario</h3>{_kv_table([p for p in scenario_pairs if p[1] != '–'])}</div>"
        f"<div><h3>Machine and clients</h3>{_kv_table(machine)}</div></div>"
        f"{_points_table(context.get('points') or [])}{_clocks(rows)}"
        f"<details><summary>the run context as recorded ({LAYOUT.context})</summary>"
        f"<pre>{raw}</pre></details>"
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
    windows: list[charts.Window],
    histograms: dict[str, list[Bucket]],
    chart: Charts,
    marks: list[charts.FaultMark],
    block: str,
    resources: list[tuple[str, str, list[charts.ResourceSeries]]] = [],  # noqa: B006
) -> str:
    number = int(row["point"]) + 1
    label = str(row.get("label") or "")
    figures = []
    if windows:
        figures.append(chart(charts.throughput_over_time(windows, "Throughput per window", marks)))
        for metric, title in METRIC_TITLES.items():
            figures.append(
                chart(charts.latency_over_time(windows, metric, f"{title} per window", marks))
            )
    for title, unit, series in resources:
        figures.append(chart(charts.resources_over_time(series, title, unit, marks, windows)))
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
        COLUMN[c].shown
        for c in (
            "broker_cpu_pct",
            "client_cpu_pct",
            "client_process_cpu_pct",
            "host_cpu_pct",
            "broker_disk_write_ops_s",
            "broker_disk_busy_pct",
            "broker_gc_ms_per_s",
            "broker_cpu_us_per_msg",
            "broker_disk_bytes_per_msg",
        )
    ]
    head = "<th>point</th><th>limited by</th>" + "".join(
        f"<th>{html.escape(title)}</th>" for _, title, _ in shown
    )
    body = "".join(
        f'<tr><td style="text-align:left">{int(r["point"]) + 1}: {html.escape(str(r.get("label") or ""))}</td>'
        f'<td{" class=warn" if bound_label(r) else ""} style="text-align:left" '
        f'title="{html.escape(str(r.get("limited_reason") or ""))}">'
        f"{html.escape(str(r.get('limited_by') or '–'))}</td>"
        + "".join(f"<td>{html.escape(cell(r, k, f))}</td>" for k, _, f in shown)
        + "</tr>"
        for r in rows
    )
    reasons = "".join(
        f"<li>Point {int(r['point']) + 1}: <b>{html.escape(str(r.get('limited_by')))}</b> — "
        f"{html.escape(str(r.get('limited_reason') or ''))}</li>"
        for r in rows
        if r.get("limited_by")
    )
    return (
        "<h2>What set the pace</h2>"
        f"<table><tr>{head}</tr>{body}</table><ul>{reasons}</ul>"
        f"<p class=muted>{RULES}</p>"
    )


def repeats_table(points: list[repeats.RepeatedPoint]) -> str:
    """Repeated points as an HTML table: median (min–max) of the main figures."""
    head = "<th>point</th><th>runs</th>" + "".join(
        f"<th>{html.escape(title)}</th>" for _, title, _ in repeats.TABLE
    )
    body = "".join(
        f'<tr><td style="text-align:left">{html.escape(p.label or str(p.base_point + 1))}</td>'
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
    broker, scenario = record.broker, record.scenario
    measurement = scenario.measurement
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
        f"<li>Point {int(r['point']) + 1}: {html.escape(note)}</li>"
        for r in rows
        for note in notes(r)
    )
    chart = Charts("chart")
    sections = []
    points = curve_points(rows, record.points)
    histograms = read_histograms(run_dir)
    found = capacity(record, rows)
    if found is not None:
        sections.append(
            f"<h2>Capacity at SLO</h2><p class=capacity><b>{html.escape(found.line())}</b></p>"
            "<p class=muted>The highest total rate (open loop) at which receivers kept up, the "
            "senders reached the target and the whole-run processing p99 stayed within the SLO; "
            "each probe's verdict is in the notes under the table.</p>"
        )
    if repeats.repeated(rows):
        sections.append(repeats_table(repeats.summarise(rows)))
    if any(len(curve) >= 2 for curve in charts.levels(points).values()):
        slo_ms = None if found is None else found.slo_p99_ms
        sections.append(
            "<h2>Latency against throughput</h2>"
            f"<div class=charts>{chart(charts.latency_throughput(points, slo_ms=slo_ms))}<div>"
            "<p>Each sweep point's receive rate against its whole-run processing latency, points "
            "in order of the load they offered (msgs/s in open loop, batches in flight in closed "
            "loop); hover for a point's label.</p>"
            f"{knee_text(points)}<p class=muted>{html.escape(charts.KNEE_RULE)}</p></div></div>"
        )
    overlay = {
        f"{int(r['point']) + 1}: {r.get('label') or ''}": histograms[int(r["point"])][
            "processing_latency"
        ]
        for r in rows
        if histograms.get(int(r["point"]), {}).get("processing_latency")
    }
    if len(overlay) >= 2:
        sections.append(
            "<h2>Processing latency by percentile, all points</h2><div class=charts>"
            + chart(charts.spectrum_chart(overlay, "Processing latency by percentile (whole run)"))
            + "<div><p>Each point's whole-run histogram as HdrHistogram plots it: the latency below "
            "which a share of messages stayed, the percentile on a log scale of 1/(1−p) so that the "
            "tail (99 %, 99.9 %, …) gets as much room as the body. Lines end at the maximum, drawn "
            "at 99.999 %.</p></div></div>"
        )
    series = read_windows(run_dir)
    through = {
        point: faults.point_effects(run_dir, timeline)
        for point, timeline in read_timelines(run_dir).items()
    }
    sections.append("<h2>Sweep points</h2>")
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
                faults_block(r, found_faults, drawn.origin_s if drawn is not None else None),
                read_resources(run_dir, point, drawn.origin_s) if drawn is not None else [],
            )
        )
    caveats = "".join(f"<li>{html.escape(c)}</li>" for c in broker.caveats)
    stand_in = broker.stand_in
    run_id = record.run_id if record.run_id is not None else run_dir.name
    title = f"{broker.name} — {scenario.name}"
    version = str(broker.version) if "version" in (broker.model_extra or {}) else "?"
    content = f"""<h1>{html.escape(title)}</h1>
<p class=where><b>Where it ran:</b> {html.escape(where_it_ran(record))}</p>
<p>Run <code>{html.escape(run_id)}</code>, {html.escape(str(record.started))} → {html.escape(str(record.finished))}, status <b>{html.escape(str(record.status))}</b>.
{html.escape(broker.title or "?")} {html.escape(version)}, topology {html.escape(str(broker.topology))} ({html.escape(str(broker.deployment))}).</p>
{f"<p><b>Local stand-in:</b> {html.escape(stand_in)}</p>" if stand_in else ""}
{f"<ul>{caveats}</ul>" if caveats else ""}
<table><tr>{head}</tr>{body}</table>
{f"<ul class=warn>{point_notes}</ul>" if point_notes else ""}
<p class=muted>{html.escape(SCOPES)}. The headline latencies are the maximum p95 over {html.escape(_text(measurement.window))} s windows sliding by {html.escape(_text(measurement.step))} s; rates are per whole second of the measurement period.
Processing latency runs from each message's intended send time to its receipt. A send call's latency is the broker's service time (start of the call to its confirmation), in open loop too;
there, send delay is how late a batch started against the schedule, so a stall shows in send delay and processing latency, not in the send call.
Times on the charts count seconds from the start of the measurement (the end of the warm-up); each window is drawn at its end.</p>
{pace_block(rows)}
{"".join(sections)}
{context_tables(recorded, rows)}"""
    path = run_dir / LAYOUT.report
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(page(f"brokerbench — {run_id}", content))
    except OSError as exc:  # a full disk or a read-only directory: one line naming it
        raise RecordsNotWritten(path, exc) from exc
    return path
