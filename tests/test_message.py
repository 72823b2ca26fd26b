"""Message identity header and the per-worker recorder."""

from __future__ import annotations

from workload import message
from workload.model.buckets import NEGATIVE
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
    rec.batch_sent(t + 1_000, 1_000, 0, 0, 9)
    rec.batch_sent(t + 2_000, 2_000, 0, 10, 14)
    rec.batch_sent(t + 3_000, 3_000, 0, 20, 29)  # 15..19 failed
    assert rec.sent_ranges == [[0, 14], [20, 29]]
    assert rec.total_sent == 25
    assert rec.seconds[5].send_latency.total == 3


def test_stamper_and_reader_agree_with_header_and_parse() -> None:
    pool = message.message_pool(4, 100, seed=2)
    stamper = message.Stamper("abcd1234.3", 7, 12)
    bodies = stamper.stamp_batch(pool, 4095, 10**18, 10**18 - 7)
    assert [len(b) for b in bodies] == [100] * 4
    for i, body in enumerate(bodies):
        assert message.parse(body) == message.Identity(
            "abcd1234.3", 7, 12, 4095 + i, 10**18, 10**18 - 7
        )
    nodes: list[int] = []
    workers: list[int] = []
    seqs: list[int] = []
    intended: list[int] = []
    other_run = message.Stamper("ffff0000.3", 7, 12).stamp_batch(pool[:1], 0, 1, 1)
    foreign = message.Reader("abcd1234.3").read(
        [*bodies, b"hello", *other_run, b"bb1|abcd1234.3|zz|1|1|1|1|"],
        nodes,
        workers,
        seqs,
        intended,
    )
    assert foreign == 3
    assert nodes == [7] * 4 and workers == [12] * 4
    assert seqs == [4095, 4096, 4097, 4098]
    assert intended == [10**18 - 7] * 4


def test_recorder_records_a_received_batch() -> None:
    rec = WorkerRecorder("receiver", 1, 0)
    now = 7_000_000_000
    rec.received_batch(now, [0, 0, 1], [2, 2, 0], [5, 6, 9], [now - 1_000_000] * 3, 1)
    stats = rec.seconds[7]
    assert (stats.received, stats.redelivered) == (3, 1)
    assert stats.processing_latency.total == 3
    assert 990 <= (stats.processing_latency.percentile(0.5) or 0) <= 1010  # 1 ms in µs
    assert list(rec.rx_seq) == [5, 6, 9] and list(rec.rx_second) == [7, 7, 7]
    assert rec.total_received == 3


def test_a_message_received_before_it_was_sent_is_counted_not_read_as_one_microsecond() -> None:
    rec = WorkerRecorder("receiver", 1, 0)
    now = 7_000_000_000
    # The sender's clock is 5 ms ahead of the receiver's: the first message's latency
    # (2 ms) reads -3 ms.
    rec.received_batch(now, [0, 0], [0, 0], [1, 2], [now + 3_000_000, now - 1_000_000], 0)
    latency = rec.seconds[7].processing_latency
    assert latency.counts[NEGATIVE] == 1 and 0 not in latency.counts
    assert latency.percentile(0.5) == 0.0
