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
from typing import Any

from workload.model.record import RunContext
from workload.model.verdict import NodeUsage, Usage, Verdict, point_usage, verdict

MB = 1_000_000.0


def node_usages(rows: Iterable[Mapping[str, Any]]) -> dict[int, list[NodeUsage]]:
    """Rows of :func:`analysis.transforms.node_usage`, per point."""
    found: dict[int, list[NodeUsage]] = {}
    for r in rows:
        found.setdefault(int(r["point"]), []).append(NodeUsage.of_row(r))
    return found


def resource_columns(usage: Usage, send_msgs_per_s: float | None) -> dict[str, Any]:
    """One point's resource columns and verdict (see the module)."""
    found: dict[str, Any] = {}
    judged: Verdict = verdict(usage)
    found["limited_by"] = judged.limit
    found["limited_reason"] = judged.reason
    if not usage.nodes:
        return found
    brokers = usage.of("broker")
    host = next(iter(usage.of("host")), None)
    if host is not None and usage.shared_host:
        found["host_cpu_pct"] = host.cpu_pct / host.cores
    busiest = usage.busiest("broker")
    if busiest is not None:
        found["broker_cpu_pct"] = busiest.cpu_pct
        found["broker_cpu_max_pct"] = busiest.cpu_max_pct
        threads = [n.thread_max_pct for n in brokers if n.thread_max_pct is not None]
        found["broker_thread_max_pct"] = max(threads) if threads else None
        found["broker_rss_mb"] = busiest.rss_bytes / MB
        found["broker_gc_ms_per_s"] = busiest.gc_pause_ms_s
    client = usage.busiest("sender", "receiver")
    if client is not None and send_msgs_per_s:
        clients = sum(n.cpu_pct for n in usage.of("sender", "receiver")) / 100.0
        found["client_cpu_us_per_msg"] = clients * 1e6 / send_msgs_per_s
    if client is not None:
        found["client_cpu_pct"] = client.cpu_pct
        found["client_process_cpu_pct"] = max(
            n.process_max_pct for n in usage.of("sender", "receiver")
        )
    devices = [n for n in brokers if n.device_busy_pct is not None]
    if usage.shared_host:  # one machine: its broker nodes share one disk, counted once
        devices = devices[:1]
    written = sum(n.device_write_bytes_s or 0.0 for n in devices) if devices else None
    disk = max(devices, key=lambda n: n.device_busy_pct or 0.0, default=None)
    if disk is not None:
        found["broker_disk_write_ops_s"] = disk.device_write_ops_s
        found["broker_disk_busy_pct"] = disk.device_busy_pct
        found["broker_disk_flushes_s"] = disk.device_flushes_s
        found["broker_disk_write_mb_s"] = None if written is None else written / MB
    if brokers:
        cpu_cores = sum(n.cpu_pct for n in brokers) / 100.0
        own = [n.net_bytes_s for n in brokers if n.net_bytes_s is not None]
        net = sum(own) if own else (host.net_bytes_s if host is not None else None)
        found["broker_net_mb_s"] = None if net is None else net / MB
        if send_msgs_per_s:
            found["broker_cpu_us_per_msg"] = cpu_cores * 1e6 / send_msgs_per_s
            if written is not None:
                found["broker_disk_bytes_per_msg"] = written / send_msgs_per_s
    return found


def resource_table(
    context: RunContext,
    usages: Mapping[int, list[NodeUsage]],
    rows: Mapping[int, Mapping[str, Any]],
) -> dict[int, dict[str, Any]]:
    """Per point of the context: its resource columns (a point without telemetry: only its
    verdict, unknown)."""
    out = {}
    for entry in context.points:
        send = (rows.get(entry.point) or {}).get("send_msgs_per_s")
        load = entry.load
        usage = point_usage(
            usages.get(entry.point, []),
            rate=load.rate,
            workers=load.sender_workers,
            max_in_flight=load.max_in_flight,
            send_msgs_per_s=send,
        )
        out[entry.point] = resource_columns(usage, send)
    return out
