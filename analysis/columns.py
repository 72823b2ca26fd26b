"""The columns of ``analysis/summary.csv``, declared once, in the file's order: :data:`COLUMNS`
(by name ``COLUMNS["lost"]``: a name that is no column raises) with what every view needs
of each — its title in the tables, its name in compare and the charts, unit, display format,
which direction is better, and scope (:mod:`analysis.column_model`). The views pick theirs by
name; the analysis job's steps produce theirs as typed figures whose fields are columns
(:class:`analysis.summary_row.Figures`). The list of docs/columns.md is
:func:`glossary` (``python -m analysis.columns``; a test holds the two equal).
"""

from __future__ import annotations

from analysis.column_model import (
    METRICS,
    RUN_QUANTILES,
    Better,
    Column,
    Columns,
    Scope,
    latency_column,
)
from analysis.resource_columns import RESOURCE_COLUMNS


def _fewer_messages(name: str, doc: str, scope: Scope, *, long: str, title: str = "") -> Column:
    """A count of messages where fewer is better (lost, duplicated, redelivered, …)."""
    return Column(name, doc, scope, unit="msgs", title=title, long=long, better=Better.LOWER)


def _backlog_ms(name: str, doc: str, *, long: str, fmt: str, title: str = "") -> Column:
    """A processing latency of the backlog's phases, in ms: the lower, the better."""
    return Column(
        name, doc, Scope.BACKLOG, unit="ms", title=title, long=long, fmt=fmt, better=Better.LOWER
    )


