"""The run context as a person reads it, at the end of a run's report: where the run ran
(:func:`where_it_ran`, also the report's first line), the broker and its settings read
back from the servers, the scenario, the sweep points, the machine and client versions and
each point's clocks (:func:`context_tables`); then the raw JSON, folded.
"""

from __future__ import annotations

import html
import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from analysis.summary_row import SummaryRow, number
from analysis.summary_table import formatted
from workload.model.layout import LAYOUT
from workload.model.record import RunContext
from workload.model.sizes import SizeDistribution


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


def as_text(value: Any) -> str:
    """A setting as a table shows it: "–" for none, a list joined with commas."""
    if value in (None, ""):
        return "–"
    if isinstance(value, list):
        return (
            ", ".join(
                as_text(v) if not isinstance(v, dict | list) else json.dumps(v) for v in value
            )
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
    return [(prefix, as_text(value))]


def _kv_table(pairs: list[tuple[str, str]]) -> str:
    body = "".join(f"<tr><th>{html.escape(k)}</th><td>{html.escape(v)}</td></tr>" for k, v in pairs)
    return f"<table class=kv>{body}</table>"


#: Columns of the sweep point table of the run context: (key of the point's load, title).
POINT_LOAD = (
    ("sender_threads", "sender threads"),
    ("receiver_threads", "receiver threads"),
    ("sender_nodes", "senders"),
    ("receiver_nodes", "receivers"),
    ("message_size", "message bytes"),
    ("send_batch", "send batch"),
    ("rate", "rate per worker"),
    ("max_in_flight", "in flight"),
    ("duration", "duration s"),
)


def _from_load(key: str) -> Callable[[dict[str, Any]], Any]:
    """A point's value of a load key: sender and receiver threads are ``threads`` in a
    record written before they were counted apart; a message-size table in short."""

    def get(point: dict[str, Any]) -> Any:
        load = point.get("load") or {}
        value = load.get(key)
        if value is None and key in ("sender_threads", "receiver_threads"):
            return load.get("threads")
        if key == "send_batch":
            return _batch_range(load)
        if key == "message_size" and isinstance(value, dict):
            try:
                return SizeDistribution.model_validate(value).label
            except ValueError:  # a record of another version: as it is
                return " ".join(f"{k}={v}" for k, v in value.items())
        return value

    return get


def _batch_range(load: dict[str, Any]) -> str | None:
    """A point's send batch sizes: ``1–10``, or ``800`` where every batch has one size
    (``min_send_batch``, absent from a record of an older version, is 1)."""
    largest = load.get("max_send_batch")
    if largest is None:
        return None
    smallest = load.get("min_send_batch") or 1
    return str(largest) if smallest == largest else f"{smallest}–{largest}"


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
        f"<tr><td>{int(p.get('point', 0))}</td>"
        f"<td class=l>{html.escape(str(p.get('label', '')))}</td>"
        + "".join(f"<td>{html.escape(as_text(get(p)))}</td>" for _, get in shown)
        + "</tr>"
        for p in points
    )
    return f"<h3>Sweep points</h3><table><tr>{head}</tr>{body}</table>"


def _clocks(rows: Sequence[SummaryRow]) -> str:
    """The run context's clock table: per point, the largest clock offset of its nodes."""
    body = "".join(
        f"<tr><td>{int(r['point'])}</td>"
        f'<td style="text-align:left">{html.escape(str(r.get("label")))}</td>'
        f"<td>{html.escape(formatted(r.get('clock_offset_max_ms'), '{:,.3f} ms'))}</td>"
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


def context_tables(context: dict[str, Any], rows: Sequence[SummaryRow]) -> str:
    """The run context as tables a person reads: broker and its settings read back, the
    scenario, the sweep points, the machine and client versions, the clocks; then the raw
    JSON, folded."""
    broker = {
        k: v for k, v in (context.get("broker") or {}).items() if k not in ("caveats", "stand_in")
    }
    scenario = context.get("scenario") or {}
    scenario_pairs = [
        ("name", as_text(scenario.get("name"))),
        ("description", as_text(scenario.get("description"))),
        ("file", as_text(context.get("scenario_file"))),
        *_flat(scenario.get("measurement") or {}, "measurement"),
        *_flat(scenario.get("load") or {}, "load"),
        ("repeat", as_text(scenario.get("repeat"))),
        ("faults", as_text(scenario.get("faults"))),
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
