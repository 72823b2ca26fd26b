"""The start gate of a local point: senders wait until every receiver worker joined or
ended, and go anyway after the limit; without a broker (the Kafka adapters' ``joined`` is
checked against a real cluster in test_kafka.py)."""

from __future__ import annotations

import multiprocessing as mp
import threading
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from brokers import registry
from brokers.base import Adapter, Confirmation, Confirmed, Received
from tests.support import memory_system, node_spec
from workload.engine.client_loops import run_receiver
from workload.engine.node import run_node
from workload.engine.recording import WorkerRecorder
from workload.engine.start_gate import Once, StartGate
from workload.engine.worker import ReceiverLoop, WorkerSettings
from workload.model.sections import LoadSection


def _gate(receivers: int, wait_limit: float = 30.0) -> StartGate:
    return StartGate(mp.get_context("spawn").Value("i", 0), receivers, wait_limit)


class Joining(Adapter[int]):
    """Receives nothing; joins on its ``joins_at``-th receive call; sends are timed."""

    def __init__(self, joins_at: int = 3) -> None:
        self.joins_at = joins_at
        self.receives = 0
        self.first_send: float | None = None

    def send(self, batch: Sequence[bytes]) -> None:
        if self.first_send is None:
            self.first_send = time.monotonic()

    def submit(self, batch: Sequence[bytes]) -> Confirmation:
        self.send(batch)
        return Confirmed(time.time_ns())

    def receive(self, max_n: int) -> list[Received[int]]:
        self.receives += 1
        time.sleep(0.01)
        return []

    def ack(self, receipts: Sequence[int]) -> None:
        pass

    def joined(self) -> bool:
        return self.receives >= self.joins_at


def test_the_gate_opens_once_every_receiver_settled() -> None:
    gate = _gate(2)
    assert not gate.open()
    settle = Once(gate.settle)
    settle()
    settle()  # one worker settles once
    assert not gate.open()
    threading.Timer(0.2, gate.settle).start()
    began = time.monotonic()
    assert gate.wait(lambda: False)
    assert time.monotonic() - began >= 0.15 and gate.settled.value == 2


def test_a_gate_that_never_opens_lets_the_senders_go_after_the_limit_or_a_stop() -> None:
    gate = _gate(1, wait_limit=0.3)
    began = time.monotonic()
    assert not gate.wait(lambda: False)
    assert 0.3 <= time.monotonic() - began < 5
    began = time.monotonic()
    assert not _gate(1).wait(lambda: True)  # stopped: at once, not after 30 s
    assert time.monotonic() - began < 1


def test_a_receiver_settles_once_when_its_client_says_it_joined() -> None:
    gate = _gate(1)
    adapter = Joining(joins_at=3)
    seen: list[int] = []

    def settle() -> None:
        seen.append(adapter.receives)
        gate.settle()

    load = LoadSection(idle_timeout=0.3, duration=60)
    settings = WorkerSettings("t0000000.0", 0, 0, load, [], lambda: False, joined=Once(settle))
    run_receiver(adapter, ReceiverLoop(settings, WorkerRecorder("receiver", 0, 0)))
    assert adapter.receives > 3  # it went on receiving until idle
    assert seen == [3] and gate.settled.value == 1


class OpenedAt(StartGate):
    """Notes when the last receiver settled (the settling call opens the gate)."""

    opened_at = 0.0

    def settle(self) -> None:
        super().settle()
        if self.open() and not self.opened_at:
            self.opened_at = time.monotonic()


def test_senders_start_only_once_the_receivers_joined(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    adapters: list[Joining] = []

    def connect(*_: Any) -> Joining:
        adapters.append(Joining(joins_at=20))  # ~0.2 s of receiving
        return adapters[-1]

    system = replace(memory_system(Joining()), connect=connect)
    monkeypatch.setattr(registry, "get", lambda name: system)
    gate = OpenedAt(mp.get_context("spawn").Value("i", 0), 2)
    stop = threading.Event()
    load = LoadSection(threads=2, processes=1, messages=20, duration=60, idle_timeout=0.5)
    receivers = threading.Thread(
        target=run_node,
        args=(node_spec(tmp_path, load, role="receiver"), stop),
        kwargs={"gate": gate},
    )
    receivers.start()
    status = run_node(node_spec(tmp_path, load), stop, gate=gate)
    receivers.join(30)
    assert status.ok and status.sent == 40 and gate.opened_at  # 20 per worker
    assert [a.receives >= 20 for a in adapters].count(True) == 2  # both receivers joined
    first_sends = [a.first_send for a in adapters if a.first_send is not None]
    assert len(first_sends) == 2 and min(first_sends) >= gate.opened_at


def test_receivers_that_cannot_connect_are_not_awaited(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*_: Any) -> Adapter[Any]:
        raise ConnectionRefusedError("no broker at 127.0.0.1:1")

    system = replace(memory_system(Joining()), connect=refuse)
    monkeypatch.setattr(registry, "get", lambda name: system)
    gate = _gate(3)
    load = LoadSection(threads=3, processes=1, duration=60)
    status = run_node(node_spec(tmp_path, load, role="receiver"), threading.Event(), gate=gate)
    assert not status.ok and gate.open()
