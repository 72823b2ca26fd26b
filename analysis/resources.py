"""The resource columns of ``summary.csv`` and each point's verdict, from the telemetry.

The Spark job averages every node's telemetry over the point's measurement period
(:func:`analysis.transforms.node_usage`); here those few rows per point become:

* the busiest broker node's CPU (mean and peak second, % of one core), resident memory and
  GC pause time; the busiest thread of any broker node; the busiest client node's CPU and
  its busiest process's; the machine's CPU (% of all its cores) where broker and clients
  share it;
* the broker's disk, as its data devices count it (``/proc/diskstats``): bytes written per
  second (every broker data device; one machine's nodes share one), and the write
  operations, flushes and busy time of the busiest. A process's own count of bytes written
  (``/proc/<pid>/io``) is kept in the raw rows but not used: the kernel charges a whole
  range of pages to every small write followed by an fsync (measured here: 64 KiB charged
  for each 200-byte write + fdatasync that reached the device as 4 KiB), so it overstates
  what a broker that syncs each commit writes many times over; its network traffic (its own interfaces where
  it has them, else the machine's loopback, which carries the clients' traffic to it);
* what a message costs the broker: CPU microseconds and bytes written to disk per
  confirmed message (all broker nodes together, over the send rate) — figures that compare
  across systems and runs;
* ``limited_by`` / ``limited_reason``: :func:`workload.model.verdict.verdict`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from analysis.summary_row import Figures, SummaryRow
from workload.model.record import RunContext
from workload.model.verdict import NodeUsage, Split, Usage, pinned_cores, point_usage, verdict

MB = 1_000_000.0


def node_usages(rows: Iterable[Mapping[str, Any]]) -> dict[int, list[NodeUsage]]:
    """Rows of :func:`analysis.transforms.node_usage`, per point."""
    found: dict[int, list[NodeUsage]] = {}
    for r in rows:
        found.setdefault(int(r["point"]), []).append(NodeUsage.of_row(r))
    return found


@dataclass(frozen=True, eq=False)
class Resources(Figures):
    """One point's resource columns and verdict (None: not measured)."""

    limited_by: str
    limited_reason: str
    disturbed: bool | None = None
    broker_cpu_pct: float | None = None
    broker_cpu_max_pct: float | None = None
    broker_thread_max_pct: float | None = None
    client_cpu_pct: float | None = None
    client_process_cpu_pct: float | None = None
    host_cpu_pct: float | None = None
    broker_nodes_cpu_pct: float | None = None
    clients_cpu_pct: float | None = None
    other_cpu_pct: float | None = None
    steal_pct: float | None = None
    broker_rss_mb: float | None = None
    broker_gc_ms_per_s: float | None = None
    broker_disk_write_mb_s: float | None = None
    broker_disk_write_ops_s: float | None = None
    broker_disk_busy_pct: float | None = None
    broker_disk_flushes_s: float | None = None
    broker_net_mb_s: float | None = None
    broker_cpu_us_per_msg: float | None = None
    client_cpu_us_per_msg: float | None = None
    broker_disk_bytes_per_msg: float | None = None


def resource_columns(usage: Usage, send: float | None) -> Resources:
    """One point's resource columns and verdict (see the module); ``send``: its send rate."""
    judged = verdict(usage)
    brokers, clients = usage.of("broker"), usage.of("sender", "receiver")
    host = next(iter(usage.of("host")), None)
    busiest, client = usage.busiest("broker"), usage.busiest("sender", "receiver")
    devices = [n for n in brokers if n.device_busy_pct is not None]
    if usage.shared_host:  # one machine: its broker nodes share one disk, counted once
        devices = devices[:1]
    written = sum(n.device_write_bytes_s or 0.0 for n in devices) if devices else None
    disk = max(devices, key=lambda n: n.device_busy_pct or 0.0, default=None)
    own = [n.net_bytes_s for n in brokers if n.net_bytes_s is not None]
    net = sum(own) if own else (host.net_bytes_s if host is not None else None)
    threads = [n.thread_max_pct for n in brokers if n.thread_max_pct is not None]
    broker_cores = sum(n.cpu_pct for n in brokers) / 100.0
    client_cores = sum(n.cpu_pct for n in clients) / 100.0
    split = Split.of(usage, host) if host is not None and usage.shared_host else None
    return Resources(
        judged.limit,
        judged.reason,
        disturbed=None if split is None else judged.disturbed,
        broker_cpu_pct=None if busiest is None else busiest.cpu_pct,
        broker_cpu_max_pct=None if busiest is None else busiest.cpu_max_pct,
        broker_thread_max_pct=None if busiest is None else max(threads, default=None),
        client_cpu_pct=None if client is None else client.cpu_pct,
        client_process_cpu_pct=None if client is None else max(n.process_max_pct for n in clients),
        host_cpu_pct=host.cpu_pct / host.cores if host is not None and usage.shared_host else None,
        broker_nodes_cpu_pct=broker_cores * 100 if brokers else None,
        clients_cpu_pct=client_cores * 100 if clients else None,
        other_cpu_pct=None if split is None else split.others,
        steal_pct=None if split is None else split.steal,
        broker_rss_mb=None if busiest is None else busiest.rss_bytes / MB,
        broker_gc_ms_per_s=None if busiest is None else busiest.gc_pause_ms_s,
        broker_disk_write_mb_s=None if written is None else written / MB,
        broker_disk_write_ops_s=None if disk is None else disk.device_write_ops_s,
        broker_disk_busy_pct=None if disk is None else disk.device_busy_pct,
        broker_disk_flushes_s=None if disk is None else disk.device_flushes_s,
        broker_net_mb_s=None if net is None or not brokers else net / MB,
        broker_cpu_us_per_msg=broker_cores * 1e6 / send if brokers and send else None,
        client_cpu_us_per_msg=client_cores * 1e6 / send if client is not None and send else None,
        broker_disk_bytes_per_msg=written / send if written is not None and send else None,
    )


def resource_table(
    context: RunContext, usages: Mapping[int, list[NodeUsage]], rows: Mapping[int, SummaryRow]
) -> dict[int, Resources]:
    """Per point of the context: its resource columns (a point without telemetry: only its
    verdict, unknown), from its nodes' usage and its send rate as ``rows`` hold it."""
    out = {}
    for entry in context.points:
        send = rows[entry.point].send_msgs_per_s
        load = entry.load
        usage = point_usage(
            usages.get(entry.point, []),
            rate=load.rate,
            workers=load.sender_workers,
            max_in_flight=load.max_in_flight,
            send_msgs_per_s=send,
            pinned=pinned_cores(context.broker.given("cpus")),
        )
        out[entry.point] = resource_columns(usage, send)
    return out
