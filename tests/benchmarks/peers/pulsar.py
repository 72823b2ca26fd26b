"""Pulsar's own tool: ``pulsar-perf`` from the Pulsar distribution brokerbench downloads.

``threads`` producers (unthrottled, at most a brokerbench batch — times the batches in
flight — outstanding each) and twice as many Shared-subscription consumers run on a topic
created by the Pulsar system's own ``prepare``, both for ``duration`` seconds (the
consumers start first and stop a little later).
"""

from __future__ import annotations

import re
from datetime import datetime

from brokers.pulsar.local import fetched, home
from brokers.pulsar.params import PulsarParams

from .base import CpuUsage, LoadSettings, Measurement, PeerContext, PeerTool, ToolFailed
from .process import run_tool

#: pulsar-perf's latency histograms need more than a small heap.
HEAP = "1g"
#: Seconds the consumers start before the producers (JVM start-up, subscribing).
CONSUMER_LEAD = 3.0
#: Seconds the consumers go on after the producers' time is up (to take what is in flight).
CONSUMER_TAIL = 5
#: No throttling (pulsar-perf's default rate is 100 msg/s).
UNTHROTTLED = 100_000_000
SUBSCRIPTION = "bench-peers"

_SENT = re.compile(r"Aggregated throughput stats --- (\d+) records sent --- ([\d.]+) msg/s")
_RECEIVED = re.compile(r"Aggregated throughput stats --- (\d+) records received --- ([\d.]+) msg/s")
_LATENCY = re.compile(
    r"Aggregated latency stats --- Latency: mean:\s*([\d.]+) ms - med:\s*([\d.]+) - "
    r"95pct:\s*([\d.]+) - 99pct:\s*([\d.]+)"
)
_STAMP = r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d,\d{3}[+-]\d{4})\s.*"
_PRODUCING = re.compile(_STAMP + r"Created \d+ producers", re.MULTILINE)
_DONE = re.compile(_STAMP + r"DONE \(reached the maximum duration", re.MULTILINE)


def _stamp(text: str) -> float:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S,%f%z").timestamp()


def parse_pulsar_perf_produce(text: str) -> dict[str, float]:
    """Records sent, the seconds the producers were sending (from the tool's log stamps:
    producers created → maximum duration reached), median and p99 publish latency (ms).

    pulsar-perf's own aggregated rate divides by the time since the JVM started up to its
    exit, which includes start-up and shutdown; it is kept as ``reported_rate``.
    """
    sent, latency = _SENT.findall(text), _LATENCY.findall(text)
    if not sent:
        raise ToolFailed("pulsar-perf produce printed no aggregated throughput")
    result = {"records": float(sent[-1][0]), "reported_rate": float(sent[-1][1])}
    began, done = _PRODUCING.search(text), _DONE.search(text)
    if not began or not done:
        raise ToolFailed("pulsar-perf produce: no start/end of production in its log")
    result["began"], result["done"] = _stamp(began.group(1)), _stamp(done.group(1))
    result["seconds"] = result["done"] - result["began"]
    if latency:
        result["p50"], result["p99"] = float(latency[-1][1]), float(latency[-1][3])
    return result


def parse_pulsar_perf_consume(text: str) -> dict[str, float]:
    """Records received and pulsar-perf's own rate (over the consumer's whole run)."""
    received = _RECEIVED.findall(text)
    if not received:
        raise ToolFailed("pulsar-perf consume printed no aggregated throughput")
    return {"records": float(received[-1][0]), "rate": float(received[-1][1])}


def topic_url(params: PulsarParams, name: str) -> str:
    return f"persistent://{params.namespace}/{name}"


class PulsarPeer(PeerTool):
    system = "pulsar"
    title = "pulsar-perf"

    def missing(self) -> str | None:
        if not fetched() or not (home() / "bin" / "pulsar-perf").exists():
            return "the Pulsar distribution (bin/pulsar-perf) is not fetched: run 'make setup'"
        return None

    def settings(self, load: LoadSettings) -> str:
        return (
            f"pulsar-perf produce -n {load.threads} -o {load.window} -s {load.message_size} "
            f"-time {load.duration:g}; consume -n {load.receivers} -st Shared "
            "-q <receiver_queue_size>"
        )

    def _command(self, ctx: PeerContext, *args: str) -> list[str]:
        host, port = ctx.endpoints.first
        return [
            str(home() / "bin" / "pulsar-perf"),
            args[0],
            "-u",
            f"pulsar://{host}:{port}",
            *args[1:],
        ]

    def run(self, ctx: PeerContext, load: LoadSettings) -> tuple[Measurement, CpuUsage]:
        params: PulsarParams = ctx.params
        name = ctx.destination(f"bench-peers-pulsar-t{load.threads}").name
        topic = topic_url(params, name)
        seconds = max(1, round(load.duration))
        consume = self._command(
            ctx,
            "consume",
            "-n",
            str(load.receivers),
            "-st",
            "Shared",
            "-ss",
            SUBSCRIPTION,
            "-sp",
            "Earliest",
            "-q",
            str(params.receiver_queue_size),
            "-time",
            str(seconds + round(CONSUMER_LEAD) + CONSUMER_TAIL),
            topic,
        )
        produce = self._command(
            ctx,
            "produce",
            "-n",
            str(load.threads),
            "-r",
            str(UNTHROTTLED),
            "-o",
            str(load.window),
            "-s",
            str(load.message_size),
            "-time",
            str(seconds),
            *([] if params.batching else ["--disable-batching"]),
            topic,
        )
        env = {"PULSAR_EXTRA_OPTS": f"-Xmx{HEAP}", "PULSAR_LOG_DIR": str(ctx.workdir)}
        finished, cpu = run_tool(
            ctx.workdir,
            ctx.broker_pids,
            [("pulsar-perf consume", consume), ("pulsar-perf produce", produce)],
            timeout=2 * load.duration + 90,
            env=env,
            stagger=CONSUMER_LEAD,
        )
        consumer, producer = finished
        sent = parse_pulsar_perf_produce(producer.check())
        received = parse_pulsar_perf_consume(consumer.check())
        producing_seconds = sent["seconds"]
        return (
            Measurement(
                send_per_s=sent["records"] / producing_seconds if producing_seconds else None,
                receive_per_s=received["records"] / producing_seconds
                if producing_seconds
                else None,
                publish_p50_ms=sent.get("p50"),
                publish_p99_ms=sent.get("p99"),
                notes=(
                    "pulsar-perf: send = records sent ÷ the producers' sending time and "
                    "receive = records the consumers got ÷ that time (from the tool's log "
                    "stamps; its own aggregated rate also counts JVM start-up and shutdown); "
                    "the consumers run from before the producers start until after they "
                    "stop; latency is per message, send to acknowledgement",
                ),
            ),
            cpu.within(sent["began"], sent["done"], scope="sending period"),
        )
