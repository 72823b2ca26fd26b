"""Message identity header and the per-worker recorder."""

from __future__ import annotations

import numpy as np
import pytest

from brokers.batches import RowsBatch
from workload.engine import message
from workload.engine.histogram import Histogram, percentile_of
from workload.engine.recording import WorkerRecorder
from workload.model.buckets import CLIPPED, MAX_US, NEGATIVE


def test_header_round_trip_keeps_size() -> None:
    (payload,) = message.message_pool(1, 100, seed=1)
    head = message.header("abcd1234.1f", 3, 17, 123456789, 10**18, 10**18 - 5)
    body = message.stamp(payload, head)
    assert len(body) == 100
    ident = message.parse(body)
    assert ident == message.Identity("abcd1234.1f", 3, 17, 123456789, 10**18, 10**18 - 5)
    assert (
        len(message.header("abcd1234.fff", 999, 9999, 10**12, 2**63 - 1, 2**63 - 1))
        <= message.HEADER_MAX
    )


def test_a_batch_takes_consecutive_payloads_wrapping_around_the_pool() -> None:
    pool = [b"a", b"b", b"c"]
    assert message.take(pool, 1, 2) == [b"b", b"c"]
    assert message.take(pool, 2, 2) == [b"c", b"a"]
    assert message.take(pool, 1, 7) == [b"b", b"c", b"a", b"b", b"c", b"a", b"b"]
    assert message.take(pool, 0, 0) == []


def test_foreign_payloads_are_not_parsed() -> None:
    assert message.parse(b"hello world") is None
    assert message.parse(b"bb1|x|zz|1|1|1|1|rest") is None


def test_recorder_merges_contiguous_ranges_and_keeps_gaps() -> None:
    rec = WorkerRecorder("sender", 0, 0)
    t = 5_000_000_000
    rec.batch_sent(t + 1_000, 1_000, 0, 0, 9, 1_000)
    rec.batch_sent(t + 2_000, 2_000, 0, 10, 14, 500)
    rec.batch_sent(t + 3_000, 3_000, 0, 20, 29, 1_000)  # 15..19 failed
    assert rec.sent_ranges == [[0, 14], [20, 29]]
    assert rec.total_sent == 25
    assert sum(rec.seconds[5].send_latency.counts.values()) == 3


def test_stamper_and_reader_agree_with_header_and_parse() -> None:
    pool = message.message_pool(4, 100, seed=2)
    stamper = message.Stamper("abcd1234.3", 7, 12)
    bodies = stamper.stamp_batch(pool, 4095, 10**18, 10**18 - 7)
    assert [len(b) for b in bodies] == [100] * 4
    head = len(message.header("abcd1234.3", 7, 12, 4095, 10**18, 10**18 - 7))
    assert [b[head:] for b in bodies] == [p[head:] for p in pool]  # each keeps its payload's tail
    for i, body in enumerate(bodies):
        assert message.parse(body) == message.Identity(
            "abcd1234.3", 7, 12, 4095 + i, 10**18, 10**18 - 7
        )
    other_run = message.Stamper("ffff0000.3", 7, 12).stamp_batch(pool[:1], 0, 1, 1)
    found = message.Reader("abcd1234.3").read(
        [*bodies, b"hello", *other_run, b"bb1|abcd1234.3|zz|1|1|1|1|"]
    )
    assert found.foreign == [4, 5, 6]
    assert list(found.nodes) == [7] * 4 and list(found.workers) == [12] * 4
    assert list(found.seqs) == [4095, 4096, 4097, 4098]
    assert list(found.intended) == [10**18 - 7] * 4


