"""Benchmark (not a test): the cost of recording one latency sample, and of one
send + receive + ack round trip of the runner's own loops against an in-memory adapter.

Prints figures (best of three); the targets are ≤ 2 µs per recorded sample and ≤ 2 µs of
the harness's own work per message.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Sequence

from brokers.base import Adapter, Received, ReceivedBatch
from workload.engine import message
from workload.engine.histogram import Histogram
from workload.engine.recording import WorkerRecorder
from workload.engine.worker import ReceiverLoop, SenderLoop, WorkerSettings
from workload.model.sections import LoadSection


class MemoryAdapter(Adapter[int]):
    """A FIFO in this process: measures the runner, not a broker."""

    def __init__(self) -> None:
        self.queue: collections.deque[bytes] = collections.deque()
        self.next_id = 0

    def send(self, batch: Sequence[bytes]) -> None:
        self.queue.extend(batch)

    def receive(self, max_n: int) -> list[Received[int]]:
        out = []
        while self.queue and len(out) < max_n:
            self.next_id += 1
            out.append(Received(self.queue.popleft(), self.next_id))
        return out

    def ack(self, receipts: Sequence[int]) -> None:
        pass


def bench_record(samples: int = 2_000_000) -> float:
    h = Histogram()
    values = [float(1 + (i * 7919) % 5_000_000) for i in range(1000)]
    start = time.perf_counter()
    for i in range(samples):
        h.record(values[i % 1000])
    return (time.perf_counter() - start) / samples * 1e6


def bench_round_trip(messages: int = 200_000) -> float:
    load = LoadSection(max_send_batch=10, receive_batch=10, duration=3600, messages=messages)
    pool = message.payload_pool(load, seed=0)  # as a sender node builds it
    settings = WorkerSettings("bench0000.0", 0, 0, load, pool, lambda: False)
    adapter = MemoryAdapter()
    sender = SenderLoop(settings, WorkerRecorder("sender", 0, 0))
    receiver = ReceiverLoop(settings, WorkerRecorder("receiver", 0, 0))
    start = time.perf_counter()
    while not sender.finished():
        batch = sender.next_batch()
        adapter.send(batch.messages)
        sender.sent(batch)
        receipts = receiver.handle(adapter.receive_batch(load.receive_batch))
        adapter.ack(receipts)
        receiver.acked(receipts)
    elapsed = time.perf_counter() - start
    assert receiver.recorder.total_received == messages
    return elapsed / messages * 1e6


def bench_adapter_alone(messages: int = 200_000) -> float:
    """The in-memory adapter's own cost per message (the same batches, no runner)."""
    adapter = MemoryAdapter()
    batch = [b"x" * 100] * 10
    sizes = [1 + i % 10 for i in range(messages // 5)]
    start = time.perf_counter()
    done = 0
    for size in sizes:
        adapter.send(batch[:size])
        adapter.ack(adapter.receive_batch(10).receipts)
        done += size
        if done >= messages:
            break
    return (time.perf_counter() - start) / done * 1e6


def bench_send_path(max_send_batch: int, as_bytes: bool, messages: int = 300_000) -> float:
    """The sender loop's own work per message: choosing, stamping and accounting batches
    (no client call); ``as_bytes``: with the messages made bytes objects, as every client
    but Redis's takes them (a large batch of one size is stamped as one array, which the
    Redis adapter packs from as it is)."""
    load = LoadSection(max_send_batch=max_send_batch, duration=3600, messages=messages)
    pool = message.payload_pool(load, seed=0)  # as a sender node builds it
    settings = WorkerSettings("bench0000.0", 0, 0, load, pool, lambda: False)
    sender = SenderLoop(settings, WorkerRecorder("sender", 0, 0))
    start = time.perf_counter()
    while not sender.finished():
        batch = sender.next_batch()
        if as_bytes:
            list(batch.messages)
        sender.sent(batch)
    return (time.perf_counter() - start) / messages * 1e6


def bench_receive_path(receive_batch: int, messages: int = 300_000) -> float:
    """The receiver loop's own work per message: reading identities, recording latencies
    and identities, counting acknowledgements — on batches of ``receive_batch`` bodies a
    client handed out (prepared beforehand: no client cost)."""
    load = LoadSection(max_send_batch=100, duration=3600, messages=messages)
    pool = message.payload_pool(load, seed=0)  # as a sender node builds it
    settings = WorkerSettings("bench0000.0", 0, 0, load, pool, lambda: False)
    sender = SenderLoop(settings, WorkerRecorder("sender", 0, 0))
    bodies: list[bytes] = []
    while not sender.finished():
        bodies += sender.next_batch().messages
    batches = [
        ReceivedBatch(bodies[i : i + receive_batch], range(i, i + receive_batch))
        for i in range(0, len(bodies), receive_batch)
    ]
    receiver = ReceiverLoop(settings, WorkerRecorder("receiver", 0, 0))
    start = time.perf_counter()
    for batch in batches:
        receiver.acked(receiver.handle(batch))
    elapsed = time.perf_counter() - start
    assert receiver.recorder.total_received == len(bodies)
    return elapsed / len(bodies) * 1e6


if __name__ == "__main__":
    per_sample = bench_record()
    print(f"recording one latency sample: {per_sample:.3f} µs (target ≤ 2 µs)")
    per_message = min(bench_round_trip() for _ in range(3))
    adapter_only = min(bench_adapter_alone() for _ in range(3))
    print(
        f"runner send+receive+ack per message (in-memory adapter, batches of 1-10): "
        f"{per_message:.2f} µs → {1e6 / per_message:,.0f} msgs/s per worker"
    )
    print(
        f"  of which the in-memory adapter itself: {adapter_only:.2f} µs; the harness "
        f"(stamping, reading identities, recording): {per_message - adapter_only:.2f} µs "
        "(target ≤ 2 µs)"
    )
    print("the harness's own work per message, by path and batch size (best of three):")
    for size in (10, 100, 800):
        cost = min(bench_send_path(size, True) for _ in range(3))
        rows = min(bench_send_path(size, False) for _ in range(3))
        print(
            f"  send path, send batches uniform in [1, {size}]: {cost:.3f} µs "
            f"({rows:.3f} µs where the client takes a large batch as one array: Redis)"
        )
    for size in (10, 100, 500):
        cost = min(bench_receive_path(size) for _ in range(3))
        target = " (target ≤ 0.5 µs)" if size == 500 else ""
        print(f"  receive path, receive batches of {size}: {cost:.3f} µs{target}")
