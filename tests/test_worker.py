"""Worker loops against in-memory adapters: batches in flight, failures, accounting,
durations that a step of the wall clock does not distort; a node's clock in its status."""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from brokers import registry
from brokers.base import (
    Adapter,
    AsyncAdapter,
    Confirmation,
    Confirmed,
    Received,
)
from tests.support import memory_system, node_spec
from workload.engine import message
from workload.engine.client_loops import CannotPipeline, run_sender, run_sender_async
from workload.engine.clock import ClockState
from workload.engine.histogram import Histogram, percentile_of
from workload.engine.node import run_node_processes, split
from workload.engine.recording import WorkerRecorder
from workload.engine.worker import ReceiverLoop, SenderLoop, WorkerSettings
from workload.model.buckets import ALPHA, NEGATIVE
from workload.model.results import read_statuses
from workload.model.sections import LoadSection


class Later(Confirmation):
    """Confirmed on the ``ready``-th wait; fails instead when ``error`` is set."""

    def __init__(self, adapter: PipelinedMemory, batch: list[bytes], error: bool) -> None:
        self.adapter, self.batch, self.error, self.waits = adapter, batch, error, 0

    def wait(self, timeout: float) -> int | None:
        self.waits += 1
        if self.waits < 2:
            return None
        if self.error:
            raise RuntimeError("refused")
        self.adapter.stored.extend(self.batch)
        return time.time_ns()


class PipelinedMemory(Adapter[int]):
    pipelined = True

    def __init__(self, fail_every: int = 0) -> None:
        self.stored: list[bytes] = []
        self.submitted = 0
        self.fail_every = fail_every
        self.pending: list[Later] = []
        self.most_pending = 0

    def submit(self, batch: Sequence[bytes]) -> Confirmation:
        self.submitted += 1
        failing = bool(self.fail_every) and self.submitted % self.fail_every == 0
        later = Later(self, list(batch), failing)
        self.pending = [p for p in self.pending if p.waits < 2] + [later]
        self.most_pending = max(self.most_pending, len(self.pending))
        return later

    def send(self, batch: Sequence[bytes]) -> None:
        raise AssertionError("a pipelined worker submits")

    def receive(self, max_n: int) -> list[Received[int]]:
        return []

    def ack(self, receipts: Sequence[int]) -> None:
        pass


def _loop(max_in_flight: int, messages: int) -> SenderLoop:
    load = LoadSection(
        max_in_flight=max_in_flight, messages=messages, duration=60, failure_timeout=60
    )
    pool = message.message_pool(10, 100, seed=0)
    settings = WorkerSettings("t0000000.0", 0, 0, load, pool, lambda: False)
    return SenderLoop(settings, WorkerRecorder("sender", 0, 0))


def _confirmed(loop: SenderLoop) -> set[int]:
    return {s for lo, hi in loop.recorder.sent_ranges for s in range(lo, hi + 1)}


def test_pipelined_sender_keeps_batches_in_flight_and_counts_only_confirmed() -> None:
    adapter = PipelinedMemory(fail_every=5)
    loop = _loop(max_in_flight=4, messages=500)
    run_sender(adapter, loop)
    assert adapter.most_pending == 4
    stored = {message.parse(b).seq for b in adapter.stored}  # type: ignore[union-attr]
    assert _confirmed(loop) == stored
    assert loop.recorder.total_sent == len(stored) < 500
    assert loop.recorder.total_errors == adapter.submitted // 5


class OneAtATime(PipelinedMemory):
    pipelined = False


def test_a_client_that_cannot_pipeline_refuses_batches_in_flight() -> None:
    with pytest.raises(CannotPipeline, match="max_in_flight = 4"):
        run_sender(OneAtATime(), _loop(max_in_flight=4, messages=10))


