"""Live progress: what the nodes report (processing-latency counts since their previous
report, redeliveries) and what the coordinator's view prints from it — interval
percentiles merged across nodes, redeliveries named, elapsed against the point's duration,
the sweep's ETA — on a terminal and in logs, and that a broken stream never stops a run."""

from __future__ import annotations

import collections
import errno
import io
import re
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path

import pytest

from brokers import registry
from brokers.base import Adapter, Received
from tests.buckets import bucket_of
from tests.support import memory_system, node_spec
from workload.engine import message
from workload.engine.histogram import bucket_value, percentile_of
from workload.engine.node import run_node
from workload.engine.node_progress import Interval, Progress
from workload.engine.progress import ProgressView, clock_text, latency_text
from workload.engine.recording import WorkerRecorder
from workload.model.sections import LoadSection
from workload.model.sweep import SweepPoint

S = 1_000_000_000
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def receive(
    recorder: WorkerRecorder, second: int, latencies_ms: list[float], again: int = 0
) -> None:
    """``latencies_ms`` received together in wall-clock second ``second``."""
    now = second * S + S // 2
    n = len(latencies_ms)
    intended = [now - int(ms * 1e6) for ms in latencies_ms]
    recorder.received_batch(now, [0] * n, [0] * n, list(range(n)), intended, again, [100] * n)


def histogram(latencies_ms: list[float]) -> dict[int, int]:
    counts: dict[int, int] = {}
    for ms in latencies_ms:
        bucket = bucket_of(ms * 1000)
        counts[bucket] = counts.get(bucket, 0) + 1
    return counts


def shown(latencies_ms: list[float], q: float) -> str:
    """How the view shows percentile ``q`` of these latencies."""
    return latency_text(percentile_of(histogram(latencies_ms).items(), q))


# -- the nodes' side ----------------------------------------------------------------------


def test_an_interval_is_what_was_recorded_since_the_previous_report() -> None:
    a, b = WorkerRecorder("receiver", 0, 0), WorkerRecorder("receiver", 0, 1)
    interval = Interval([a, b], now_s=100)
    receive(a, 100, [1.0, 1.0], again=1)
    receive(b, 100, [2.0])
    assert interval.take(100) == histogram([1.0, 1.0, 2.0])
    assert interval.redelivered == 1
    assert interval.take(100) == {}  # nothing new: nothing counted twice
    # More in the same second, and in the next one.
    receive(a, 100, [3.0])
    receive(b, 101, [4.0, 4.0], again=2)
    assert interval.take(101) == histogram([3.0, 4.0, 4.0])
    assert interval.redelivered == 3
    # A worker that took its time stamp just before second 101 ended writes into it late.
    receive(a, 101, [5.0])
    receive(a, 102, [6.0])
    assert interval.take(102) == histogram([5.0, 6.0])
    # Seconds long before the previous report are not read again.
    assert interval.take(110) == {} and interval.take(111) == {}
    assert interval.redelivered == 3


def test_a_clock_stepped_far_ahead_reads_a_bounded_span() -> None:
    recorder = WorkerRecorder("receiver", 0, 0)
    interval = Interval([recorder], now_s=100)
    receive(recorder, 100, [1.0])
    assert interval.take(100) == histogram([1.0])
    receive(recorder, 10_000_000, [2.0])
    assert interval.take(10_000_000) == histogram([2.0])  # not ten million seconds read
    receive(recorder, 50, [3.0])  # stepped back
    assert interval.take(50) == histogram([3.0])


class Delivering(Adapter[int]):
    """Hands out stamped messages (some flagged as redelivered) until it has none left."""

    def __init__(self, bodies: list[tuple[bytes, bool]]) -> None:
        self.queue = collections.deque(bodies)
        self.next_id = 0

    def send(self, batch: Sequence[bytes]) -> None:
        raise AssertionError("receivers only")

    def receive(self, max_n: int) -> list[Received[int]]:
        out = []
        while self.queue and len(out) < max_n:
            body, again = self.queue.popleft()
            self.next_id += 1
            out.append(Received(body, self.next_id, again))
        if not out:
            time.sleep(0.01)
        return out

    def ack(self, receipts: Sequence[int]) -> None:
        pass


class Sink:
    def __init__(self) -> None:
        self.items: list[Progress] = []

    def put(self, item: object) -> None:
        assert isinstance(item, Progress)
        self.items.append(item)


