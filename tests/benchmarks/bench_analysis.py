"""Benchmark (not a test): the analysis job on a synthetic run of many messages.

Generates one run directory in the real raw format (``workload.model.results``: per-second
counters and histograms per worker, confirmed sequence ranges, one identity row per received
message) with pyarrow, then times ``analysis.job.analyse`` in local mode and prints messages
analysed per second (overall and per core) and peak memory of the Spark JVM and of Python.

    python tests/benchmarks/bench_analysis.py                 # 100 million messages
    python tests/benchmarks/bench_analysis.py --messages 2e6  # a quick run

The target is ≥ 1 million messages analysed per second per core, with memory that does not
grow with the message count (compare the peak figures of two sizes).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import sys
import tempfile
import time
from array import array
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.buckets import bucket_of
from workload.model.layout import LAYOUT
from workload.model.results import (
    RECEIVED_SCHEMA,
    SECONDS_SCHEMA,
    SENT_RANGES_SCHEMA,
    raw_dir,
)

RUN_ID = "bench-analysis"
#: Latency shape of every second: (microseconds, share of that second's messages).
SEND_SHAPE = ((800, 0.5), (1_500, 0.3), (4_000, 0.15), (20_000, 0.05))
PROC_SHAPE = ((2_000, 0.4), (5_000, 0.4), (15_000, 0.15), (80_000, 0.05))
CHUNK = 4_000_000
#: Bytes of every message (what the byte counters and the size column hold).
MESSAGE_SIZE = 100


def histogram(count: int, shape: tuple[tuple[int, float], ...]) -> list[tuple[int, int]]:
    counts = [int(count * share) for _, share in shape]
    counts[0] += count - sum(counts)
    return [(bucket_of(us), n) for (us, _), n in zip(shape, counts, strict=True) if n]


def context(senders: int, threads: int, receivers: int, seconds: int) -> dict[str, object]:
    load = {
        "threads": threads,
        "sender_nodes": senders,
        "receiver_nodes": receivers,
        "message_size": 100,
    }
    return {
        "run_id": RUN_ID,
        "scenario": {
            "name": "bench-analysis",
            "measurement": {"warmup": 0.0, "window": 10.0, "step": 1.0},
        },
        "points": [{"point": 0, "label": "synthetic", "load": load}],
        "broker": {"system": "synthetic", "title": "Synthetic", "caveats": []},
        "status": "complete",
        "duration_s": seconds,
    }


#: Every tenth of a second active (the raw ``active_tenths`` of a busy second).
ACTIVE = (1 << 10) - 1


def generate(run_dir: Path, messages: int, senders: int, threads: int, receivers: int) -> int:
    """Write the raw tables; return the number of messages sent (and received)."""
    workers = senders * threads
    per_worker = messages // workers
    seconds = max(10, min(300, per_worker // 10_000))
    per_second = -(-per_worker // seconds)
    (run_dir / "context.json").write_text(json.dumps(context(senders, threads, receivers, seconds)))
    # Sender side: per worker, per second counters and send-latency histograms.
    for node in range(senders):
        rows: dict[str, list[object]] = {name: [] for name in SECONDS_SCHEMA.names}
        ranges: dict[str, list[object]] = {name: [] for name in SENT_RANGES_SCHEMA.names}
        for worker in range(threads):
            for s in range(seconds):
                n = max(0, min(per_second, per_worker - s * per_second))
                values = (RUN_ID, 0, "sender", node, worker, s, n, 0, 0, 0, 0, 0)
                for name, value in zip(SECONDS_SCHEMA.names, values, strict=False):
                    rows[name].append(value)
                rows["active_tenths"].append(ACTIVE if n else 0)
                rows["send_latency"].append(histogram(n, SEND_SHAPE))
                rows["processing_latency"].append([])
                rows["send_delay"].append([])
                for column, nbytes in (
                    ("sent_bytes", n),
                    ("received_bytes", 0),
                    ("acked_bytes", 0),
                ):
                    rows[column].append(MESSAGE_SIZE * nbytes)
            for name, value in zip(
                SENT_RANGES_SCHEMA.names,
                (RUN_ID, 0, node, worker, 0, per_worker - 1, 0),
                strict=True,
            ):
                ranges[name].append(value)
        name = LAYOUT.part_name(0, "sender", node)
        _write(raw_dir(run_dir, "seconds"), name, pa.table(rows, schema=SECONDS_SCHEMA))
        _write(raw_dir(run_dir, "sent_ranges"), name, pa.table(ranges, schema=SENT_RANGES_SCHEMA))
    # Receiver side: sender worker w is read by receiver node w % receivers; one identity
    # row per message, and per second counters and processing-latency histograms.
    for node in range(receivers):
        mine = [
            (s, w)
            for s in range(senders)
            for w in range(threads)
            if (s * threads + w) % receivers == node
        ]
        rows = {name: [] for name in SECONDS_SCHEMA.names}
        received_per_second = [0] * (seconds + 1)
        directory = raw_dir(run_dir, "received")
        directory.mkdir(parents=True, exist_ok=True)
        with pq.ParquetWriter(
            directory / f"{LAYOUT.part_name(0, 'receiver', node)}.parquet",
            RECEIVED_SCHEMA,
            compression="zstd",
        ) as writer:
            for sender_node, sender_worker in mine:
                for lo in range(0, per_worker, CHUNK):
                    hi = min(per_worker, lo + CHUNK)
                    seq = array("q", range(lo, hi))
                    second = seconds_column(lo, hi, per_second)
                    n = hi - lo
                    writer.write_table(
                        pa.table(
                            {
                                "run_id": pa.repeat(pa.scalar(RUN_ID), n),
                                "point": pa.repeat(pa.scalar(0, pa.int32()), n),
                                "sender_node": pa.repeat(pa.scalar(sender_node, pa.int32()), n),
                                "sender_worker": pa.repeat(pa.scalar(sender_worker, pa.int32()), n),
                                "seq": _view(seq),
                                "receiver_node": pa.repeat(pa.scalar(node, pa.int32()), n),
                                "second": _view(second),
                                "late": pa.nulls(n, pa.bool_()),  # keyless: no order check
                                "size": pa.repeat(pa.scalar(MESSAGE_SIZE, pa.int32()), n),
                            },
                            schema=RECEIVED_SCHEMA,
                        ),
                        row_group_size=1 << 20,
                    )
            for s in range(seconds + 1):
                n = sum(
                    max(0, min(per_second, per_worker - (s - 1) * per_second)) if s else 0
                    for _ in mine
                )
                received_per_second[s] = n
                values = (RUN_ID, 0, "receiver", node, 0, s, 0, n, n, 0, 0, 0)
                for name, value in zip(SECONDS_SCHEMA.names, values, strict=False):
                    rows[name].append(value)
                rows["active_tenths"].append(ACTIVE if n else 0)
                rows["send_latency"].append([])
                rows["processing_latency"].append(histogram(n, PROC_SHAPE))
                rows["send_delay"].append([])
                for column, nbytes in (
                    ("sent_bytes", 0),
                    ("received_bytes", n),
                    ("acked_bytes", n),
                ):
                    rows[column].append(MESSAGE_SIZE * nbytes)
        _write(
            raw_dir(run_dir, "seconds"),
            LAYOUT.part_name(0, "receiver", node),
            pa.table(rows, schema=SECONDS_SCHEMA),
        )
    return per_worker * workers


def seconds_column(lo: int, hi: int, per_second: int) -> array[int]:
    """The receive second of sequence numbers lo..hi-1 (one second per ``per_second``)."""
    out = array("q")
    q = lo
    while q < hi:
        second = q // per_second
        end = min(hi, (second + 1) * per_second)
        out.extend(array("q", [second + 1]) * (end - q))
        q = end
    return out


def _view(values: array[int]) -> pa.Array:
    return pa.Array.from_buffers(pa.int64(), len(values), [None, pa.py_buffer(values)])


def _write(directory: Path, name: str, table: pa.Table) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    pq.write_table(table, directory / f"{name}.parquet", compression="zstd")


def jvm_peak_rss_mb(spark: object) -> float | None:
    """Peak resident memory of the Spark driver JVM (VmHWM), in MiB."""
    try:
        pid = spark._jvm.java.lang.ProcessHandle.current().pid()  # type: ignore[attr-defined]
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except Exception:  # a figure we cannot read is just not printed
        return None
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=float, default=100e6, help="default 1e8")
    parser.add_argument("--senders", type=int, default=4, help="sender nodes (default 4)")
    parser.add_argument("--threads", type=int, default=5, help="threads per sender node")
    parser.add_argument("--receivers", type=int, default=4, help="receiver nodes (default 4)")
    parser.add_argument("--cores", type=int, default=os.cpu_count() or 2)
    parser.add_argument(
        "--keep",
        type=Path,
        help="generate into this directory and keep it; a later call with the same sizes "
        "reuses what it finds there",
    )
    args = parser.parse_args(argv)

    from analysis.job import analyse
    from analysis.session import spark_session

    base = args.keep or Path(tempfile.mkdtemp(prefix="bench-analysis-"))
    run_dir = base / RUN_ID
    sizes = [int(args.messages), args.senders, args.threads, args.receivers]
    marker = base / "generated.json"
    try:
        if marker.exists() and json.loads(marker.read_text())["sizes"] == sizes:
            messages = json.loads(marker.read_text())["messages"]
            print(f"reusing {messages:,} messages in {run_dir}")
            shutil.rmtree(run_dir / "analysis", ignore_errors=True)
        else:
            marker.unlink(missing_ok=True)
            shutil.rmtree(run_dir, ignore_errors=True)
            run_dir.mkdir(parents=True)
            started = time.perf_counter()
            messages = generate(run_dir, *sizes)
            marker.write_text(json.dumps({"sizes": sizes, "messages": messages}))
            print(f"generated {messages:,} messages in {time.perf_counter() - started:,.1f} s")
        size = sum(p.stat().st_size for p in (run_dir / "raw").rglob("*.parquet"))
        print(f"  {size / 2**20:,.0f} MiB of Parquet in {run_dir}")
        spark = spark_session("brokerbench-bench-analysis", cores=args.cores)
        try:
            started = time.perf_counter()
            (row,) = analyse(spark, run_dir)
            elapsed = time.perf_counter() - started
            jvm_peak = jvm_peak_rss_mb(spark)
        finally:
            spark.stop()
        if (row["received"], row["lost"], row["duplicated"]) != (messages, 0, 0):
            print(f"unexpected result: {row}", file=sys.stderr)
            return 1
        rate = messages / elapsed
        python_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
        print(f"analysed {messages:,} messages in {elapsed:,.1f} s on {args.cores} core(s)")
        print(f"  load average at the end: {load}")
        print(f"  {rate:,.0f} messages/s, {rate / args.cores:,.0f} messages/s per core")
        print(
            f"  peak memory: Spark driver JVM {jvm_peak or float('nan'):,.0f} MiB "
            f"(heap limit {os.environ.get('BROKERBENCH_SPARK_MEMORY', '2g')}), "
            f"Python {python_peak:,.0f} MiB"
        )
    finally:
        if args.keep is None:
            shutil.rmtree(base, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
