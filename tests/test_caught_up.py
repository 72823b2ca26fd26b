"""The coordinator's early end of a clean point (workload.engine.caught_up): only once every
confirmed identity has been received — never on counts — and the totals held still; never
at a point with a fault, a death or an error, nor while one confirmed message is missing,
whatever duplicates make the counts come out (issue 42)."""

from __future__ import annotations

import io
import queue
import threading
import time
from collections import deque
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pytest

from brokers import registry
from brokers.base import Adapter
from brokers.batches import Received
from tests.support import memory_system, node_spec
from workload.engine import message
from workload.engine.caught_up import (
    QUIET_S,
    CaughtUp,
    IdentityReporter,
    Ranges,
    keys,
    runs,
)
from workload.engine.local_fleet import _drain
from workload.engine.node import run_node
from workload.engine.node_progress import Progress
from workload.engine.progress import ProgressView
from workload.engine.recording import WorkerRecorder
from workload.model.results import read_point
from workload.model.sections import LoadSection


def ranges(*seqs: int, node: int = 0, worker: int = 0) -> np.ndarray:
    """The identity ranges of sender ``node``'s ``worker``'s sequence numbers."""
    found = keys([node] * len(seqs), [worker] * len(seqs), list(seqs))
    assert found is not None
    return runs(np.unique(found))


def report(role: str, ids: np.ndarray | None, *, count: int, done: bool = True) -> Progress:
    sent, received = (count, 0) if role == "sender" else (0, count)
    return Progress(0, role, 0, 0, sent, received, 0, done, identities=ids)


def settle(watch: CaughtUp, sent: int, received: int, **flags: bool | int) -> list[bool]:
    """What ``check`` says at 0, 1, …, 5 s with the same totals."""
    values: dict = {"senders_done": True, "clean": True, "errors": 0} | flags
    return [watch.check(float(t), sent=sent, received=received, **values) for t in range(6)]


# -- the sets of ranges ----------------------------------------------------------------------


def test_ranges_merge_count_and_cover() -> None:
    found = Ranges()
    found.add(ranges(5, 6, 7, 1, 2))
    found.add(ranges(3, 9))
    assert (found.lo.tolist(), found.hi.tolist(), found.count()) == ([1, 5, 9], [3, 7, 9], 7)
    found.add(ranges(8, 7, 4))  # overlapping and adjacent ranges merge
    assert len(found) == 1 and found.count() == 9
    wanted = Ranges()
    wanted.add(ranges(*range(1, 10)))
    assert found.covers(wanted)
    wanted.add(ranges(10))
    assert not found.covers(wanted) and Ranges().covers(Ranges()) and not Ranges().covers(wanted)
    # Streams never run into each other: a sender's worker's keys are its own.
    other = Ranges()
    other.add(ranges(0, 1, 2, worker=1))
    assert not found.covers(other) and other.count() == 3


def test_an_identity_that_does_not_fit_its_bits_is_no_key() -> None:
    assert keys([1024], [0], [0]) is None and keys([0], [16384], [0]) is None
    assert keys([0], [0], [2**40]) is None and keys([0], [0], [-1]) is None
    (key,) = keys([1000], [9999], [10**12])  # type: ignore[misc]
    assert (int(key) >> 54, int(key) >> 40 & 16383, int(key) & (2**40 - 1)) == (1000, 9999, 10**12)