def test_a_receiver_node_reports_every_latency_once_and_its_redeliveries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tag = "t0000000.0"
    stamper = message.Stamper(tag, 0, 0)
    payloads = [b"x" * 100] * 3000
    bodies = stamper.stamp_batch(payloads, 0, time.time_ns(), time.time_ns() - 5_000_000)
    adapter = Delivering([(body, i % 100 == 0) for i, body in enumerate(bodies)])
    system = memory_system(adapter)
    monkeypatch.setattr(registry, "get", lambda name: system)
    spec = node_spec(
        tmp_path, LoadSection(threads=2, idle_timeout=1.5, receive_batch=1), role="receiver"
    )
    sink = Sink()
    status = run_node(spec, threading.Event(), sink)
    assert status.ok and status.received == 3000
    assert len(sink.items) >= 2 and sink.items[-1].done
    reported = collections.Counter[int]()
    for item in sink.items:
        reported.update(item.processing_latency)
    assert sum(reported.values()) == 3000
    assert min(reported) >= bucket_of(5000)  # at least the 5 ms it waited
    assert sink.items[-1].redelivered == 30
    assert [i.redelivered for i in sink.items] == sorted(i.redelivered for i in sink.items)


# -- the coordinator's view ---------------------------------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def view(
    stream: io.StringIO | None = None,
    duration: float = 60,
    idle: float = 10,
    remaining_s: float = 0.0,
) -> tuple[ProgressView, Clock, io.StringIO]:
    clock = Clock()
    out = stream if stream is not None else io.StringIO()
    point = SweepPoint(0, LoadSection(duration=duration, idle_timeout=idle))
    shown_view = ProgressView(
        "point 0 (1 of 3) threads=2",
        out,
        log_every=5.0,
        point=point,
        remaining_s=remaining_s,
        clock=clock,
    )
    return shown_view, clock, out


def receiver(
    part: int, received: int, latencies_ms: list[float], redelivered: int = 0, errors: int = 0
) -> Progress:
    return Progress(
        0,
        "receiver",
        0,
        part,
        0,
        received,
        errors,
        redelivered=redelivered,
        processing_latency=histogram(latencies_ms),
    )


def sender(sent: int, errors: int = 0) -> Progress:
    return Progress(0, "sender", 0, 0, sent, 0, errors)


def lines(out: io.StringIO) -> list[str]:
    return out.getvalue().splitlines()


def test_interval_percentiles_merge_every_node_and_cover_only_the_interval() -> None:
    progress, clock, out = view()
    fast, slow = [1.0] * 90, [50.0] * 10
    clock.now += 1
    progress.update(receiver(0, 90, fast))
    progress.update(receiver(1, 10, slow))
    clock.now += 4
    progress.tick()
    (first,) = lines(out)
    # Neither node's own percentiles: those of the merged histogram.
    assert f"proc p50 {shown(fast + slow, 0.5)}  p99 {shown(fast + slow, 0.99)}" in first
    assert shown(fast + slow, 0.5) == shown(fast, 0.5) != shown(slow, 0.5)
    assert shown(fast + slow, 0.99) == shown(slow, 0.99) != shown(fast, 0.99)
    # The next interval's messages only.
    clock.now += 1
    progress.update(receiver(0, 190, [7.0] * 100))
    clock.now += 4
    progress.tick()
    second = lines(out)[1]
    assert f"proc p50 {shown([7.0], 0.5)}  p99 {shown([7.0], 0.99)}" in second
    # An interval in which nothing arrived has no percentiles.
    clock.now += 5
    progress.tick()
    assert "proc p50 –  p99 –" in lines(out)[2]


def test_the_figures_of_a_line() -> None:
    progress, clock, out = view(duration=60, idle=10, remaining_s=300)
    clock.now += 2
    progress.update(sender(10_128, errors=3))
    progress.update(receiver(0, 10_240, [2.0], redelivered=112))
    clock.now += 3
    progress.tick()
    (line,) = lines(out)
    assert line.startswith("  point 0 (1 of 3) threads=2  0:05 / 1:00  sent 10,128 (5,064/s)")
    assert "received 10,240 (5,120/s, incl. 112 redelivered)" in line
    assert "errors 3" in line
    # This point's estimate (60 s sending + 10 s idle) less 5 s, and the points after it.
    assert line.endswith("sweep ETA 6:05")


def test_no_redeliveries_no_mention() -> None:
    progress, clock, out = view()
    progress.update(receiver(0, 500, [1.0]))
    clock.now += 5
    progress.tick()
    assert "received 500 (" in out.getvalue() and "redelivered" not in out.getvalue()


def test_draining_the_eta_and_the_summary_that_stays() -> None:
    progress, clock, out = view(duration=60, idle=10, remaining_s=3600)
    for second in range(1, 66):
        clock.now += 1
        progress.update(sender(min(second, 60) * 100))
        progress.update(receiver(0, min(second, 60) * 100, [3.0] * 100 if second <= 60 else []))
        progress.tick()
    printed = lines(out)
    assert len(printed) == 13  # at once, then every 5 s (not every second): not a terminal
    assert "0:56 / 1:00  sent 5,600 (100/s)" in printed[-2]
    assert "1:01 / 1:00 draining  sent 6,000 (80/s)" in printed[-1]
    assert printed[-1].endswith("sweep ETA 1:00:09")
    clock.now += 1
    progress.close()
    summary = lines(out)[-1]
    assert "1:06 / 1:00 ended" in summary
    # Averages over the time messages flowed (about 60 s), not over the whole point, each
    # naming its span; the whole point's latency says that it holds the warm-up.
    assert "sent 6,000 (avg 100/s over 60 s)  received 6,000 (avg 100/s over 60 s)" in summary
    whole = f"proc p50 {shown([3.0], 0.5)}  p99 {shown([3.0], 0.99)} (whole point, incl. warm-up)"
    assert whole in summary
    assert summary.endswith("sweep ETA 1:00:00")  # only the points after this one


