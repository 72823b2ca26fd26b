"""Names of the resource telemetry every node records (:mod:`workload.engine.telemetry`), for the
sampler that writes it and the analysis that reads it. Standard library only, like the
sampler: a broker machine's telemetry agent imports it without the project's dependencies.
"""

from __future__ import annotations

#: The role (and node name) of the rows about the machine as a whole.
HOST = "host"

#: Telemetry columns averaged per node over a measurement period (:func:`node_means`, and
#: the Spark job's ``analysis.transforms.node_usage``).
USAGE_MEANS = (
    "cores",
    "processes",
    "cpu_pct",
    "cpu_steal_pct",
    "cpu_process_max_pct",
    "cpu_thread_max_pct",
    "rss_bytes",
    "device_write_bytes_s",
    "device_write_ops_s",
    "device_busy_pct",
    "device_flushes_s",
    "net_in_bytes_s",
    "net_out_bytes_s",
    "gc_pause_ms_s",
)
