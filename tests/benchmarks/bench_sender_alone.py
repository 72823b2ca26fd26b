"""Benchmark (not a test): one brokerbench sender worker alone against an idle local broker.

A bench-peers row measures brokerbench's senders while its receivers and the broker share
the machine with them; on a small machine the same work then costs more CPU per message.
This script measures the sender's own cost undisturbed: it starts the system (single node),
runs one sender worker's loop — batch choice, stamping, the adapter's send path, accounting,
exactly as a sender node runs it — in this process's main thread for ``--messages``
messages, with no receivers, and prints the rate and the process's CPU per message.

    .venv/bin/python tests/benchmarks/bench_sender_alone.py --system redis \\
        --max-send-batch 800 --max-in-flight 1
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

from brokers import registry
from brokers.connection import Destination
from workload.engine import message
from workload.engine.client_loops import run_sender
from workload.engine.recording import WorkerRecorder
from workload.engine.worker import SenderLoop, WorkerSettings
from workload.model.sections import LoadSection


def measure(system_name: str, max_send_batch: int, max_in_flight: int, messages: int) -> str:
    system = registry.get(system_name)
    if system.local is None or system.asyncio:
        return f"{system.title}: skipped — measured here: systems started locally, blocking clients"
    reason = system.local.missing()
    if reason:
        return f"{system.title}: skipped — {reason}"
    params = system.params_model()
    with tempfile.TemporaryDirectory(prefix="bench-sender-") as workdir:
        cluster = system.local.start("single", params, Path(workdir) / "broker")
        try:
            destination = Destination("bench_sender_alone")
            system.prepare(cluster.endpoints, params, destination)
            adapter = system.connect_blocking(cluster.endpoints, params, destination)
            load = LoadSection.model_validate(
                {
                    "max_send_batch": max_send_batch,
                    "max_in_flight": max_in_flight,
                    "duration": 3600,
                    "messages": messages,
                }
            )
            pool = message.payload_pool(load, seed=0)  # as a sender node builds it
            settings = WorkerSettings("bench0000.0", 0, 0, load, pool, lambda: False)
            loop = SenderLoop(settings, WorkerRecorder("sender", 0, 0))
            wall, before = time.perf_counter(), os.times()
            run_sender(adapter, loop)
            wall, after = time.perf_counter() - wall, os.times()
            user, system_cpu = after.user - before.user, after.system - before.system
            cpu = user + system_cpu
            adapter.close()
        finally:
            cluster.stop()
    return (
        f"{system.title}: one sender worker alone, send batches uniform in [1, "
        f"{max_send_batch}], {max_in_flight} in flight, {messages:,} messages of "
        f"{load.message_size.fixed} B: {messages / wall:,.0f} msgs/s, "
        f"{cpu / messages * 1e6:.3f} µs of client CPU per message ({cpu / wall:.0%} of a core; "
        f"user {user / messages * 1e6:.3f}, system {system_cpu / messages * 1e6:.3f})"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--system", default="redis", help="the system (default redis)")
    parser.add_argument("--max-send-batch", type=int, default=800)
    parser.add_argument("--max-in-flight", type=int, default=1)
    parser.add_argument("--messages", type=int, default=2_000_000)
    args = parser.parse_args()
    print(measure(args.system, args.max_send_batch, args.max_in_flight, args.messages))


if __name__ == "__main__":
    main()