def test_while_the_senders_wait_the_line_says_how_many_receivers_have_joined() -> None:
    progress, clock, out = view(duration=60)
    progress.receivers_joining((12, 16))
    clock.now += 5
    progress.tick()
    assert "0:05 / 1:00 receivers joining 12/16  sent 0" in lines(out)[-1]
    progress.receivers_joining(None)  # the gate opened: the senders' minute starts now
    clock.now += 5
    progress.update(sender(500))
    progress.tick()
    assert "0:05 / 1:00  sent 500 (100/s)" in lines(out)[-1]
    clock.now += 56
    progress.tick()
    assert "1:01 / 1:00 draining" in lines(out)[-1]


def test_rates_keep_between_reports_and_fall_to_zero_when_reports_stop() -> None:
    progress, clock, out = view(stream=Tty())
    clock.now += 1
    progress.update(sender(1000))
    progress.tick()
    clock.now += 1  # a tick before the next report: the last figures stay
    progress.tick()
    clock.now += 3  # no report for a while
    progress.tick()
    text = ANSI.sub("", out.getvalue())
    frames = [t for t in text.split("sent ") if t[:1].isdigit()]
    assert [f.split(")")[0] for f in frames] == ["1,000 (1,000/s", "1,000 (1,000/s", "1,000 (0/s"]


def test_on_a_terminal_a_live_display_with_the_same_figures_stays_after_the_point() -> None:
    progress, clock, out = view(stream=Tty(), remaining_s=300)
    clock.now += 1
    progress.update(sender(2000, errors=1))
    progress.update(receiver(0, 2048, [4.0] * 10, redelivered=48))
    clock.now += 0.5
    progress.tick()
    plain = progress.line(progress.figures(clock.now))
    progress.close()
    raw = out.getvalue()
    assert "\x1b[" in raw and raw.endswith("\x1b[?25h")  # redrawn in place; cursor back
    text = ANSI.sub("", raw)
    assert "point 0 (1 of 3) threads=2" in text and "━" in text and "0:02 / 1:00" in text
    for figure in re.split(r"\s{2,}", plain.strip())[2:]:
        assert figure in text, figure
    assert "sent 2,000 (avg 2,000/s over 1 s)" in text.splitlines()[-3]  # the summary stays
    assert "sweep ETA 5:00" in text.splitlines()[-4]


def test_what_the_coordinator_prints_meanwhile_goes_above_the_live_display(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    terminal = Tty()
    monkeypatch.setattr(sys, "stdout", terminal)
    progress, clock, out = view(stream=terminal)
    progress.update(sender(10))
    clock.now += 1
    progress.tick()
    assert sys.stdout is not terminal  # redirected while the display is live
    print("  fault 0: kill leader (node 1)")
    progress.close()
    assert sys.stdout is terminal
    text = ANSI.sub("", out.getvalue())
    assert text.index("fault 0: kill leader") < text.rindex("point 0 (1 of 3) threads=2")


class Broken(io.StringIO):
    """A closed terminal (EIO) or pipe (EPIPE), or a closed file (ValueError)."""

    def __init__(self, error: Exception, tty: bool) -> None:
        super().__init__()
        self.error = error
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty

    def write(self, text: str) -> int:
        raise self.error

    def flush(self) -> None:
        raise self.error


@pytest.mark.parametrize("tty", [False, True], ids=["log", "terminal"])
@pytest.mark.parametrize(
    "error",
    [BrokenPipeError(errno.EPIPE, "Broken pipe"), OSError(errno.EIO, "I/O"), ValueError("closed")],
    ids=["pipe", "terminal", "file"],
)
def test_a_broken_stream_never_stops_the_run(error: Exception, tty: bool) -> None:
    progress, clock, _ = view(stream=Broken(error, tty))
    for _ in range(3):
        clock.now += 5
        progress.update(receiver(0, 10, [1.0]))
        progress.tick()
    progress.close()  # no exception, no SystemExit


def test_formats() -> None:
    assert [latency_text(us) for us in (None, 350, 3_456, 34_560, 345_600, 12_345_678)] == [
        "–",
        "0.35 ms",
        "3.46 ms",
        "34.6 ms",
        "346 ms",
        "12.3 s",
    ]
    assert [clock_text(s) for s in (0, 59.6, 61, 3600, 3725)] == [
        "0:00",
        "1:00",
        "1:01",
        "1:00:00",
        "1:02:05",
    ]
    assert latency_text(bucket_value(bucket_of(1000))) in {"0.99 ms", "1.00 ms", "1.01 ms"}