class AsyncMemory(AsyncAdapter[int]):
    def __init__(self) -> None:
        self.stored: list[bytes] = []
        self.concurrent = 0
        self.most = 0
        self.calls = 0

    async def send(self, batch: Sequence[bytes]) -> None:
        self.calls += 1
        call = self.calls
        self.concurrent += 1
        self.most = max(self.most, self.concurrent)
        await asyncio.sleep(0.001)
        self.concurrent -= 1
        if call % 7 == 0:
            raise RuntimeError("refused")
        self.stored.extend(batch)

    async def receive(self, max_n: int) -> list[Received[int]]:
        return []

    async def ack(self, receipts: Sequence[int]) -> None:
        pass


@pytest.mark.parametrize("in_flight", [1, 8])
def test_async_sender_awaits_up_to_max_in_flight_sends(in_flight: int) -> None:
    adapter = AsyncMemory()
    loop = _loop(max_in_flight=in_flight, messages=400)
    asyncio.run(run_sender_async(adapter, loop))
    assert adapter.most == in_flight
    stored = {message.parse(b).seq for b in adapter.stored}  # type: ignore[union-attr]
    assert _confirmed(loop) == stored
    assert loop.recorder.total_errors == adapter.calls // 7


def test_threads_or_tasks_and_batches_in_flight_follow_the_adapter_classes() -> None:
    blocking = memory_system(PipelinedMemory())
    assert not blocking.asyncio and blocking.can_pipeline
    assert not memory_system(OneAtATime()).can_pipeline
    # Where connect chooses between classes, one that keeps batches in flight suffices.
    assert replace(blocking, adapters=(OneAtATime, PipelinedMemory)).can_pipeline
    asynchronous = memory_system(AsyncMemory())
    assert asynchronous.asyncio and asynchronous.can_pipeline


def test_a_node_runs_the_workers_of_an_asyncio_system_as_tasks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    adapter = AsyncMemory()
    system = memory_system(adapter)
    monkeypatch.setattr(registry, "get", lambda name: system)
    spec = node_spec(
        tmp_path, LoadSection(threads=2, processes=1, max_in_flight=4, messages=50, duration=60)
    )
    (status,) = run_node_processes(spec, threading.Event())
    assert adapter.most > 1  # the two workers' sends overlapped
    assert status.sent == len(adapter.stored) > 0 and status.errors == adapter.calls // 7


@pytest.mark.parametrize(
    ("threads", "processes", "cpus", "shares"),
    [
        (1, None, 8, [range(0, 1)]),
        (4, None, 2, [range(0, 2), range(2, 4)]),
        (5, None, 2, [range(0, 2), range(2, 5)]),
        (3, 8, 2, [range(0, 1), range(1, 2), range(2, 3)]),
        (4, 1, 2, [range(0, 4)]),
    ],
)
def test_a_node_spreads_its_workers_over_processes(
    tmp_path: Path, threads: int, processes: int | None, cpus: int, shares: list[range]
) -> None:
    spec = node_spec(tmp_path, LoadSection(threads=threads, processes=processes), system="redis")
    parts = split(spec, cpus=cpus)
    assert [p.worker_ids for p in parts] == shares
    assert [p.part for p in parts] == list(range(len(shares)))


class Memory(Adapter[int]):
    """Stores what it is sent; each send (or submit, confirmed at once) takes ``SEND_S``."""

    pipelined = True
    SEND_S = 0.002

    def __init__(self) -> None:
        self.calls = 0
        self.stored: list[bytes] = []

    def send(self, batch: Sequence[bytes]) -> None:
        self.calls += 1
        time.sleep(self.SEND_S)
        self.stored.extend(batch)

    def submit(self, batch: Sequence[bytes]) -> Confirmation:
        self.send(batch)
        return Confirmed(time.time_ns())

    def receive(self, max_n: int) -> list[Received[int]]:
        return []

    def ack(self, receipts: Sequence[int]) -> None:
        pass


