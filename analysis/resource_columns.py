"""The resource columns of ``summary.csv`` (:mod:`analysis.resources` produces them): the
verdict and the figures it rests on — CPU of the broker and the clients, the shared
machine split three ways, memory, disk, network, and what a message costs — and the point
over time (:mod:`analysis.timeline`): how that cost moved through the measurement period,
its stalls, and each phase after it judged."""

from __future__ import annotations

from analysis.column_model import Better, Column, Scope


def _core_pct(name: str, doc: str, *, title: str = "", long: str = "") -> Column:
    """A CPU figure of the run in % of one core (100 = a core busy), shown in whole numbers."""
    return Column(name, doc, Scope.RUN, unit="% of a core", title=title, long=long, fmt="{:,.0f}")


def _lower_is_better(
    name: str, doc: str, *, unit: str, long: str, fmt: str, title: str = ""
) -> Column:
    """A figure of the run where lower is better: what a message costs, a pause, a trend."""
    return Column(
        name, doc, Scope.RUN, unit=unit, title=title, long=long, fmt=fmt, better=Better.LOWER
    )


#: In the file's order, where :data:`analysis.columns.COLUMNS` places them.
RESOURCE_COLUMNS = (
    Column(
        "limited_by",
        "what set the pace: client CPU, broker CPU, broker disk, network, shared host, "
        "none saturated or unknown (the rules: docs/verdict.md)",
        Scope.RUN,
        title="limited by",
        long="what set the pace",
    ),
    Column("limited_reason", "the figures the verdict rests on", Scope.RUN),
    Column(
        "disturbed",
        "on a shared machine: processes outside the run took more than a tenth of it, so the "
        "point's figures are not the benchmark's alone",
        Scope.RUN,
    ),
    _core_pct(
        "broker_cpu_pct",
        "the busiest broker node's CPU, mean (100 = one core busy)",
        title="broker CPU %",
        long="broker CPU, busiest node",
    ),
    _core_pct("broker_cpu_max_pct", "that node's busiest second"),
    _core_pct(
        "broker_thread_max_pct",
        "a broker node's busiest thread each second, mean (at 90 % a part of the broker that "
        "runs on one thread is saturated)",
    ),
    _core_pct("client_cpu_pct", "the busiest client node's CPU, mean", title="client CPU %"),
    _core_pct(
        "client_process_cpu_pct",
        "the busiest client process's CPU, mean (a Python process runs on about one core)",
        title="client proc CPU %",
    ),
    Column(
        "host_cpu_pct",
        "the machine's CPU where broker and clients share it (a local run), mean",
        Scope.RUN,
        unit="% of all cores",
        title="host CPU %",
        fmt="{:,.0f}",
    ),
    _core_pct("broker_nodes_cpu_pct", "every broker node's CPU summed, mean"),
    _core_pct("clients_cpu_pct", "every client node's CPU summed, mean"),
    _core_pct(
        "other_cpu_pct",
        "on a shared machine: the CPU of everything outside the run (the machine's use less the "
        "broker's and the clients'), mean",
    ),
    Column(
        "steal_pct",
        "of other_cpu_pct: what the hypervisor took for other guests (steal), mean; a virtual "
        "machine's neighbours disturb a point as other processes do",
        Scope.RUN,
        unit="% of a core",
        fmt="{:,.1f}",
    ),
    Column(
        "broker_rss_mb",
        "the busiest broker node's resident memory, mean",
        Scope.RUN,
        unit="MB",
        fmt="{:,.0f}",
    ),
    _lower_is_better(
        "broker_gc_ms_per_s",
        "the busiest broker node's GC pause time per second (JVM brokers)",
        unit="ms/s",
        title="GC ms/s",
        long="broker GC pause time",
        fmt="{:,.1f}",
    ),
    Column(
        "broker_disk_write_mb_s",
        "bytes written to the broker nodes' data devices, all nodes (locally: the machine's "
        "disk, anything else writing to it included)",
        Scope.RUN,
        unit="MB/s",
        fmt="{:,.2f}",
    ),
    Column(
        "broker_disk_write_ops_s",
        "write operations of the busiest broker data device",
        Scope.RUN,
        unit="ops/s",
        title="disk writes/s",
        fmt="{:,.0f}",
    ),
    Column(
        "broker_disk_busy_pct",
        "the share of time the busiest broker data device was busy",
        Scope.RUN,
        unit="%",
        title="disk busy %",
        fmt="{:,.0f}",
    ),
    Column(
        "broker_disk_flushes_s",
        "flushes (fsync reaching the device) of the busiest broker data device, where the kernel "
        "counts them",
        Scope.RUN,
        unit="1/s",
        fmt="{:,.0f}",
    ),
    Column(
        "broker_net_mb_s",
        "the broker nodes' network traffic, in and out (locally on loopback: the machine's)",
        Scope.RUN,
        unit="MB/s",
        fmt="{:,.2f}",
    ),
    _lower_is_better(
        "broker_cpu_us_per_msg",
        "broker CPU time per confirmed message, all broker nodes",
        unit="µs",
        title="broker CPU µs/msg",
        long="broker CPU per message",
        fmt="{:,.1f}",
    ),
    _lower_is_better(
        "client_cpu_us_per_msg",
        "client CPU time per confirmed message, all sender and receiver nodes (what sending "
        "and receiving one message cost the harness and its client library)",
        unit="µs",
        title="client CPU µs/msg",
        long="client CPU per message",
        fmt="{:,.1f}",
    ),
    _lower_is_better(
        "broker_disk_bytes_per_msg",
        "bytes written to the broker's data devices per confirmed message, all broker nodes",
        unit="bytes",
        title="disk bytes/msg",
        long="broker disk bytes per message",
        fmt="{:,.0f}",
    ),
    _lower_is_better(
        "broker_cpu_trend",
        "broker CPU per confirmed message in the last third of the measurement period over "
        "the first third, all broker nodes (1: steady; from 1.5 the verdict's reason notes it; "
        "empty for a period under 9 s)",
        unit="×",
        title="broker CPU/msg trend",
        long="broker CPU per message, last third over first",
        fmt="{:,.2f}",
    ),
    _lower_is_better(
        "client_cpu_trend",
        "client CPU per confirmed message in the last third of the measurement period over the "
        "first third, all sender and receiver nodes (as broker_cpu_trend)",
        unit="×",
        long="client CPU per message, last third over first",
        fmt="{:,.2f}",
    ),
    Column(
        "stall_s",
        "the longest stall: seconds in a row, at least 5, with messages outstanding (confirmed, "
        "not yet received) and no new message received, the backlog's build left out (0: none)",
        Scope.TOTAL,
        unit="s",
        title="stall s",
        long="longest stall",
        fmt="{:,.0f}",
        better=Better.LOWER,
    ),
    Column(
        "phase_verdicts",
        "each phase beside the measurement period judged over its own seconds — the backlog's "
        "build, its drain, the time after the senders stopped — and each stall with what was "
        "busy during it, one line each, joined by a vertical bar (the rules: docs/verdict.md)",
        Scope.TOTAL,
    ),
)
