"""The peer benchmark's readers of other tools' output (samples captured from the real
tools on local brokers), its CPU arithmetic, the scenario it hands to brokerbench, its
table, its results file and the table of docs/peers.md rendered from it. No server is
started."""

from __future__ import annotations

import importlib
import json
import tomllib
from pathlib import Path
from typing import Any

import pytest

from brokers import registry
from brokers.base import Endpoints
from tests.benchmarks import peers_doc
from tests.benchmarks.peers import (
    brokerbench_tool,
    cpu,
    kafka,
    nats,
    postgresql,
    pulsar,
    rabbitmq,
    redis,
    table,
)
from tests.benchmarks.peers.base import (
    CpuUsage,
    LoadSettings,
    Measurement,
    PeerContext,
    ToolFailed,
    ToolRow,
)
from workload.model.scenario_file import parse_scenario

PRODUCER_PERFORMANCE = """\
log4j:WARN No appenders could be found for logger (org.apache.kafka.clients.producer.ProducerConfig).
300000 records sent, 243111.831442 records/sec (23.18 MB/sec), 333.80 ms avg latency, 510.00 ms max latency, 335 ms 50th, 455 ms 95th, 479 ms 99th, 501 ms 99.9th.
"""

CONSUMER_PERFORMANCE = """\
log4j:WARN Please initialize the log4j system properly.
start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec
2026-11-23 11:56:06:942, 2026-11-23 11:56:08:105, 28.6102, 24.6004, 300000, 257953.5684, 358, 805, 35.5407, 372670.8075
"""

REDIS_BENCHMARK_CSV = """\
"test","rps","avg_latency_ms","min_latency_ms","p50_latency_ms","p95_latency_ms","p99_latency_ms","max_latency_ms"
"XADD peerstream * m xxxxxxxxxx","445434.31","0.082","0.024","0.079","0.103","0.159","3.423"
"""

PERF_TEST = """\
id: test-120009-985, time 6.000 s, sent: 15171 msg/s, confirmed: 15171 msg/s, nacked: 0 msg/s, received: 15171 msg/s, min/median/75th/95th/99th consumer latency: 657/1265/1382/1713/2922 µs, confirm latency: 452/1175/1292/1563/2862 µs
test stopped (Reached time limit)
id: test-120009-985, sending rate avg: 12525 msg/s
id: test-120009-985, receiving rate avg: 12525 msg/s
id: test-120009-985, consumer latency min/median/75th/95th/99th 670/1386/1610/2316/5514 µs
id: test-120009-985, confirm latency min/median/75th/95th/99th 490/1300/1516/2360/5616 µs
"""

PGBENCH = """\
pgbench (15.18 (Debian 15.18-0+deb12u1))
transaction type: send.sql
scaling factor: 1
query mode: simple
number of clients: 1
number of threads: 1
maximum number of tries: 1
duration: 3 s
number of transactions actually processed: 7337
number of failed transactions: 0 (0.000%)
latency average = 0.408 ms
initial connection time = 4.548 ms
tps = 2449.245831 (without initial connection time)
"""

PGBENCH_LOG = [
    "0 1 1506 0 1795436631 366819",
    "0 2 419 0 1795436631 367256",
    "0 3 305 0 1795436631 367562",
]

PULSAR_PRODUCE = """\
2026-11-23T12:23:16,725+0000 [pulsar-perf-producer-exec-2-1] INFO  org.apache.pulsar.testclient.PerformanceProducer - Created 1 producers
2026-11-23T12:23:19,727+0000 [pulsar-perf-producer-exec-2-1] INFO  org.apache.pulsar.testclient.PerformanceProducer - ------------- DONE (reached the maximum duration: [3 seconds] of production) --------------
2026-11-23T12:23:26,399+0000 [Thread-0] INFO  org.apache.pulsar.testclient.PerformanceProducer - Aggregated throughput stats --- 8344 records sent --- 833.788 msg/s --- 0.636 Mbit/s
2026-11-23T12:23:26,449+0000 [Thread-0] INFO  org.apache.pulsar.testclient.PerformanceProducer - Aggregated latency stats --- Latency: mean:   3.660 ms - med:   2.778 - 95pct:   7.446 - 99pct:  11.007 - 99.9pct:  17.111 - 99.99pct:  19.413 - 99.999pct:  23.461 - Max:  23.461
"""

