"""The summary table a person reads: which columns it shows (those of the terminal, and
the HTML table's extra whole-run percentiles), each cell's text, and what a reader must
know about each point's figures (:func:`notes`: delivery in docs/measurement.md §5's words,
clocks, latencies beyond the histograms, declared faults, what lost means, a capacity
probe's verdict, what set the pace), and the table for the terminal (:func:`text_table`).

The tables pick summary columns by name; their titles and formats are the columns'
declarations (:data:`analysis.columns.COLUMNS`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from analysis.column_model import run_column, window_column
from analysis.columns import COLUMNS
from analysis.summary_row import SummaryRow, number
from workload.model.record import RunContext
from workload.model.verdict import Verdict
from workload.model.verdict_time import TREND_RATIO

#: The headline figures of a point, in the order the tables show them: the rates, the
#: processing latency's worst window and whole-run p99, the send call's worst window.
HEADLINE = (
    "send_msgs_per_s",
    "receive_msgs_per_s",
    window_column("processing_latency"),
    run_column("processing_latency", "p99"),
    window_column("send_latency"),
)
#: The terminal table's columns, (column, title, format) as each column declares them: the
#: load, the headline figures (the rates in bytes after those in messages) and delivery.
TABLE = [
    COLUMNS[name].shown
    for name in (
        *("sender_threads", "receiver_threads", "sender_nodes", "receiver_nodes"),
        *HEADLINE[:2],
        *("send_mb_per_s", "receive_mb_per_s"),
        *HEADLINE[2:],
        *("lost", "duplicated"),
    )
]


#: What the scope marks in the column titles mean.
SCOPES = "[window]: the worst latency window of the period; [run]: the whole measurement period"


#: Columns the table shows only where some point has them (see :func:`columns`).
TARGET = COLUMNS["target_msgs_per_s"].shown
COST = COLUMNS["cost_per_million_usd"].shown
NOT_DRAINED = COLUMNS["not_drained"].shown
POWER_LOSS = COLUMNS["lost_on_power_loss"].shown
SEND_DELAY = COLUMNS[run_column("send_delay", "p99")].shown
BROKER_CPU = COLUMNS["broker_cpu_pct"].shown
LIMITED = COLUMNS["limited_by"].shown


def columns(rows: Sequence[SummaryRow]) -> list[tuple[str, str, str]]:
    """The table's columns: "not drained" only where a point was stopped early, what a power
    cut lost only where a point had one, send delay
    only where a point ran open loop, cost only where a run carries it (runs on AWS), a target rate only for a
    capacity search's probes, the broker's CPU and what set the pace where the run recorded
    telemetry (last)."""
    table = list(TABLE)
    if any(_has(r, LIMITED[0]) for r in rows):
        table += [BROKER_CPU, LIMITED]
    for extra, after, shown in (
        (NOT_DRAINED, "lost", any(delivery(r).startswith("not drained") for r in rows)),
        (POWER_LOSS, "lost", any(_has(r, POWER_LOSS[0]) for r in rows)),
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
    """One cell of a summary row: lost reads "incomplete" where a node's records are missing;
    sender and receiver threads are ``threads`` in a summary written before they were
    counted apart."""
    if key == "lost" and delivery(row).startswith("incomplete"):
        return "incomplete"
    value = row.get(key)
    if key in ("sender_threads", "receiver_threads") and value in (None, ""):
        value = row.get("threads")
    return formatted(value, fmt)


def notes(row: SummaryRow) -> list[str]:
    """What a reader must know about a point's figures, each a few words."""
    found = [] if kept_up(row) else ["receivers did not keep up"]
    if delivery(row) not in ("", "drained"):
        found.append(delivery(row))
    label = bound_label(row)
    bound = f"{label} ({row.get('limited_reason')})" if label else ""
    # In this order; a note with nothing to say is "".
    said = [negative_note(row), clipped_note(row), fault_note(row), lost_note(row)]
    said += [slo_note(row), bound, stall_note(row), *trend_notes(row)]
    found.extend(note for note in said if note)
    return found


