"""Kafka's own tools: ``ProducerPerformance`` and ``ConsumerPerformance`` (``kafka-tools``
3.9.1 from Maven Central, on the classpath of the broker jars brokerbench fetched).

ProducerPerformance takes a record count, not a duration: a short probe run on a topic of
its own measures the rate, and the measured run gets ``rate × duration`` records. The
consumer runs at the same time on the same topic and stops once it has read them all.
Both topics are created by the Kafka system's own ``prepare`` (16 partitions here).
"""

from __future__ import annotations

import re
from pathlib import Path

from brokers.jvm import cache_dir, java_command, jvm_missing, maven_fetch
from brokers.kafka.local import KAFKA_VERSION, jar_dir
from brokers.kafka.local import fetched as broker_jars_fetched

from .base import CpuUsage, LoadSettings, Log, Measurement, PeerContext, PeerTool, ToolFailed
from .process import run_tool

POM = Path(__file__).resolve().parent / "maven" / "kafka-tools" / "pom.xml"
PARTITIONS = 16
PROBE_RECORDS = 1_000_000
HEAP = "512m"
#: Longest gap between two records the consumer waits before giving up.
CONSUMER_GAP_MS = 30_000

_PRODUCER_SUMMARY = re.compile(
    r"(?P<records>\d+) records sent, (?P<rate>[\d.]+) records/sec \([\d.]+ MB/sec\), "
    r"(?P<avg>[\d.]+) ms avg latency, (?P<max>[\d.]+) ms max latency, "
    r"(?P<p50>\d+) ms 50th, (?P<p95>\d+) ms 95th, (?P<p99>\d+) ms 99th, "
    r"(?P<p999>\d+) ms 99\.9th"
)


def parse_producer_performance(text: str) -> dict[str, float]:
    """The final summary line: records, rate (records/s), avg/max/p50/p95/p99/p99.9 in ms."""
    found = _PRODUCER_SUMMARY.findall(text)
    if not found:
        raise ToolFailed("ProducerPerformance printed no summary line")
    names = ("records", "rate", "avg", "max", "p50", "p95", "p99", "p999")
    return {name: float(value) for name, value in zip(names, found[-1], strict=True)}


def parse_consumer_performance(text: str) -> dict[str, float]:
    """The CSV-like summary (header ``start.time, end.time, …``) as numbers by column."""
    lines = [line.strip() for line in text.splitlines()]
    for index, line in enumerate(lines[:-1]):
        if line.startswith("start.time,"):
            header = [c.strip() for c in line.split(",")]
            values = [v.strip() for v in lines[index + 1].split(",")]
            if len(values) == len(header):
                return {h: float(v) for h, v in zip(header[2:], values[2:], strict=True)}
    raise ToolFailed("ConsumerPerformance printed no summary")


def tools_dir() -> Path:
    return cache_dir("peers") / f"kafka-tools-{KAFKA_VERSION}"


class KafkaPeer(PeerTool):
    system = "kafka"
    title = "ProducerPerformance"
    broker_params = {"partitions": PARTITIONS}
    scales_with_threads = False

    def missing(self) -> str | None:
        reason = jvm_missing(f"Kafka {KAFKA_VERSION} jars", broker_jars_fetched())
        if reason:
            return reason
        if not any(tools_dir().glob("kafka-tools-*.jar")):
            return f"kafka-tools {KAFKA_VERSION} not fetched (needs mvn and Maven Central)"
        return None

    def install(self, log: Log) -> None:
        maven_fetch(
            POM,
            tools_dir(),
            log,
            goal_args=[
                "dependency:copy-dependencies",
                "-DincludeScope=runtime",
                "-DexcludeTransitive=true",
            ],
        )

    def settings(self, load: LoadSettings) -> str:
        return (
            f"ProducerPerformance --record-size {load.message_size} --throughput -1 "
            f"acks=all (one asynchronous producer), ConsumerPerformance alongside; topic of "
            f"{PARTITIONS} partitions; records = probe rate × {load.duration:g} s"
        )

    def _java(self, main: str, args: list[str]) -> list[str]:
        classpath = [str(jar_dir() / "*"), str(tools_dir() / "*")]
        return java_command(main, classpath, HEAP, args=args)

    def _producer(
        self, ctx: PeerContext, topic: str, records: int, load: LoadSettings
    ) -> list[str]:
        return self._java(
            "org.apache.kafka.tools.ProducerPerformance",
            [
                "--topic",
                topic,
                "--num-records",
                str(records),
                "--record-size",
                str(load.message_size),
                "--throughput",
                "-1",
                "--producer-props",
                f"bootstrap.servers={','.join(ctx.endpoints.hosts)}",
                "acks=all",
            ],
        )

    def _consumer(self, ctx: PeerContext, topic: str, records: int) -> list[str]:
        return self._java(
            "org.apache.kafka.tools.ConsumerPerformance",
            [
                "--bootstrap-server",
                ",".join(ctx.endpoints.hosts),
                "--topic",
                topic,
                "--messages",
                str(records),
                "--timeout",
                str(CONSUMER_GAP_MS),
                "--group",
                f"bench-peers-{topic}",
            ],
        )

    def __init__(self) -> None:
        #: The best rate a measured run reached: sizes the next runs (a probe, JVM start
        #: included, reads low and would make them short).
        self.rate: float | None = None

    def run(self, ctx: PeerContext, load: LoadSettings) -> tuple[Measurement, CpuUsage]:
        rate = self.rate
        if rate is None:
            probe_topic = ctx.destination("bench-peers-kafka-probe").name
            (probe,), _ = run_tool(
                ctx.workdir,
                ctx.broker_pids,
                [
                    (
                        "ProducerPerformance probe",
                        self._producer(ctx, probe_topic, PROBE_RECORDS, load),
                    )
                ],
                timeout=120,
            )
            rate = parse_producer_performance(probe.check())["rate"]
        records = max(PROBE_RECORDS, int(rate * load.duration))
        topic = ctx.destination("bench-peers-kafka").name
        finished, cpu = run_tool(
            ctx.workdir,
            ctx.broker_pids,
            [
                ("ConsumerPerformance", self._consumer(ctx, topic, records)),
                ("ProducerPerformance", self._producer(ctx, topic, records, load)),
            ],
            timeout=3 * load.duration + 120,
        )
        consumer, producer = finished
        sent = parse_producer_performance(producer.check())
        received = parse_consumer_performance(consumer.check())
        self.rate = max(self.rate or 0.0, sent["rate"])
        return (
            Measurement(
                send_per_s=sent["rate"],
                messages=sent["records"],
                receive_per_s=received["fetch.nMsg.sec"],
                publish_p50_ms=sent["p50"],
                publish_p99_ms=sent["p99"],
                notes=(
                    f"ProducerPerformance: {sent['records']:.0f} records; latency is per "
                    "record, send() to acknowledgement, including time queued in the "
                    "producer's buffer; whole milliseconds",
                    "ConsumerPerformance: fetch.nMsg.sec (excludes the group join); it "
                    "commits offsets automatically, no per-message acknowledgement",
                ),
            ),
            cpu.with_roles(producer.cpu_seconds, consumer.cpu_seconds),
        )
