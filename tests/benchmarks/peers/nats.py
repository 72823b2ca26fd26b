"""NATS's own tool: ``nats bench`` from the NATS CLI (Go module
``github.com/nats-io/natscli``, built once with ``go install`` when Go is there; not a
Debian package).

``threads`` asynchronous JetStream publishers (a brokerbench batch — times the batches in
flight — of publishes awaited together) and twice as many fetch consumers with explicit
acks on the durable consumer of a stream created by the NATS system's own ``prepare``.
``nats bench`` takes a message count: a short probe run on a stream of its own measures
the rate, and the measured run gets ``rate × duration`` messages.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from brokers.jvm import cache_dir

from .base import CpuUsage, LoadSettings, Log, Measurement, PeerContext, PeerTool, ToolFailed
from .process import last_line, run_tool
from .units import number, to_ms

NATSCLI_MODULE = "github.com/nats-io/natscli/nats"
NATSCLI_VERSION = "v0.5.1"
PROBE_MESSAGES = 20_000
#: The durable consumer the NATS adapter's ``prepare`` creates.
CONSUMER = "brokerbench"

_PUB_RATE = re.compile(r"publisher (?:aggregated )?stats: ([\d,.]+) msgs/sec")
_FETCH_RATE = re.compile(r"consumer \(fetch\) (?:aggregated )?stats: ([\d,.]+) msgs/sec")
_UNIT = r"\s*([\d,.]+)\s*(ns|us|µs|ms|s)\b"
_P50 = re.compile(r"\bP50:?" + _UNIT)
_P99 = re.compile(r"\bP99:?" + _UNIT)


def parse_nats_bench(text: str, role: str) -> dict[str, float]:
    """``role`` "pub" or "fetch": the (aggregated) rate, and for publishers p50/p99 (ms)."""
    pattern = _PUB_RATE if role == "pub" else _FETCH_RATE
    rates = pattern.findall(text)
    if not rates:
        raise ToolFailed(f"nats bench ({role}) printed no stats line")
    result = {"rate": number(rates[-1])}
    summary = text[text.rfind(rates[-1]) :]
    for name, regex in (("p50", _P50), ("p99", _P99)):
        found = regex.findall(summary)
        if found:
            value, unit = found[-1]
            result[name] = to_ms(number(value), unit)
    return result


def natscli_dir() -> Path:
    return cache_dir("peers") / f"natscli-{NATSCLI_VERSION}"


def natscli() -> Path:
    return natscli_dir() / "nats"


def stream_of(destination_name: str) -> str:
    """The stream name the NATS adapter derives from a destination name."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", destination_name)


class NatsPeer(PeerTool):
    system = "nats"
    title = "nats bench"

    def missing(self) -> str | None:
        if natscli().exists():
            return None
        if shutil.which("go") is None:
            return f"the NATS CLI is not built and go is not installed ({NATSCLI_MODULE})"
        return f"the NATS CLI {NATSCLI_VERSION} could not be built with go install"

    def install(self, log: Log) -> None:
        go = shutil.which("go")
        if natscli().exists() or go is None:
            return
        log(f"building the NATS CLI {NATSCLI_VERSION} with go install (once, about a minute)…")
        done = subprocess.run(
            [go, "install", f"{NATSCLI_MODULE}@{NATSCLI_VERSION}"],
            env={**os.environ, "GOBIN": str(natscli_dir())},
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
        if done.returncode != 0:
            log(f"  go install failed: {last_line(done.stderr)}")

    def settings(self, load: LoadSettings) -> str:
        return (
            f"nats bench js pub async --clients {load.threads} --batch {load.window} "
            f"--size {load.message_size}; js fetch --clients {load.receivers} --batch "
            f"{load.receive_batch} (explicit acks); messages = probe rate × {load.duration:g} s"
        )

    def _pub(self, ctx: PeerContext, stream: str, messages: int, load: LoadSettings) -> list[str]:
        return [
            str(natscli()),
            "bench",
            "js",
            "pub",
            "async",
            "--server",
            ",".join(f"nats://{h}" for h in ctx.endpoints.hosts),
            "--no-progress",
            "--stream",
            stream,
            "--clients",
            str(load.threads),
            "--msgs",
            str(messages),
            "--size",
            f"{load.message_size}B",
            "--batch",
            str(load.window),
            f"brokerbench.{stream}",
        ]

    def _fetch(self, ctx: PeerContext, stream: str, messages: int, load: LoadSettings) -> list[str]:
        return [
            str(natscli()),
            "bench",
            "js",
            "fetch",
            "--server",
            ",".join(f"nats://{h}" for h in ctx.endpoints.hosts),
            "--no-progress",
            "--stream",
            stream,
            "--consumer",
            CONSUMER,
            "--clients",
            str(load.receivers),
            "--msgs",
            str(messages),
            "--batch",
            str(load.receive_batch),
        ]

    def _env(self, ctx: PeerContext) -> dict[str, str]:
        """The NATS CLI's login, from the environment rather than the command line."""
        if not ctx.endpoints.get("password"):
            return {}
        return {
            "NATS_USER": ctx.endpoints.get("user"),
            "NATS_PASSWORD": ctx.endpoints.get("password"),
        }

    def run(self, ctx: PeerContext, load: LoadSettings) -> tuple[Measurement, CpuUsage]:
        env = self._env(ctx)
        probe_stream = stream_of(ctx.destination(f"bench-peers-nats-probe-t{load.threads}").name)
        (probe,), _ = run_tool(
            ctx.workdir,
            ctx.broker_pids,
            [("nats bench probe", self._pub(ctx, probe_stream, PROBE_MESSAGES, load))],
            timeout=120,
            env=env,
        )
        rate = parse_nats_bench(probe.check(), "pub")["rate"]
        # Every client gets the same share, so the count is a multiple of both client counts.
        step = load.receivers
        messages = max(PROBE_MESSAGES, int(rate * load.duration) // step * step)
        stream = stream_of(ctx.destination(f"bench-peers-nats-t{load.threads}").name)
        finished, cpu = run_tool(
            ctx.workdir,
            ctx.broker_pids,
            [
                ("nats bench fetch", self._fetch(ctx, stream, messages, load)),
                ("nats bench pub", self._pub(ctx, stream, messages, load)),
            ],
            timeout=3 * load.duration + 60,
            env=env,
        )
        fetch, pub = finished
        sent = parse_nats_bench(pub.check(), "pub")
        received = parse_nats_bench(fetch.check(), "fetch")
        return (
            Measurement(
                send_per_s=sent["rate"],
                messages=messages,
                receive_per_s=received["rate"],
                publish_p50_ms=sent.get("p50"),
                publish_p99_ms=sent.get("p99"),
                notes=(
                    f"nats bench: {messages} messages; latency as nats bench reports it for "
                    "asynchronous publishing (per publish operation)",
                ),
            ),
            cpu.with_roles(pub.cpu_seconds, fetch.cpu_seconds),
        )