def trend_notes(row: SummaryRow) -> list[str]:
    """A note per cost per message that rose through the measurement period by
    :data:`~workload.model.verdict_time.TREND_RATIO` or more (the reason has its figures)."""
    found = []
    for column, what in (("broker_cpu_trend", "broker"), ("client_cpu_trend", "client")):
        ratio = number(row.get(column))
        if ratio is not None and ratio >= TREND_RATIO:
            found.append(f"{what} CPU per message rose {ratio:.1f}× during the point")
    return found


def stall_note(row: SummaryRow) -> str:
    """The note on a point that stalled ("" without a stall): its longest (the report's
    "What set the pace" names each with what was busy during it)."""
    stall = number(row.get("stall_s"))
    if not stall:
        return ""
    return (
        f"stalled {stall:,.0f} s: messages outstanding, none received (what was busy: the "
        "report's What set the pace)"
    )


def lost_note(row: SummaryRow) -> str:
    """The note on a point with lost messages ("" without any): receivers stop after
    ``load.idle_timeout`` without a message, so a broker that still held messages but
    delivered none for longer reads the same (docs/measurement.md §5)."""
    lost = number(row.get("lost"))
    if not lost or lost <= 0:
        return ""
    return (
        f"{lost:,.0f} lost: not received when the receivers stopped, after load.idle_timeout "
        "without a message (a broker that held them but delivered none for longer reads "
        "the same: a longer idle_timeout tells the two apart)"
    )


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


def backlog_lines(row: SummaryRow) -> list[str]:
    """What a point's backlog came to, from its summary row (none without ``[backlog]``):
    its peak, the drain's rate and catch-up, the processing latency of the drain apart from
    the steady seconds, and — when the drain limit cut it off — what was left, not drained
    (never lost)."""
    if number(row.get("peak_backlog")) is None:
        return []

    def shown(key: str) -> str:
        return cell(row, key, COLUMNS[key].fmt)

    catch_up = number(row.get("catch_up_s"))
    lines = [
        f"peak backlog {shown('peak_backlog')} messages; drain {shown('drain_msgs_per_s')} "
        "msgs/s; "
        + (
            f"caught up {catch_up:,.1f} s after the drain began"
            if catch_up is not None
            else "did not catch up"
        ),
        f"processing latency during the drain p50 {shown('drain_processing_p50_ms')} ms, "
        f"p99 {shown('drain_processing_p99_ms')} ms; in the steady seconds p50 "
        f"{shown('steady_processing_p50_ms')} ms, p99 {shown('steady_processing_p99_ms')} ms",
    ]
    if str(row.get("drain_cut_off") or "").lower() == "true":
        cut = number(row.get("lost_on_power_loss"))
        lines.append(
            f"the drain limit ended the point with {shown('backlog_left')} message(s) still "
            "queued: not drained, not lost"
            + (f" ({cut:,.0f} the power cut lost are counted apart)" if cut else "")
        )
    return lines


def fault_lines(row: SummaryRow) -> list[str]:
    """What a point's declared faults did, from its summary row (none without faults): the
    faults, the failover gaps, the errors, duplicates and redeliveries within the faults'
    windows, and the point's lost, unavailable, not drained (where it has any: a point
    stopped early), duplicated and redelivered messages."""
    if not row.get("faults"):
        return []

    def count(key: str) -> str:
        return cell(row, key, "{:,.0f}")

    def seconds(key: str) -> str:
        return cell(row, key, "{:,.1f}")

    shortfall = row.get("fault_shortfall")
    return [
        f"faults: {row['faults']}",
        *(
            [f"not as declared: {shortfall} (the figures are not those of the declared faults)"]
            if shortfall
            else []
        ),
        f"failover gap: no confirmed send for {seconds('send_gap_s')} s, "
        f"no receive for {seconds('receive_gap_s')} s",
        f"through the faults: {count('fault_errors')} errors, "
        f"{count('fault_duplicated')} duplicated, {count('fault_redelivered')} redelivered",
        f"whole point: lost {count('lost')}, unavailable {count('unavailable')}, "
        + (f"not drained {count('not_drained')}, " if number(row.get("not_drained")) else "")
        + (
            f"lost on power loss {count('lost_on_power_loss')}, "
            if _has(row, "lost_on_power_loss")
            else ""
        )
        + f"duplicated {count('duplicated')}, redelivered {count('redelivered')}",
    ]