@pytest.mark.parametrize("spacing_ns", [0.0, 1500.5, 1e9 / 7])
def test_a_large_batch_of_one_size_is_stamped_with_numpy_byte_for_byte(spacing_ns: float) -> None:
    pool = message.message_pool(600, 100, seed=6)
    per_message = message.Stamper("abcd1234.3", 999, 9999)
    as_array = message.Stamper("abcd1234.3", 999, 9999, size=100)
    assert as_array.size == 100
    # (4,000 and 4,095: the last three hex digits wrap inside the batch)
    for size, first_seq in (
        (message.NUMPY_STAMP, 0),
        (600, 16**9 + 5),
        (300, 16**10 - 300),
        (300, 4000),
        (message.NUMPY_STAMP, 16**6 * 7 + 4095),
    ):
        args = (pool[:size], first_seq, 2**62 + 3, 2**62 - 77_777, spacing_ns)
        stamped = as_array.stamp_batch(*args)
        assert isinstance(stamped, RowsBatch) and len(stamped) == size
        assert stamped == per_message.stamp_batch(*args)
        assert list(stamped) == per_message.stamp_batch(*args)
        assert stamped[1:3] == per_message.stamp_batch(*args)[1:3]
        found = message.parse(stamped[-1])
        assert found is not None and found.seq == first_seq + size - 1
        assert found.intended_ns == 2**62 - 77_777 + int((size - 1) * spacing_ns)
    # A payload ending in a NUL byte keeps it.
    nul = [p[:-1] + b"\0" for p in pool[:200]]
    assert as_array.stamp_batch(nul, 7, 1, 1, spacing_ns) == per_message.stamp_batch(
        nul, 7, 1, 1, spacing_ns
    )
    # Sequence numbers past 10 hex digits, and payloads shorter than the header, are
    # stamped one by one, as before.
    past = as_array.stamp_batch(pool[:200], 16**10 - 100, 1, 1, spacing_ns)
    assert past == per_message.stamp_batch(pool[:200], 16**10 - 100, 1, 1, spacing_ns)
    assert message.Stamper("abcd1234.3", 1, 1, size=60).size is None


def test_a_large_batch_is_read_with_numpy_to_the_same_identities() -> None:
    pool = message.message_pool(50, 100, seed=3)
    reader = message.Reader("abcd1234.3")
    stamped = message.Stamper("abcd1234.3", 999, 9999).stamp_batch(
        pool, 10**12 - 60, 2**62, 2**62 - 9, spacing_ns=1500.5
    )
    other = message.Stamper("abcd1234.4", 1, 1).stamp_batch(pool[:2], 0, 5, 5)
    damaged = stamped[3][:28] + b"g" + stamped[3][29:]  # a sequence number that is not hex
    bodies = [*stamped[:3], damaged, *other, b"short", bytes(100), *stamped[4:]]
    assert len(bodies) >= message.NUMPY_BATCH
    large = reader.read(bodies)
    assert isinstance(large.seqs, np.ndarray)
    small = reader._read_python(bodies)
    assert large.foreign == small.foreign == [3, 4, 5, 6, 7]
    for column in ("nodes", "workers", "seqs", "intended"):
        assert list(getattr(large, column)) == list(getattr(small, column))
    expected = [message.parse(b) for b in bodies if message.parse(b) is not None]
    assert list(large.seqs) == [i.seq for i in expected if i.tag == "abcd1234.3"][:49]
    assert list(large.intended)[:2] == [2**62 - 9, 2**62 - 9 + 1500]


def test_a_batch_of_non_bytes_bodies_is_read_one_by_one() -> None:
    pool = message.message_pool(30, 100, seed=4)
    bodies = message.Stamper("abcd1234.3", 1, 2).stamp_batch(pool, 0, 10, 10)
    found = message.Reader("abcd1234.3").read([bytearray(b) for b in bodies])  # type: ignore[misc]
    assert list(found.seqs) == list(range(30)) and found.foreign == []


def test_recording_an_array_fills_the_same_buckets_as_one_by_one() -> None:
    rng = np.random.default_rng(5)
    values = np.concatenate(
        [rng.lognormal(7, 4, 20_000), [-5.0, 0.0, 0.5, 1.0, 1.0001, MAX_US, MAX_US * 3]]
    )
    one_by_one = Histogram()
    one_by_one.record_many(values.tolist())
    at_once = Histogram()
    at_once.record_array(values)
    assert at_once.counts == one_by_one.counts
    assert NEGATIVE in at_once.counts and CLIPPED in at_once.counts