PULSAR_CONSUME = """\
2026-11-23T12:23:19,626+0000 [Thread-1] INFO  org.apache.pulsar.testclient.PerformanceConsumer - Aggregated throughput stats --- 8053 records received --- 1431.480 msg/s --- 1.092 Mbit/s --- AckRate: 1431.4803026421685  msg/s --- ack failed 0 msg
"""

NATS_PUB = """\

NATS JetStream asynchronous publisher stats: 38,985 msgs/sec ~ 3.7 MiB/sec ~ min: 54.03us ~ avg: 256.16us ~ max: 4,416.34us ~ P50: 222.40us ~ P90: 392.12us ~ P99: 985.12us ~ P99.9: 2,460.33us
"""

NATS_PUB_CLIENTS = """\
  [1] 10,712 msgs/sec ~ 1.0 MiB/sec ~ min: 56.26us ~ avg: 933.05us ~ max: 113,482.47us ~ P50: 415.01us ~ P90: 2,027.42us ~ P99: 5,951.87us ~ P99.9: 17,142.27us (49,874 msgs)
  [2] 10,624 msgs/sec ~ 1.0 MiB/sec ~ min: 60.83us ~ avg: 940.85us ~ max: 113,566.09us ~ P50: 414.29us ~ P90: 2,076.92us ~ P99: 6,057.38us ~ P99.9: 19,833.63us (49,874 msgs)

 NATS JetStream asynchronous publisher aggregated stats: 42,088 msgs/sec ~ 4.0 MiB/sec
 message rates min 10,522 | avg 10,604 | max 10,712 | stddev 72 msgs
 latencies per operation min 56.26us | avg 942.61us | max 113,613.31us | stddev 2,570.08us | P50 419.14us | P90 2,040.82us | P99 6,073.92us | P99.9: 17,142.27us
"""

NATS_FETCH = """\
  [1] 19,562 msgs/sec ~ 2.4 MiB/sec ~ min: 1.44us ~ avg: 7.52us ~ max: 1,635.69us ~ P50: 3.78us ~ P90: 8.48us ~ P99: 83.32us ~ P99.9: 309.60us (50,000 msgs)
  [2] 19,541 msgs/sec ~ 2.4 MiB/sec ~ min: 1.50us ~ avg: 7.30us ~ max: 481.22us ~ P50: 3.78us ~ P90: 8.53us ~ P99: 85.19us ~ P99.9: 285.04us (50,000 msgs)

 NATS JetStream durable consumer (fetch) aggregated stats: 39,069 msgs/sec ~ 4.8 MiB/sec
 message rates min 19,541 | avg 19,551 | max 19,562 | stddev 10 msgs
 latencies per operation min 1.44us | avg 7.41us | max 1,635.69us | stddev 28.95us | P50 3.78us | P90 8.52us | P99 85.07us | P99.9: 308.16us
"""


def test_producer_performance_summary() -> None:
    result = kafka.parse_producer_performance(PRODUCER_PERFORMANCE)
    assert result["records"] == 300000
    assert result["rate"] == pytest.approx(243111.831442)
    assert (result["p50"], result["p99"]) == (335, 479)


def test_consumer_performance_summary() -> None:
    result = kafka.parse_consumer_performance(CONSUMER_PERFORMANCE)
    assert result["data.consumed.in.nMsg"] == 300000
    assert result["fetch.nMsg.sec"] == pytest.approx(372670.8075)