def durability_line(context: RunContext, rows: Sequence[SummaryRow]) -> str:
    """The run's durability line ("" where its context records none and nothing was
    measured) with, after a power-loss fault, what its points measured: "claimed: … —
    measured: 1,103 of 18,523 confirmed messages lost on a power cut of every node"."""
    durability = context.broker.durability
    measurement = power_loss_measured(context, rows)
    if durability is None:
        return f"measured: {measurement}" if measurement else ""
    return durability.measured(measurement)


def power_loss_measured(context: RunContext, rows: Sequence[SummaryRow]) -> str:
    """What the points with a power cut lost of what they confirmed, summed ("" where no
    point counted it)."""
    cut = [r for r in rows if _has(r, "lost_on_power_loss")]
    if not cut:
        return ""
    lost = sum(number(r.get("lost_on_power_loss")) or 0 for r in cut)
    confirmed = sum(number(r.get("sent")) or 0 for r in cut)
    faults = (context.scenario.model_extra or {}).get("faults") or []
    nodes = {str(f.get("node", "all")) for f in faults if f.get("action") == "power-loss"}
    named = (f"node {n}" if n.isdigit() else f"the {n}" for n in sorted(nodes - {"all"}))
    who = "every node" if nodes <= {"all"} else ", ".join(named)
    cuts = "a power cut" if len(cut) == 1 else f"{len(cut)} power cuts"
    return f"{lost:,.0f} of {confirmed:,.0f} confirmed messages lost on {cuts} of {who}"


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


def formatted(value: Any, fmt: str) -> str:
    """A figure in ``fmt``; "–" where there is none, the value as it is where it is no number."""
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


def text_table(broker: str, rows: Sequence[SummaryRow], durability: str = "") -> str:
    """The printed table for one broker's run; under its title, with ``durability``, what a
    confirmed message survives (:attr:`brokers.durability.Durability.line`)."""
    table = columns(rows)
    header = [title for _, title, _ in table]
    body = [[cell(r, key, fmt) for key, _, fmt in table] for r in rows]
    widths = [
        max(len(h), *(len(b[i]) for b in body)) if body else len(h) for i, h in enumerate(header)
    ]
    lines = [
        f"{broker}  ({SCOPES})",
        *([f"durability: {durability}"] if durability else []),
        "  ".join(h.rjust(w) for h, w in zip(header, widths, strict=True)),
    ]
    lines.append("  ".join("-" * w for w in widths))
    for r, cells in zip(rows, body, strict=True):
        flag = f"  ← {'; '.join(notes(r))}" if notes(r) else ""
        lines.append("  ".join(c.rjust(w) for c, w in zip(cells, widths, strict=True)) + flag)
    return "\n".join(lines)


#: Extra whole-run percentiles of processing latency in the HTML table (p99 is in TABLE).
RUN_EXTRAS = {q: COLUMNS[run_column("processing_latency", q)].shown for q in ("p50", "p999", "max")}


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


def bound_label(row: SummaryRow) -> str:
    """How a knee or a capacity bracket at this point is labelled when the clients or the
    shared machine set its pace ("" when the broker's figures are its own)."""
    limit = str(row.get("limited_by") or "")
    return Verdict(limit, "").label() if limit else ""