def test_the_reporter_reads_what_is_new_across_a_flush() -> None:
    recorder = WorkerRecorder("receiver", 0, 0)
    reporter = IdentityReporter("receiver", [recorder])

    def receive(*seqs: int, node: int = 3, worker: int = 2) -> None:
        n = len(seqs)
        recorder.received_batch(
            time.time_ns(), [node] * n, [worker] * n, list(seqs), [0] * n, 0, [100] * n
        )

    receive(0, 1, 2)
    receive(5, 4)
    assert reporter.take().tolist() == ranges(0, 1, 2, 4, 5, node=3, worker=2).tolist()
    assert reporter.take().tolist() == []  # nothing new
    receive(3)
    recorder.take()  # a flush: the worker's identities leave for the records
    receive(2, 6)  # a duplicate, and one more
    assert reporter.take().tolist() == ranges(2, 3, 6, node=3, worker=2).tolist()
    receive(7)
    recorder.take()
    receive(8)
    recorder.take()  # two flushes between two reports (and the end of the records)
    receive(10)
    assert reporter.take().tolist() == ranges(7, 8, 10, node=3, worker=2).tolist()
    # A sender's confirmed ranges, the last one read again (a worker extends it in place).
    sender = WorkerRecorder("sender", 1, 4)
    confirms = IdentityReporter("sender", [sender])
    sender.batch_sent(time.time_ns(), 1, None, 0, 9, 100)
    assert confirms.take().tolist() == ranges(*range(10), node=1, worker=4).tolist()
    sender.batch_sent(time.time_ns(), 1, None, 10, 14, 100)
    sender.take()
    sender.batch_sent(time.time_ns(), 1, None, 20, 21, 100)
    new = Ranges()
    new.add(confirms.take())
    assert new.count() == 17 and new.lo.tolist()[-1] == ranges(20, node=1, worker=4)[0][0]


# -- the rule --------------------------------------------------------------------------------


def watching(confirmed: np.ndarray, received: np.ndarray | None, senders: int = 1) -> CaughtUp:
    watch = CaughtUp.for_point(60, senders)
    watch.update(report("sender", confirmed, count=len(confirmed)))
    watch.update(report("receiver", received, count=0))
    return watch


def test_a_clean_point_ends_once_every_confirmed_identity_is_in_and_the_totals_held_still() -> None:
    watch = watching(ranges(*range(100)), ranges(*range(100)))
    assert settle(watch, 100, 100) == [False, False, True, True, True, True]
    assert QUIET_S == 2.0 and CaughtUp.for_point(1, 1).quiet_s == 1
    # Duplicates, flagged or not, are the same identities again.
    watch = watching(ranges(*range(100)), ranges(*range(100)))
    watch.update(report("receiver", ranges(3, 7, 7), count=0))
    assert settle(watch, 100, 103)[2]


def test_an_unflagged_duplicate_never_stands_in_for_a_missing_message() -> None:
    """100 confirmed, 100 received: 99 of them and one of them twice, unflagged."""
    watch = watching(ranges(*range(100)), ranges(*range(99)))
    watch.update(report("receiver", ranges(42), count=0))
    assert not any(settle(watch, 100, 100))
    watch.update(report("receiver", ranges(99), count=0))  # the last one comes after all
    assert settle(watch, 100, 101)[2]


@pytest.mark.parametrize(
    ("sent", "flags"),
    [
        (0, {}),  # nothing confirmed
        (100, {"errors": 1}),
        (100, {"clean": False}),  # a fault or a death
        (100, {"senders_done": False}),
        (101, {}),  # a confirmation the identities do not hold
    ],
)
def test_what_does_not_settle_it_waits_for_the_idle_timeout(sent: int, flags: dict) -> None:
    confirmed = ranges(*range(100)) if sent else ranges()
    assert not any(settle(watching(confirmed, ranges(*range(100))), sent, 100, **flags))


def test_every_sender_part_must_have_reported_its_last() -> None:
    watch = watching(ranges(*range(100)), ranges(*range(100)), senders=2)
    assert not any(settle(watch, 100, 100))
    watch.update(Progress(0, "sender", 1, 0, 0, 0, 0, True, identities=ranges()))
    assert settle(watch, 100, 100)[5]


def test_identities_that_cannot_be_followed_end_nothing_early() -> None:
    watch = watching(ranges(*range(100)), None)
    assert watch.lost_track and not any(settle(watch, 100, 100))
    faulted = CaughtUp.for_point(60, 1, enabled=False)
    faulted.update(report("sender", ranges(1), count=1))
    faulted.update(report("receiver", ranges(1), count=1))
    assert not faulted.confirmed and not any(settle(faulted, 1, 1))


def test_the_quiet_period_starts_again_when_a_total_moves() -> None:
    watch = watching(ranges(*range(11)), ranges(*range(11)))
    common = {"senders_done": True, "clean": True, "errors": 0}
    assert not watch.check(0.0, sent=11, received=11, **common)
    assert not watch.check(1.9, sent=11, received=12, **common)  # a duplicate came: again
    assert not watch.check(3.0, sent=11, received=12, **common)
    assert watch.check(3.9, sent=11, received=12, **common)