def test_kafka_tools_without_summary_fail() -> None:
    with pytest.raises(ToolFailed, match="no summary"):
        kafka.parse_producer_performance("log4j:WARN nothing\n")
    with pytest.raises(ToolFailed):
        kafka.parse_consumer_performance("start.time, end.time\n")


def test_redis_benchmark_csv() -> None:
    result = redis.parse_redis_benchmark_csv(REDIS_BENCHMARK_CSV)
    assert result["rps"] == pytest.approx(445434.31)
    assert (result["p50_latency_ms"], result["p99_latency_ms"]) == (0.079, 0.159)
    assert len(redis.payload(100)) == 100


def test_perf_test_summary_takes_the_closing_lines() -> None:
    result = rabbitmq.parse_perf_test(PERF_TEST)
    assert (result["send"], result["receive"]) == (12525, 12525)
    assert result["p50"] == pytest.approx(1.300)
    assert result["p99"] == pytest.approx(5.616)


def test_perf_test_in_milliseconds() -> None:
    text = "sending rate avg: 10 msg/s\nconfirm latency min/median/75th/95th/99th 1/2/3/4/5 ms\n"
    assert rabbitmq.parse_perf_test(text)["p99"] == 5.0


def test_pgbench_result_and_log() -> None:
    result = postgresql.parse_pgbench(PGBENCH)
    assert result["transactions"] == 7337
    assert result["seconds"] == pytest.approx(7337 / 2449.245831)
    assert postgresql.parse_pgbench_log(PGBENCH_LOG) == [1.506, 0.419, 0.305]


def test_pgbench_scripts_quote_the_table() -> None:
    send = postgresql.send_script("bench_peers_t1", (1, 10), 100)
    assert "\\set n random(1, 10)" in send and 'INSERT INTO "bench_peers_t1"' in send
    receive = postgresql.receive_script("bench_peers_t1", 10, 30.0, 50)
    assert "FOR UPDATE SKIP LOCKED" in receive and "\\sleep 50 ms" in receive


def test_pulsar_perf_rates_come_from_the_sending_time() -> None:
    produced = pulsar.parse_pulsar_perf_produce(PULSAR_PRODUCE)
    assert produced["records"] == 8344
    assert produced["seconds"] == pytest.approx(3.002)
    assert (produced["p50"], produced["p99"]) == (2.778, 11.007)
    assert pulsar.parse_pulsar_perf_consume(PULSAR_CONSUME)["records"] == 8053


def test_nats_bench_publisher_and_fetch() -> None:
    pub = nats.parse_nats_bench(NATS_PUB, "pub")
    assert pub["rate"] == 38985
    assert pub["p50"] == pytest.approx(0.2224)
    assert pub["p99"] == pytest.approx(0.98512)
    assert nats.parse_nats_bench(NATS_FETCH, "fetch")["rate"] == 39069
    clients = nats.parse_nats_bench(NATS_PUB_CLIENTS, "pub")
    assert clients["rate"] == 42088
    assert (clients["p50"], clients["p99"]) == pytest.approx((0.41914, 6.07392))
    with pytest.raises(ToolFailed):
        nats.parse_nats_bench(NATS_FETCH, "pub")


def test_proc_stat_with_spaces_and_parentheses_in_the_name() -> None:
    line = "4242 (java (main) x) S 1 4242 4242 0 -1 4194304 10 0 0 0 150 50 7 3 20 0 30 0 99"
    stat = cpu.parse_stat(line)
    assert (stat.pid, stat.ppid, stat.ticks) == (4242, 1, 150 + 50 + 7 + 3)


def test_cpu_between_two_times_is_interpolated() -> None:
    samples = [cpu.CpuSample(0.0, 0.0, 0.0, 0.0), cpu.CpuSample(2.0, 2.0, 1.0, 4.0)]
    assert cpu.usage_between(samples, 0.5, 1.5) == (1.0, 0.5, 1.0, 2.0)
    assert cpu.usage_between(samples, 5.0, 6.0) is None
    usage = CpuUsage(2.0, 1.0, 2.0, samples=tuple(samples)).within(0.0, 1.0, "sending period")
    assert (usage.client_pct, usage.broker_pct, usage.scope) == (100.0, 50.0, "sending period")
    # The machine was busier than client and broker together: the rest is someone else's.
    assert usage.other_pct == 50.0