class SteppingClock(Memory):
    """During the third send, the wall clock (``time.time_ns``) is stepped by ``step_s``."""

    def __init__(self, step_s: float, monkeypatch: pytest.MonkeyPatch) -> None:
        super().__init__()
        self.step_ns = int(step_s * 1e9)
        self.stepped = 0
        real = time.time_ns
        monkeypatch.setattr(time, "time_ns", lambda: real() + self.stepped)

    def send(self, batch: Sequence[bytes]) -> None:
        if self.calls == 2:
            time.sleep(self.SEND_S / 2)
            self.stepped = self.step_ns
            time.sleep(self.SEND_S / 2)
            self.calls += 1
            self.stored.extend(batch)
            return
        super().send(batch)


@pytest.mark.parametrize("step_s", [-3600.0, 3600.0])
@pytest.mark.parametrize("in_flight", [1, 2])
def test_send_latency_survives_a_step_of_the_wall_clock(
    monkeypatch: pytest.MonkeyPatch, step_s: float, in_flight: int
) -> None:
    adapter = SteppingClock(step_s, monkeypatch)
    loop = _loop(max_in_flight=in_flight, messages=60)
    run_sender(adapter, loop)
    assert adapter.calls >= 6 and adapter.stepped
    latency = _histogram(loop, "send_latency")
    assert sum(latency.counts.values()) == adapter.calls and NEGATIVE not in latency.counts
    # Every send took SEND_S (and a little more): none reads -1 h, 0 or +1 h.
    assert (percentile_of(latency.counts.items(), 0.0) or 0) >= Memory.SEND_S * 1e6 * (1 - ALPHA)
    assert (percentile_of(latency.counts.items(), 1.0) or 0) < 1e6