# -- through the nodes and the coordinator's plumbing ----------------------------------------

HELD, DUPLICATE, MESSAGES = 5, 7, 20


class HoldBack(Adapter[int]):
    """An in-memory broker for one sender and one receiver node: it delivers in order,
    but holds the message with sequence number :data:`HELD` back until :attr:`release` is
    set, and delivers :data:`DUPLICATE` twice, the second time not flagged as a redelivery
    (a producer's retry, say). Its counts then come out right while one confirmed message
    is still on its way."""

    def __init__(self) -> None:
        self.queue: deque[bytes] = deque()
        self.lock = threading.Lock()
        self.held: bytes | None = None
        self.release = threading.Event()
        self.handed: list[int] = []  # sequence numbers in the order handed out

    def send(self, batch: Sequence[bytes]) -> None:
        with self.lock:
            for body in batch:
                seq = message.parse(body).seq  # type: ignore[union-attr]
                if seq == HELD:
                    self.held = body
                    continue
                self.queue.append(body)
                if seq == DUPLICATE:
                    self.queue.append(body)

    def receive(self, max_n: int) -> list[Received[int]]:
        time.sleep(0.005)
        with self.lock:
            out = [self.queue.popleft() for _ in range(min(max_n, len(self.queue)))]
            if self.release.is_set() and self.held is not None:
                out.append(self.held)
                self.held = None
        self.handed += [message.parse(b).seq for b in out]  # type: ignore[union-attr]
        return [Received(body, 0) for body in out]

    def ack(self, receipts: Sequence[int]) -> None:
        pass


def test_a_held_back_message_is_received_not_lost_despite_an_unflagged_duplicate(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sender and a receiver node run against :class:`HoldBack`; the coordinator's rule
    is fed their reports as the coordinator feeds it. Received − redelivered = confirmed
    soon holds (the duplicate stands in for the held message), and holds for longer than
    the quiet period before the held message comes: on counts the point would end then
    and count it lost. It ends only once the held message is in."""
    adapter = HoldBack()
    monkeypatch.setattr(registry, "get", lambda name: memory_system(adapter))
    load = LoadSection(threads=1, processes=1, messages=MESSAGES, duration=60, idle_timeout=60)
    progress: queue.Queue[object] = queue.Queue()
    stop, senders_done = threading.Event(), threading.Event()
    sender = threading.Thread(target=run_node, args=(node_spec(tmp_path, load), stop, progress))
    receiver = threading.Thread(
        target=run_node,
        args=(node_spec(tmp_path, load, role="receiver"), stop, progress, senders_done),
    )
    view = ProgressView("p0", io.StringIO())
    watch = CaughtUp.for_point(load.idle_timeout, senders=1)
    sender.start()
    receiver.start()
    counts_equal_since: float | None = None
    ended_with: list[int] | None = None
    deadline = time.monotonic() + 30
    while receiver.is_alive() and time.monotonic() < deadline:
        _drain(progress, view, timeout=0.25, caught_up=watch)
        if not sender.is_alive():
            senders_done.set()
        sent, received, errors = view.totals()
        now = time.monotonic()
        if sent == MESSAGES and received - view.redelivered == sent:
            counts_equal_since = counts_equal_since or now
        if counts_equal_since and now - counts_equal_since > QUIET_S + 1.5:
            adapter.release.set()  # the counts held still well past the quiet period
        if not stop.is_set() and watch.check(
            now,
            senders_done=senders_done.is_set(),
            clean=True,
            sent=sent,
            received=received,
            errors=errors,
        ):
            ended_with = list(adapter.handed)
            stop.set()
    stop.set()
    sender.join(10)
    receiver.join(10)
    assert counts_equal_since is not None, "the duplicate never made the counts come out"
    assert ended_with is not None, "the point never ended early"
    assert HELD in ended_with and adapter.release.is_set()
    received = read_point(tmp_path, "received", 0, ["seq"])["seq"].to_pylist()
    assert set(received) == set(range(MESSAGES))  # nothing lost
    assert sorted(received).count(DUPLICATE) == 2