def test_machine_cpu_is_elapsed_less_idle(tmp_path: Path) -> None:
    (tmp_path / "stat").write_text("cpu  100 5 50 1000 20 3 2 0 0 0\ncpu0 1 2 3 4 5 6 7 8\n")
    assert cpu.machine_busy_seconds(tmp_path) == (100 + 5 + 50 + 3 + 2) / cpu.TICKS


def test_scenario_for_the_running_broker_is_valid() -> None:
    system = registry.get("kafka")
    ctx = PeerContext(
        system,
        system.params_model.model_validate({"partitions": 16}),
        Endpoints(("127.0.0.1:9092",), (("kafka_version", "3.9.1"),)),
        workdir=None,  # type: ignore[arg-type]
        broker_pids=list,
    )
    load = LoadSettings(threads=4, duration=20.0)
    text = brokerbench_tool.scenario_toml(ctx, load, {"processes": 2}, {"partitions": 16})

    scenario = parse_scenario(tomllib.loads(text))
    assert scenario.broker.deployment == "endpoints"
    assert scenario.broker.options == {"kafka_version": "3.9.1"}
    assert (scenario.load.threads, scenario.load.max_send_batch, scenario.load.processes) == (
        4,
        10,
        2,
    )
    assert scenario.measurement.warmup == 4.0  # brokerbench's default: a fifth of 20 s
    assert scenario.broker_params().partitions == 16  # type: ignore[attr-defined]


def test_summary_row_to_measurement() -> None:
    row = {
        "send_msgs_per_s": "4491.500",
        "receive_msgs_per_s": "4496.000",
        "send_latency_run_p50_ms": "0.469",
        "send_latency_run_p99_ms": "",
        "lost": "3",
        "receivers_kept_up": "False",
        "processing_latency_run_p50_ms": "5.94",
        "processing_latency_run_p99_ms": "1520.3",
    }
    m = brokerbench_tool.summary_measurement(row)
    assert (m.send_per_s, m.receive_per_s, m.publish_p50_ms, m.publish_p99_ms) == (
        4491.5,
        4496.0,
        0.469,
        None,
    )
    assert any("lost = 3" in n for n in m.notes)
    assert any("did not keep up" in n for n in m.notes)
    assert "brokerbench: end-to-end (processing) latency p50 5.9 ms, p99 1,520.3 ms" in m.notes


def test_table_ratio_and_failures() -> None:
    usage = CpuUsage(1.0, 2.0, 4.0, sender_seconds=0.25, receiver_seconds=0.75)
    peer_usage = CpuUsage(2.0, 2.0, 4.0)
    rows = [
        ToolRow(table.BROKERBENCH, 1, Measurement(1000.0, 990.0, 0.5, 2.0), usage),
        ToolRow("PerfTest", 1, Measurement(4000.0, 3900.0, 1.0, 5.0, ("a note",)), peer_usage),
        ToolRow(table.BROKERBENCH, 4, error="brokerbench run exited with code 1: boom"),
        ToolRow("PerfTest", 4, error="PerfTest printed no summary (sending rate avg)"),
    ]
    text = table.render("RabbitMQ", ["settings"], rows)
    lines = text.splitlines()
    first = next(line for line in lines if line.startswith("brokerbench") and " 1 " in line)
    # send rate 1000 ÷ 4000; client CPU per message 250 µs ÷ 125 µs
    assert first.split()[-2:] == ["0.250", "2.000"]
    assert first.split()[-5:-2] == ["62.50", "189.39", "250.00"]
    assert "FAILED: brokerbench run exited with code 1: boom" in text
    assert "FAILED: PerfTest printed no summary" in text
    assert "note: a note" in text