def test_the_recorder_takes_arrays_as_it_takes_lists() -> None:
    now = 7_000_000_000
    ids = ([0, 3], [2, 1], [5, 9], [now - 1_000_000, now - 2_000])
    sizes = [100, 4_000]
    as_lists = WorkerRecorder("receiver", 1, 0)
    as_lists.received_batch(now, *ids, 0, sizes)
    as_arrays = WorkerRecorder("receiver", 1, 0)
    arrays = (np.array(c, dtype=np.int64) for c in (*ids, sizes))
    *columns, sized = arrays
    as_arrays.received_batch(now, *columns, 0, sized)
    for column in ("rx_node", "rx_worker", "rx_seq", "rx_second", "rx_size"):
        assert getattr(as_arrays, column) == getattr(as_lists, column)
    assert as_arrays.seconds[7].received_bytes == as_lists.seconds[7].received_bytes == 4_100
    assert as_arrays.seconds[7].processing_latency.counts == (
        as_lists.seconds[7].processing_latency.counts
    )


def test_recorder_records_a_received_batch() -> None:
    rec = WorkerRecorder("receiver", 1, 0)
    now = 7_000_000_000
    rec.received_batch(now, [0, 0, 1], [2, 2, 0], [5, 6, 9], [now - 1_000_000] * 3, 1, [72, 80, 90])
    stats = rec.seconds[7]
    assert (stats.received, stats.redelivered) == (3, 1)
    assert sum(stats.processing_latency.counts.values()) == 3
    assert (
        990 <= (percentile_of(stats.processing_latency.counts.items(), 0.5) or 0) <= 1010
    )  # 1 ms in µs
    assert list(rec.rx_seq) == [5, 6, 9] and list(rec.rx_second) == [7, 7, 7]
    assert rec.total_received == 3
    assert list(rec.rx_size) == [72, 80, 90] and stats.received_bytes == 242


def test_a_message_received_before_it_was_sent_is_counted_not_read_as_one_microsecond() -> None:
    rec = WorkerRecorder("receiver", 1, 0)
    now = 7_000_000_000
    # The sender's clock is 5 ms ahead of the receiver's: the first message's latency
    # (2 ms) reads -3 ms.
    rec.received_batch(
        now, [0, 0], [0, 0], [1, 2], [now + 3_000_000, now - 1_000_000], 0, [100] * 2
    )
    latency = rec.seconds[7].processing_latency
    assert latency.counts[NEGATIVE] == 1 and 0 not in latency.counts
    assert percentile_of(latency.counts.items(), 0.5) == 0.0


def test_a_batch_taken_as_rows_is_what_take_gives_and_stamps_the_same() -> None:
    pool = message.message_pool(50, 100, seed=2)
    rows = message.pool_rows(pool, 100)
    assert rows is not None
    for start, count in ((0, 50), (10, 20), (45, 10), (49, 130)):  # (wrapping round, twice)
        taken = message.take_rows(rows, start, count)
        assert [row.tobytes() for row in taken] == message.take(pool, start, count)
    assert message.pool_rows([*pool, b"x" * 99], 100) is None
    assert message.pool_rows(pool, None) is None
    large = message.POOL_ROWS_MAX // 100 + 1
    assert message.pool_rows([pool[0]] * large, 100) is None, "not copied past the limit"
    as_rows = message.Stamper("abcd1234.3", 1, 2, size=100)
    per_message = message.Stamper("abcd1234.3", 1, 2)
    assert as_rows.stamps_rows(130, 7)
    assert not as_rows.stamps_rows(message.NUMPY_STAMP - 1, 7)
    stamped = as_rows.stamp_batch(message.take_rows(rows, 45, 130), 7, 1, 1, 2.5)
    assert stamped == per_message.stamp_batch(message.take(pool, 45, 130), 7, 1, 1, 2.5)
    assert rows.tobytes() == b"".join(pool), "the pool itself is not stamped"