#: Every column of ``summary.csv``, in the file's order.
COLUMNS = Columns(
    Column("broker", "the system (as `brokerbench brokers` names it)", Scope.POINT),
    Column("point", "the sweep point's index in the run, from 0", Scope.POINT),
    Column("label", "the point's swept values; the same for every run of a point", Scope.POINT),
    # Repeated points (scenario ``repeat``): which run of which point this is.
    Column("repeat", "which run of a repeated point this is, from 0", Scope.POINT),
    Column(
        "base_point", "the point this run repeats: its index in the un-repeated sweep", Scope.POINT
    ),
    Column("threads", "workers per client node (`load.threads`)", Scope.POINT, title="threads"),
    Column("sender_threads", "workers per sender node", Scope.POINT, title="send threads"),
    Column("receiver_threads", "workers per receiver node", Scope.POINT, title="recv threads"),
    Column("sender_nodes", "client nodes sending", Scope.POINT, title="senders"),
    Column("receiver_nodes", "client nodes receiving", Scope.POINT, title="receivers"),
    Column(
        "message_size",
        "bytes per message, or their distribution (`uniform 100–1000`, …)",
        Scope.POINT,
        unit="bytes",
    ),
    Column("sent", "messages the broker confirmed", Scope.TOTAL, unit="msgs"),
    Column("received", "messages received, every copy counted", Scope.TOTAL, unit="msgs"),
    Column("sent_bytes", "bytes of the messages the broker confirmed", Scope.TOTAL, unit="bytes"),
    Column(
        "received_bytes",
        "bytes of the messages received, every copy counted",
        Scope.TOTAL,
        unit="bytes",
    ),
    Column(
        "send_msgs_per_s",
        "confirmed messages per second",
        Scope.RUN,
        unit="msgs/s",
        title="send msgs/s",
        long="send throughput",
        fmt="{:,.0f}",
        better=Better.HIGHER,
    ),
    Column(
        "receive_msgs_per_s",
        "acknowledged messages per second",
        Scope.RUN,
        unit="msgs/s",
        title="receive msgs/s",
        long="receive throughput",
        fmt="{:,.0f}",
        better=Better.HIGHER,
    ),
    Column(
        "send_mb_per_s",
        "megabytes (10⁶ bytes) of confirmed messages per second",
        Scope.RUN,
        unit="MB/s",
        title="send MB/s",
        long="send throughput in bytes",
        fmt="{:,.2f}",
        better=Better.HIGHER,
    ),
    Column(
        "receive_mb_per_s",
        "megabytes (10⁶ bytes) of acknowledged messages per second",
        Scope.RUN,
        unit="MB/s",
        title="receive MB/s",
        long="receive throughput in bytes",
        fmt="{:,.2f}",
        better=Better.HIGHER,
    ),
    _fewer_messages(
        "lost",
        "confirmed and never received although receivers drained the point (empty: incomplete)",
        Scope.TOTAL,
        title="lost",
        long="lost messages",
    ),
    _fewer_messages(
        "not_drained",
        "confirmed and still queued when the run was stopped early",
        Scope.TOTAL,
        title="not drained",
        long="not drained (run stopped early)",
    ),
    Column(
        "lost_on_power_loss",
        "confirmed by the point's power-loss cut (in a second at or before the cut's) and never "
        "received: what the cut destroyed; counted apart from lost and not drained (empty: no "
        "power-loss fault, or incomplete)",
        Scope.FAULT,
        unit="msgs",
        title="lost (power cut)",
        long="lost on power loss",
        fmt="{:,.0f}",
        better=Better.LOWER,
    ),
    _fewer_messages(
        "duplicated",
        "copies received beyond a message's first",
        Scope.TOTAL,
        title="dup",
        long="duplicated messages",
    ),
    _fewer_messages(
        "reordered",
        "messages of a key received after a later one of the same sender and key, by the "
        "same receiver, and received once (empty: no keys, or no per-key order promised)",
        Scope.TOTAL,
        title="reord",
        long="reordered messages",
    ),
    _fewer_messages(
        "redelivered",
        "messages the broker marked as delivered again",
        Scope.TOTAL,
        long="redelivered messages",
    ),
    Column(
        "unconfirmed_received",
        "received messages whose send was never confirmed",
        Scope.TOTAL,
        unit="msgs",
    ),
    Column(
        "delivery",
        "how the point's records stand: `drained`, `not drained: …` or `incomplete: …` (why)",
        Scope.TOTAL,
    ),
    Column(
        "errors",
        "calls that failed, sending or receiving",
        Scope.TOTAL,
        long="errors",
        better=Better.LOWER,
    ),
    Column(
        "negative_latencies",
        "messages received before they were sent, by the receiver's clock",
        Scope.RUN,
        unit="msgs",
    ),
    Column("clipped_latencies", "latencies beyond 10 min (the histograms' range)", Scope.RUN),
    Column("receivers_kept_up", "whether receivers acknowledged 95 % of the send rate", Scope.RUN),
    Column("measured_seconds", "the whole seconds the rates divide by", Scope.RUN, unit="s"),
    # Send delay (the last metric) is empty in closed loop.
    *(
        column
        for metric in METRICS
        for column in (
            latency_column(metric, Scope.WINDOW, "p95"),
            *(latency_column(metric, Scope.RUN, q) for q in RUN_QUANTILES),
        )
    ),
    Column(
        "cost_per_million_usd",
        "a million messages at the receive rate, on-demand prices of the fleet (runs on AWS)",
        Scope.RUN,
        unit="USD",
        title="$ per M msgs",
        fmt="{:,.4f}",
        better=Better.LOWER,
    ),
    Column(
        "clock_offset_max_ms",
        "the largest offset of the point's nodes' clocks from the reference time",
        Scope.POINT,
        unit="ms",
    ),
    Column("clock_source", "where the clock offsets come from (chrony, single host)", Scope.POINT),
    # Resource telemetry (analysis.resources): means over the measurement period.
    *RESOURCE_COLUMNS,
    # Declared faults (empty without): see analysis.faults. The errors, duplicates and
    # redeliveries within the faults' windows; ``duplicated`` and ``redelivered`` above are
    # the point's totals.
    Column("faults", "the faults as performed: action and node", Scope.FAULT),
    Column(
        "fault_shortfall",
        "how faults did not run as declared (began 1 s late or more, or down for less than "
        "80 % of their window; empty: as declared): the point's figures are not those of the "
        "scenario's faults",
        Scope.FAULT,
    ),
    Column(
        "send_gap_s",
        "the longest stretch without a confirmed send through a fault, to 0.1 s",
        Scope.FAULT,
        unit="s",
        long="failover gap, sends",
        better=Better.LOWER,
    ),
    Column(
        "receive_gap_s",
        "the longest stretch without a receive through a fault, to 0.1 s",
        Scope.FAULT,
        unit="s",
        long="failover gap, receives",
        better=Better.LOWER,
    ),
    Column(
        "fault_errors",
        "failed calls from the first fault's action on",
        Scope.FAULT,
        long="errors through the faults",
        better=Better.LOWER,
    ),
    _fewer_messages(
        "fault_duplicated",
        "copies received from the first fault's action on",
        Scope.FAULT,
        long="duplicated through the faults",
    ),
    _fewer_messages(
        "fault_redelivered",
        "redeliveries from the first fault's action on",
        Scope.FAULT,
        long="redelivered through the faults",
    ),
    _fewer_messages(
        "unavailable",
        "confirmed and never received, left on a node a fault took down for good",
        Scope.FAULT,
        long="unavailable messages",
    ),
    # A backlog built and drained ([backlog]; empty without): see analysis.backlog.
    Column(
        "peak_backlog",
        "the most messages queued (confirmed − received) at the end of a second",
        Scope.BACKLOG,
        unit="msgs",
        title="peak backlog",
        long="peak backlog",
        fmt="{:,.0f}",
    ),
    Column(
        "catch_up_s",
        "from the drain's start to the end of the first second by which every message "
        "confirmed before it was received (to the second; empty: it did not catch up)",
        Scope.BACKLOG,
        unit="s",
        title="catch-up s",
        long="time to catch up",
        fmt="{:,.1f}",
        better=Better.LOWER,
    ),
    Column(
        "drain_msgs_per_s",
        "messages received from the drain's start to the catch-up (or the point's end), per second",
        Scope.BACKLOG,
        unit="msgs/s",
        title="drain msgs/s",
        long="drain rate",
        fmt="{:,.0f}",
        better=Better.HIGHER,
    ),
    Column(
        "backlog_left",
        "messages still queued when the point ended: its not drained (0 when it drained; empty: incomplete)",
        Scope.BACKLOG,
        unit="msgs",
        title="backlog left",
        long="backlog left",
        fmt="{:,.0f}",
    ),
    Column(
        "drain_cut_off",
        "whether the drain limit ended the point before it drained (what was left is not "
        "drained, not lost)",
        Scope.BACKLOG,
    ),
    _backlog_ms(
        "drain_processing_p50_ms",
        "processing latency p50 over the drain's seconds (its start to the catch-up)",
        long="processing p50, drain",
        fmt="{:,.2f}",
    ),
    _backlog_ms(
        "drain_processing_p99_ms",
        "processing latency p99 over the drain's seconds",
        title="drain proc p99 ms",
        long="processing p99, drain",
        fmt="{:,.1f}",
    ),
    _backlog_ms(
        "steady_processing_p50_ms",
        "processing latency p50 over the steady seconds: the latency span's before the "
        "backlog began and after the catch-up (empty: none)",
        long="processing p50, steady",
        fmt="{:,.2f}",
    ),
    _backlog_ms(
        "steady_processing_p99_ms",
        "processing latency p99 over the steady seconds",
        long="processing p99, steady",
        fmt="{:,.1f}",
    ),
    # Probes of a capacity search (empty for a sweep): see analysis.capacity.
    Column(
        "target_msgs_per_s",
        "the probe's rate, in total over every sender worker",
        Scope.SEARCH,
        unit="msgs/s",
        title="target msgs/s",
        fmt="{:,.0f}",
    ),
    Column("slo_holds", "whether the probe held the SLO, by the analysis's figures", Scope.SEARCH),
    Column("slo_reason", "why it held or failed", Scope.SEARCH),
)

#: Their names, in the file's order.
SUMMARY_COLUMNS = list(COLUMNS)


def glossary() -> str:
    """docs/columns.md's list: the scopes, then every column (Markdown)."""
    scopes = [f"- **{s.value}**: {s.meaning}" for s in Scope]
    rows = [f"| `{c.name}` | {c.unit} | {c.scope.value} | {c.doc} |" for c in COLUMNS.values()]
    return "\n".join(
        [*scopes, "", "| column | unit | scope | what it holds |", "|---|---|---|---|", *rows]
    )


if __name__ == "__main__":
    print(glossary())