def test_a_peer_row_well_below_its_standalone_run_is_left_out_of_the_ratios() -> None:
    usage = CpuUsage(1.0, 1.0, 1.0)
    rows = [
        ToolRow("redis-benchmark", 1, Measurement(10_000.0), usage, reference=True),
        ToolRow(table.BROKERBENCH, 1, Measurement(2000.0), usage),
        ToolRow("redis-benchmark", 1, Measurement(7000.0), usage),
    ]
    text = table.render("Redis", [], rows)
    ours = next(line for line in text.splitlines() if line.startswith("brokerbench"))
    assert ours.endswith("peer disturbed  peer disturbed")
    assert "redis-benchmark (standalone)" in text and "left out of the ratios" in text
    rows[2] = ToolRow("redis-benchmark", 1, Measurement(8500.0), usage)
    ours = next(
        line
        for line in table.render("Redis", [], rows).splitlines()
        if line.startswith("brokerbench")
    )
    assert ours.split()[-2] == "0.235"  # 2000 ÷ 8500: compared with the row, not the reference


def test_brokerbench_cpu_per_message_leaves_out_the_first_and_last_sending_seconds(
    tmp_path: Path,
) -> None:
    """The first sending second holds the workers' start-up, the last their stop: CPU per
    message is taken over the whole seconds between, divided by the messages the run's own
    records count in them."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    seconds = tmp_path / "raw" / "seconds"
    seconds.mkdir(parents=True)
    rows = [  # (second, sent, received): two workers' rows in second 102
        (100, 0, 0),
        (101, 50, 10),
        (102, 400, 390),
        (102, 600, 600),
        (103, 1000, 1000),
        (104, 200, 250),
        (105, 0, 30),
    ]
    pq.write_table(
        pa.table({k: [r[i] for r in rows] for i, k in enumerate(("second", "sent", "received"))}),
        seconds / "part.parquet",
    )
    period = brokerbench_tool.sending_period(tmp_path)
    assert period == brokerbench_tool.SendingSeconds(102.0, 104.0, 2000, 1990)
    usage = CpuUsage(0.5, 1.0, 2.0, sender_seconds=0.2, sent_in_scope=period.sent)
    row = ToolRow("brokerbench", 4, Measurement(send_per_s=9e9), usage)
    assert row.send_us == pytest.approx(0.2 / 2000 * 1e6)  # the count, not rate × period
    # Fewer than three sending seconds: all of them.
    pq.write_table(
        pa.table({"second": [7, 8], "sent": [5, 6], "received": [5, 6]}), seconds / "part.parquet"
    )
    assert brokerbench_tool.sending_period(tmp_path) == brokerbench_tool.SendingSeconds(
        7.0, 9.0, 11, 11
    )


# -- the results file and docs/peers.md's table -----------------------------------------

BENCHMARKS = Path(__file__).resolve().parent / "benchmarks"


@pytest.fixture
def bench_peers(monkeypatch: pytest.MonkeyPatch) -> Any:
    """``bench_peers.py`` as its script sees itself (``peers`` and ``peers_doc`` at the top)."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    return importlib.import_module("bench_peers")


def _entry(system: str, label: str, ours: float, theirs: float, **peer: Any) -> dict[str, Any]:
    def row(tool: str, send: float, us: tuple[float | None, ...], **extra: Any) -> dict:
        s, r, c = us
        return {
            "tool": tool,
            "send_msgs_per_s": send,
            "send_us_per_msg": s,
            "receive_us_per_msg": r,
            "client_us_per_msg": c,
            "other_cpu_pct": 2.4,
            "receives": True,
            "source": "measured by this run",
            **extra,
        }

    return {
        "system": system,
        "label": label,
        "date": "2026-12-01",
        "commit": "abc1234",
        "dirty": False,
        "settings": ["20 s per tool"],
        "notes": ["a note"],
        "rows": [
            row("brokerbench", ours / 2, (9.0, 9.0, 9.0)),  # a slower run: not shown
            row(
                "brokerbench",
                ours,
                (1.0, 2.0, 3.0),
                remark="everything received",
                receive_msgs_per_s=ours,
            ),
            row("peer-tool", theirs, (0.5, None, 1.5), **peer),
            row("peer-tool", theirs / 4, (0.1, 0.1, 0.1), reference=True),
        ],
    }


