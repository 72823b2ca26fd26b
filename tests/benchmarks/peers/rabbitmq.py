"""RabbitMQ's own tool: PerfTest (``com.rabbitmq:perf-test`` from Maven Central) on a
quorum queue declared by the RabbitMQ system's own ``prepare``: persistent messages,
publisher confirms with at most a brokerbench batch (times the batches in flight)
unconfirmed per producer, ``threads`` producers and twice as many consumers with manual
acks and the adapter's prefetch, for ``duration`` seconds.
"""

from __future__ import annotations

import re
from pathlib import Path

from brokers.jvm import cache_dir, java_command, jvm_missing, maven_fetch
from brokers.rabbitmq.adapter import login

from .base import CpuUsage, LoadSettings, Log, Measurement, PeerContext, PeerTool, ToolFailed
from .process import run_tool
from .units import to_ms

PERF_TEST_VERSION = "2.22.1"
POM = Path(__file__).resolve().parent / "maven" / "perf-test" / "pom.xml"
HEAP = "512m"

_RATE = re.compile(r"(sending|receiving) rate avg: ([\d.]+) msg/s")
_CONFIRM = re.compile(
    r"confirm latency min/median/75th/95th/99th "
    r"(?P<min>[\d.]+)/(?P<p50>[\d.]+)/(?P<p75>[\d.]+)/(?P<p95>[\d.]+)/(?P<p99>[\d.]+) "
    r"(?P<unit>µs|ms)"
)


def parse_perf_test(text: str) -> dict[str, float]:
    """PerfTest's closing summary: sending/receiving rate and confirm latency p50/p99 (ms)."""
    rates = dict(_RATE.findall(text))
    if "sending" not in rates:
        raise ToolFailed("PerfTest printed no summary (sending rate avg)")
    result = {"send": float(rates["sending"]), "receive": float(rates.get("receiving", "nan"))}
    confirms = list(_CONFIRM.finditer(text))
    if confirms:
        last = confirms[-1]
        for q in ("p50", "p99"):
            result[q] = to_ms(float(last[q]), last["unit"])
    return result


def jars_dir() -> Path:
    return cache_dir("peers") / f"perf-test-{PERF_TEST_VERSION}"


class RabbitMQPeer(PeerTool):
    system = "rabbitmq"
    title = "PerfTest"

    def missing(self) -> str | None:
        reason = jvm_missing(f"PerfTest {PERF_TEST_VERSION}", any(jars_dir().glob("*.jar")))
        return reason

    def install(self, log: Log) -> None:
        maven_fetch(POM, jars_dir(), log)

    def settings(self, load: LoadSettings) -> str:
        return (
            f"PerfTest -x {load.threads} -y {load.receivers} -qa x-queue-type=quorum "
            f"-f persistent -c {load.window} -s {load.message_size} -q <prefetch> "
            f"-z {load.duration:g}"
        )

    def run(self, ctx: PeerContext, load: LoadSettings) -> tuple[Measurement, CpuUsage]:
        queue = ctx.destination(f"bench-peers-rabbitmq-t{load.threads}").name
        host, port = ctx.endpoints.first
        user, password = login(ctx.endpoints)
        args = [
            "--uri",
            f"amqp://{user}:{password}@{host}:{port}",
            "--producers",
            str(load.threads),
            "--consumers",
            str(load.receivers),
            "--queue",
            queue,
            "--predeclared",
            "--queue-args",
            f"x-queue-type={ctx.params.queue_type}",
            "--auto-delete",
            "false",
            "--confirm",
            str(load.window),
            "--size",
            str(load.message_size),
            "--qos",
            str(ctx.params.prefetch),
            "--time",
            str(max(1, round(load.duration))),
        ]
        if ctx.params.persistent:
            args += ["--flag", "persistent"]
        cmd = java_command("com.rabbitmq.perf.PerfTest", [str(jars_dir() / "*")], HEAP, args)
        (finished,), cpu = run_tool(
            ctx.workdir, ctx.broker_pids, [("PerfTest", cmd)], timeout=2 * load.duration + 60
        )
        result = parse_perf_test(finished.check())
        return (
            Measurement(
                send_per_s=result["send"],
                receive_per_s=result["receive"],
                publish_p50_ms=result.get("p50"),
                publish_p99_ms=result.get("p99"),
                notes=(
                    "PerfTest: sending rate avg (messages published, at most the confirm "
                    "window unconfirmed); latency is per message, publish to confirm",
                ),
            ),
            cpu,
        )