def test_a_node_on_a_machine_of_its_own_records_its_clock_in_its_status(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    memory = Memory()
    system = memory_system(memory)
    monkeypatch.setattr(registry, "get", lambda name: system)
    clock = ClockState(-0.000021503, "chrony: 169.254.169.123 (stratum 4)")
    monkeypatch.setattr("workload.engine.node.read_clock", lambda: clock)
    spec = node_spec(tmp_path, LoadSection(threads=1, messages=20, duration=60))
    (status,) = run_node_processes(spec, threading.Event())
    assert status.ok and status.sent == 20
    assert (status.clock_offset_s, status.clock_source) == (clock.offset_s, clock.source)
    assert read_statuses(tmp_path) == [status]


class Instant(Memory):
    """Confirms every send at once."""

    SEND_S = 0.0


def _open_loop(rate: float, messages: int) -> SenderLoop:
    load = LoadSection(rate=rate, messages=messages, duration=60, failure_timeout=60)
    pool = message.message_pool(10, 100, seed=0)
    settings = WorkerSettings("t0000000.0", 0, 0, load, pool, lambda: False)
    return SenderLoop(settings, WorkerRecorder("sender", 0, 0))


def _histogram(loop: SenderLoop, metric: str) -> Histogram:
    merged: Counter[int] = Counter()
    for stats in loop.recorder.seconds.values():
        merged.update(getattr(stats, metric).counts)
    return Histogram(merged)


def test_open_loop_paces_each_message_on_its_own_slot() -> None:
    rate = 2_000.0
    adapter = Instant()
    loop = _open_loop(rate, messages=400)
    run_sender(adapter, loop)
    stamped = sorted(
        (i.seq, i.send_ns, i.intended_ns)
        for i in (message.parse(b) for b in adapter.stored)
        if i is not None
    )
    assert [seq for seq, _, _ in stamped] == list(range(400))
    assert adapter.calls < 400  # batches of several messages
    slot_ns = 1e9 / rate
    for (_, _, before), (_, _, after) in itertools.pairwise(stamped):
        # Each message's intended time is its own slot, one slot after the one before.
        assert after - before == pytest.approx(slot_ns, abs=20_000)
    # No message leaves before its slot: a batch goes when its last message is due.
    assert all(sent >= intended for _, sent, intended in stamped)


def test_send_delay_is_recorded_per_open_loop_batch_and_never_in_closed_loop() -> None:
    closed = _loop(max_in_flight=1, messages=60)
    run_sender(Instant(), closed)
    assert not _histogram(closed, "send_delay") and _histogram(closed, "send_latency")
    opened = _open_loop(10_000.0, messages=60)
    adapter = Instant()
    run_sender(adapter, opened)
    assert sum(_histogram(opened, "send_delay").counts.values()) == adapter.calls
    # A batch sent exactly on time is a sample of 0 — not left out.
    recorder = WorkerRecorder("sender", 0, 0)
    recorder.batch_sent(time.time_ns(), 1_000, 0, 0, 9, 1_000)
    recorder.batch_sent(time.time_ns(), 1_000, None, 10, 19, 1_000)
    (stats,) = recorder.seconds.values()
    assert (
        sum(stats.send_delay.counts.values()) == 1 and sum(stats.send_latency.counts.values()) == 2
    )


class FailsSecond(Instant):
    def send(self, batch: Sequence[bytes]) -> None:
        if self.calls == 1:
            self.calls += 1
            raise RuntimeError("refused")
        super().send(batch)


def test_a_failed_batch_is_abandoned_not_retried() -> None:
    adapter = FailsSecond()
    loop = _loop(max_in_flight=1, messages=60)
    run_sender(adapter, loop)
    stored = [message.parse(b).seq for b in adapter.stored]  # type: ignore[union-attr]
    assert len(stored) == len(set(stored))  # nothing sent twice
    missing = set(range(60)) - set(stored)
    assert missing and max(missing) < min(s for s in stored if s > min(missing))
    assert _confirmed(loop) == set(stored) and loop.recorder.total_errors == 1


def test_the_clocks_are_read_again_when_a_pair_was_torn_apart(monkeypatch) -> None:
    """The first pair's wall reads lie 40 µs apart (preempted between them), the second's
    1 µs: the second is taken, its wall time the middle of its two reads."""
    from workload.engine import worker

    walls = iter([1_000_000, 1_040_000, 2_000_000, 2_001_000])
    monos = iter([50, 60])
    monkeypatch.setattr(worker.time, "time_ns", lambda: next(walls))
    monkeypatch.setattr(worker.time, "monotonic_ns", lambda: next(monos))
    assert worker.clock_pair() == (2_000_500, 60)


def test_a_machine_too_busy_for_a_close_pair_gets_the_closest_of_its_tries(monkeypatch) -> None:
    from workload.engine import worker

    walls = iter([0, 30_000, 100_000, 120_000, 200_000, 240_000])
    monos = iter([1, 2, 3])
    monkeypatch.setattr(worker.time, "time_ns", lambda: next(walls))
    monkeypatch.setattr(worker.time, "monotonic_ns", lambda: next(monos))
    assert worker.clock_pair() == (110_000, 2)


def test_a_receiver_idles_out_only_idle_timeout_after_the_senders_finished() -> None:
    """Delivery may stall (a failover) while the senders go on confirming: a message
    confirmed just before the senders finish still gets the whole idle timeout to arrive,
    however long ago the receiver's last message was."""
    done = threading.Event()
    settings = WorkerSettings(
        "bb.0", 0, 0, LoadSection(idle_timeout=0.2), [], lambda: False, senders_done=done.is_set
    )
    loop = ReceiverLoop(settings, WorkerRecorder("receiver", 0, 0))
    loop.last_message -= 10  # nothing for 10 s: delivery stalled while senders went on
    assert not loop.finished()  # the senders are not done
    done.set()
    time.sleep(0.03)  # the flag is read at most every 20 ms
    assert not loop.finished()  # idle 10 s, but the senders finished only now
    time.sleep(0.25)
    assert loop.finished()
    # A message after the senders finished starts the timeout again.
    again = ReceiverLoop(settings, WorkerRecorder("receiver", 0, 0))
    assert not again.finished()
    time.sleep(0.1)
    again.last_message = time.monotonic()
    time.sleep(0.15)
    assert not again.finished()
    time.sleep(0.1)
    assert again.finished()