def test_the_table_shows_each_systems_fastest_run_of_both_tools_and_their_ratios() -> None:
    results = {"format": 1, "notes": ["Said under the table."], "systems": []}
    results["systems"] = [
        _entry("redis", "Redis", 1000.0, 4000.0, receives=False, shown_as="`tool -P 8`"),
        _entry("kafka", "Kafka", 300.0, 200.0, cpu_over="whole run", receive_msgs_per_s=150.0),
    ]
    text = peers_doc.render(results)
    assert text.splitlines()[:6] == [
        "| system | tool | send msgs/s | receive msgs/s | µs per message sent / received / all "
        "client CPU | other CPU |",
        "|---|---|---|---|---|---|",
        "| Redis | brokerbench (everything received) | 1,000 | 1,000 | 1.00 / 2.00 / 3.00 | 2 % |",
        "| | `tool -P 8` | 4,000 | – | 0.50 / – / 1.50 | 2 % |",
        "| Kafka | brokerbench (everything received) | 300 | 300 | 1.00 / 2.00 / 3.00 | 2 % |",
        "| | peer-tool | 200 | 150 | 0.50 / – / 1.50 (whole run) | 2 % |",
    ]
    # The peer only sends: the sending side is compared (1.0 ÷ 0.5); else all client CPU;
    # whether the receivers kept up, the peer's beside ours where the peer receives.
    assert "| Redis | 0.250 | 2.00× (the sending side's: the peer only sends) | kept up |" in text
    assert (
        "| Kafka | 1.500 | 2.00× (all client CPU) | kept up (the peer's: behind: 75% of the "
        "send rate) |" in text
    )
    assert "\n\nSaid under the table.\n\n" in text
    assert (
        "**Kafka** — run at commit `abc1234` on 2026-12-01 (UTC); its rows measured by this run."
        in text
    )
    assert "- 20 s per tool\n- a note" in text


def test_a_system_measured_again_replaces_its_entry_and_the_page_keeps_its_prose() -> None:
    old = {"format": 1, "notes": ["kept"], "systems": [_entry("kafka", "Kafka", 1.0, 1.0)]}
    old["systems"].append(_entry("redis", "Redis", 1.0, 1.0))
    merged = peers_doc.merge(old, [_entry("redis", "Redis", 5.0, 1.0), _entry("nats", "N", 1, 1)])
    assert [e["system"] for e in merged["systems"]] == ["kafka", "redis", "nats"]
    assert merged["systems"][1]["rows"][1]["send_msgs_per_s"] == 5.0
    assert merged["notes"] == ["kept"] and old["systems"][1]["rows"][1]["send_msgs_per_s"] == 1.0

    page = f"# Peers\n\nprose\n\n{peers_doc.BEGIN}\nstale\n{peers_doc.END}\n\nmore prose\n"
    updated = peers_doc.update_page(page, merged)
    assert updated.startswith("# Peers\n\nprose\n\n") and updated.endswith("\n\nmore prose\n")
    assert peers_doc.MARKERS.part(updated) == peers_doc.render(merged)
    with pytest.raises(ValueError, match="markers"):
        peers_doc.update_page("# Peers\n", merged)


