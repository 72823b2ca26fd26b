"""The keyed broker tests' shared steps (test_kafka, test_nats, test_redis, test_rocketmq): a
keyed run of a scenario and an injected reordering, each counted by the analysis."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path
from typing import Any

from brokers.base import BrokerSystem, Destination, Endpoints
from brokers.batches import KeyedBatch
from tests.support import run_against
from workload.engine import message
from workload.engine.keys import KeyScheme
from workload.engine.node_records import write_node
from workload.engine.recording import WorkerRecorder
from workload.engine.worker import ReceiverLoop, WorkerSettings
from workload.model.sections import LoadSection

TAG = "i0000000.0"
#: The sequence numbers of one sender worker's messages of one key, in the order they are
#: sent: 3 after 4, so exactly one message (3) arrives late.
OUT_OF_ORDER = (0, 1, 2, 4, 3, 5)


def keyed_run(scenario: Path, endpoints: Endpoints, tmp_path: Path, keys: int) -> Path:
    """``scenario`` with ``keys`` keys and 2 s of sending against a running cluster (one
    point, not analysed): the run's directory."""
    sections = {
        "load": {"keys": keys, "duration": "2s", "idle_timeout": "2s", "threads": 2},
        "measurement": {"window": "1s", "step": "1s"},
    }
    if "[sweep]" in scenario.read_text():
        sections["sweep"] = {"threads": [2]}
    return run_against(scenario, endpoints, tmp_path, sections)


def keyed_run_in_order(
    scenario: Path, endpoints: Endpoints, tmp_path: Path, keys: int, spark: Any
) -> Path:
    """:func:`keyed_run`, checked: its context claims per-key order, something was received
    and the analysis counts no message reordered; the run's directory."""
    from workload.model.record import load_context

    run_dir = keyed_run(scenario, endpoints, tmp_path, keys)
    assert load_context(run_dir).broker.key_order
    reordered, received = reordered_and_received(run_dir, spark)
    assert received > 0 and reordered == 0
    return run_dir


def analysed(run_dir: Path, spark: Any) -> dict[str, str]:
    """The run analysed by the analysis job: its summary row (one point)."""
    from analysis.job import analyse
    from tests.conftest import read_summary

    analyse(spark, run_dir)
    (row,) = read_summary(run_dir.parent)
    return row


def reordered_and_received(run_dir: Path, spark: Any) -> tuple[int, int]:
    """The run's ``reordered`` as the analysis counts it (without the rest of the job), and
    the messages received."""
    from analysis import transforms as tf
    from analysis.raw_tables import read_table

    received = read_table(spark, run_dir, "received")
    return sum(r["reordered"] for r in tf.reordered(received).collect()), received.count()


def inject_reordering(
    system: BrokerSystem[Any],
    endpoints: Endpoints,
    params: Any,
    name: str,
    spark: Any,
    tmp_path: Path,
) -> int:
    """Send one key's brokerbench messages through the system's own client out of order
    (:data:`OUT_OF_ORDER`, one send call each), receive them as a receiver worker does,
    write its records and count them with the analysis: the points' ``reordered`` total."""
    from analysis import transforms as tf
    from analysis.raw_tables import read_table

    destination = Destination(name, keyed=True)
    system.prepare(endpoints, params, destination)
    scheme = KeyScheme(1)
    stamper = message.Stamper(TAG, 0, 0)
    pool = message.message_pool(1, 100, seed=3)
    now = time.time_ns()
    batches = [
        KeyedBatch(
            stamper.stamp_batch(pool, seq, now, now), [scheme.name(scheme.key_of(0, 0, seq))]
        )
        for seq in OUT_OF_ORDER
    ]
    recorder = WorkerRecorder("receiver", 0, 0)
    settings = WorkerSettings(TAG, 0, 0, LoadSection(keys=1), [], lambda: False, receive_batch=10)
    loop = ReceiverLoop(settings, recorder)
    if system.asyncio:
        asyncio.run(_through_async(system, endpoints, params, destination, batches, loop))
    else:
        sender = system.connect_blocking(endpoints, params, destination)
        receiver = system.connect_blocking(endpoints, params, destination)
        try:
            for batch in batches:
                sender.send(batch)
            deadline = time.monotonic() + 60
            while recorder.total_received < len(batches) and time.monotonic() < deadline:
                receipts = loop.handle(receiver.receive_batch(10))
                if receipts:
                    receiver.ack(receipts)
        finally:
            sender.close()
            receiver.close()
    assert recorder.total_received == len(batches), recorder.total_received
    write_node(tmp_path, "inject", 0, "receiver", 0, [recorder])
    counted = tf.reordered(read_table(spark, tmp_path, "received")).collect()
    return sum(r["reordered"] for r in counted)


async def _through_async(
    system: BrokerSystem[Any],
    endpoints: Endpoints,
    params: Any,
    destination: Destination,
    batches: list[KeyedBatch],
    loop: ReceiverLoop,
) -> None:
    sender = await system.connect_async(endpoints, params, destination)
    receiver = await system.connect_async(endpoints, params, destination)
    try:
        for batch in batches:
            await sender.send(batch)
        deadline = time.monotonic() + 60
        while loop.recorder.total_received < len(batches) and time.monotonic() < deadline:
            receipts = loop.handle(await receiver.receive_batch(10))
            if receipts:
                await receiver.ack(receipts)
    finally:
        await sender.close()
        await receiver.close()
