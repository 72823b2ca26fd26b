"""Redis's own tool: ``redis-benchmark`` (Debian package redis-tools) running
``XADD <stream> * m <value>`` with ``-c`` clients (the brokerbench threads) and ``-P``
commands per pipeline (a brokerbench batch, times the batches in flight).

redis-benchmark takes a request count, not a duration: a short probe run measures the
rate and the measured run gets ``rate × duration`` requests. It only sends.
"""

from __future__ import annotations

import csv
import io
import secrets
import shutil
import string

from .base import CpuUsage, LoadSettings, Measurement, PeerContext, PeerTool, ToolFailed
from .process import run_tool

PROBE_REQUESTS = 50_000
STREAM = "bench-peers-redis"


def parse_redis_benchmark_csv(text: str) -> dict[str, float]:
    """The ``--csv`` row of the command: rps and the latency columns (ms)."""
    rows = list(csv.reader(io.StringIO(text)))
    for index, row in enumerate(rows):
        if row and row[0] == "test" and index + 1 < len(rows):
            header, values = row, rows[index + 1]
            if len(values) == len(header):
                return {h: float(v) for h, v in zip(header[1:], values[1:], strict=True)}
    raise ToolFailed("redis-benchmark printed no CSV result")


def payload(size: int) -> str:
    """``size`` random printable bytes (one argument on the command line)."""
    alphabet = string.ascii_letters + string.digits
    return "".join(secrets.choice(alphabet) for _ in range(size))


class RedisPeer(PeerTool):
    system = "redis"
    title = "redis-benchmark"

    def missing(self) -> str | None:
        if shutil.which("redis-benchmark") is None:
            return "redis-benchmark not found: install the Debian package redis-tools"
        return None

    def settings(self, load: LoadSettings) -> str:
        return (
            f"redis-benchmark -c {load.threads} -P {load.window} --csv "
            f"XADD {STREAM} * m <{load.message_size} bytes>; requests = probe rate × "
            f"{load.duration:g} s"
        )

    def _command(self, ctx: PeerContext, load: LoadSettings, requests: int) -> list[str]:
        host, port = ctx.endpoints.first
        # redis-benchmark takes the password on the command line only (no environment
        # variable); the broker is this benchmark's own, on loopback, for one run.
        auth: list[str] = []
        if ctx.endpoints.get("password"):
            auth = ["-a", ctx.endpoints.get("password")]
            if ctx.endpoints.get("user"):
                auth += ["--user", ctx.endpoints.get("user")]
        return [
            "redis-benchmark",
            "-h",
            host,
            "-p",
            str(port),
            *auth,
            "-c",
            str(load.threads),
            "-P",
            str(load.window),
            "-n",
            str(requests),
            "--csv",
            "XADD",
            STREAM,
            "*",
            "m",
            payload(load.message_size),
        ]

    def run(self, ctx: PeerContext, load: LoadSettings) -> tuple[Measurement, CpuUsage]:
        (probe,), _ = run_tool(
            ctx.workdir,
            ctx.broker_pids,
            [("redis-benchmark probe", self._command(ctx, load, PROBE_REQUESTS))],
            timeout=120,
        )
        rate = parse_redis_benchmark_csv(probe.check())["rps"]
        requests = max(PROBE_REQUESTS, int(rate * load.duration))
        (finished,), cpu = run_tool(
            ctx.workdir,
            ctx.broker_pids,
            [("redis-benchmark", self._command(ctx, load, requests))],
            timeout=3 * load.duration + 60,
        )
        result = parse_redis_benchmark_csv(finished.check())
        return (
            Measurement(
                send_per_s=result["rps"],
                messages=requests,
                receive_per_s=None,
                publish_p50_ms=result["p50_latency_ms"],
                publish_p99_ms=result["p99_latency_ms"],
                notes=(
                    f"redis-benchmark: {requests} XADDs; latency is per command of a "
                    "pipeline (about one pipeline round trip); it only sends, so no "
                    "receive rate",
                ),
            ),
            cpu.with_roles(cpu.client_seconds, None),  # it only sends
        )