def test_results_file_rows_hold_what_the_table_prints(bench_peers: Any) -> None:
    usage = CpuUsage(1.0, 2.0, 4.0, sender_seconds=0.25, receiver_seconds=0.75)
    rows = [
        ToolRow(table.BROKERBENCH, 1, Measurement(1000.0, 990.0, 0.5, 2.0, ("n1",)), usage),
        ToolRow("PerfTest", 1, Measurement(4000.0, 3900.0, 1.0, 5.0), CpuUsage(2.0, 2.0, 4.0)),
        ToolRow("PerfTest", 4, error="PerfTest printed no summary"),
    ]
    run = bench_peers.SystemRun("rabbitmq", "RabbitMQ", "title", ["s"], rows, "2026-12-01")
    entry = bench_peers.system_entry(run, "abc1234", True, "bench_peers.py --systems rabbitmq")
    assert (entry["commit"], entry["dirty"], entry["date"]) == ("abc1234", True, "2026-12-01")
    assert entry["notes"] == ["n1", "PerfTest printed no summary"]
    ours, theirs, failed = entry["rows"]
    assert ours["send_msgs_per_s"] == 1000.0 and ours["client_cpu_pct"] == 25.0
    assert (ours["send_us_per_msg"], ours["client_us_per_msg"]) == (62.5, 250.0)
    assert (ours["send_ratio"], ours["cpu_ratio"]) == ("0.250", "2.000")
    assert theirs["send_ratio"] is None and theirs["receives"] is True
    assert failed["send_msgs_per_s"] is None and failed["error"].startswith("PerfTest printed")
    assert all(row["source"] == bench_peers.MEASURED for row in entry["rows"])
    json.dumps(entry)  # the file takes it as it is


def test_write_results_updates_the_docs_only_when_asked(
    bench_peers: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    doc_results, page = tmp_path / "peers-results.json", tmp_path / "peers.md"
    peers_doc.write(
        {"format": 1, "notes": [], "systems": [_entry("redis", "R", 1, 1)]}, doc_results
    )
    page.write_text(f"# P\n\n{peers_doc.BEGIN}\n{peers_doc.END}\n")
    monkeypatch.setattr(bench_peers.peers_doc, "RESULTS", doc_results)
    monkeypatch.setattr(bench_peers.peers_doc, "PAGE", page)
    monkeypatch.setattr(bench_peers, "RESULTS_DIR", tmp_path / "runs")
    usage = CpuUsage(1.0, 1.0, 1.0)
    measured = [
        ToolRow(table.BROKERBENCH, 1, Measurement(100.0, 100.0), usage),
        ToolRow("redis-benchmark", None, Measurement(400.0), usage),
    ]
    runs = [
        bench_peers.SystemRun("redis", "Redis Streams", "t", [], measured, "2026-12-02"),
        bench_peers.SystemRun("nats", "NATS", "t", [], [ToolRow("brokerbench", 1, error="x")], "d"),
    ]
    args = bench_peers.parse_args(["--systems", "redis,nats"])
    bench_peers.write_results(runs, args, ["--systems", "redis,nats"])
    (written,) = (tmp_path / "runs").glob("*.json")
    run_file = json.loads(written.read_text())
    assert [e["system"] for e in run_file["systems"]] == ["redis", "nats"]
    assert (
        run_file["systems"][0]["command"] == "tests/benchmarks/bench_peers.py --systems redis,nats"
    )
    assert peers_doc.load(doc_results)["systems"][0]["label"] == "R"  # not asked: unchanged

    args = bench_peers.parse_args(["--write-results", "--results-file", str(tmp_path / "r.json")])
    bench_peers.write_results(runs, args, [])
    docs = peers_doc.load(doc_results)
    # Redis replaced; NATS, without figures of both tools, not written to the docs.
    assert [(e["system"], e["label"]) for e in docs["systems"]] == [("redis", "Redis Streams")]
    assert peers_doc.MARKERS.part(page.read_text()) == peers_doc.render(docs)
    assert "| Redis Streams | brokerbench | 100 |" in page.read_text()


def test_write_results_wants_a_full_run(bench_peers: Any) -> None:
    with pytest.raises(SystemExit):
        bench_peers.parse_args(["--quick", "--write-results"])
