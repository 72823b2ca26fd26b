"""Message identity header and the per-worker recorder."""

from __future__ import annotations

from workload import message
from workload.recording import WorkerRecorder


def test_header_round_trip_keeps_size() -> None:
    (payload,) = message.message_pool(1, 100, seed=1)
    head = message.header("abcd1234.1f", 3, 17, 123456789, 10**18, 10**18 - 5)
    body = message.stamp(payload, head)
    assert len(body) == 100
    ident = message.parse(body)
    assert ident == message.Identity("abcd1234.1f", 3, 17, 123456789, 10**18, 10**18 - 5)
    assert len(message.header("abcd1234.fff", 999, 9999, 2**40, 2**62, 2**62)) <= message.HEADER_MAX


def test_foreign_payloads_are_not_parsed() -> None:
    assert message.parse(b"hello world") is None
    assert message.parse(b"bb1|x|zz|1|1|1|1|rest") is None


def test_recorder_merges_contiguous_ranges_and_keeps_gaps() -> None:
    rec = WorkerRecorder("sender", 0, 0)
    t = 5_000_000_000
    rec.batch_sent(t + 1_000, t, t, 0, 9)
    rec.batch_sent(t + 2_000, t, t, 10, 14)
    rec.batch_sent(t + 3_000, t, t, 20, 29)  # 15..19 failed
    assert rec.sent_ranges == [[0, 14], [20, 29]]
    assert rec.total_sent == 25
    assert rec.seconds[5].send_latency.total == 3
