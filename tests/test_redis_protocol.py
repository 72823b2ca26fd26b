"""The Redis adapter's own RESP encoding of a batch of XADDs: byte for byte what redis-py
would write, keys taking turns across batches; and the entry ids of XACK and XDEL. No
server is started."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest
import redis

from brokers.batches import RowsBatch
from brokers.redis.protocol import ReplyTally
from brokers.redis.resp import ReplyError, pack, pack_with_ids
from brokers.redis.xadd import FIELD, XaddPacker, stream_of

KEYS = [b"bb_x_p0:{0}", b"bb_x_p0:{1}", b"bb_x_p0:{2}"]


def redis_py(commands: list[tuple[bytes | int, ...]]) -> bytes:
    return b"".join(redis.connection.Connection().pack_commands(commands))


def by_stream_order(commands: list[tuple[bytes, ...]], streams: int) -> list[tuple[bytes, ...]]:
    """A batch's commands as a batch of one body size is written: stream by stream (the
    batch's first message's stream first), each stream's in their order."""
    return [c for j in range(min(streams, len(commands))) for c in commands[j::streams]]


def test_a_batch_is_packed_as_redis_py_packs_it_and_the_keys_carry_on() -> None:
    packer = XaddPacker(KEYS)
    first = [b"a" * 100, b"b" * 100, b"c" * 100, b"d" * 100]
    second = [b"e" * 100, b"f" * 100]
    keys = itertools.cycle(KEYS)
    expected = [(b"XADD", next(keys), b"*", FIELD, body) for body in first + second]
    assert packer.pack(first) + packer.pack(second) == redis_py(
        by_stream_order(expected[:4], 3) + by_stream_order(expected[4:], 3)  # type: ignore[arg-type]
    )
    # One stream: the batch in its order.
    single = XaddPacker(KEYS[:1])
    assert single.pack(first) == redis_py([(b"XADD", KEYS[0], b"*", FIELD, b) for b in first])


def test_a_batch_given_as_rows_is_packed_as_its_bodies_are() -> None:
    """A RowsBatch (a large batch of one size, stamped as one array) is packed from the
    array into the same bytes as its bodies, the keys carrying on between both kinds."""
    rng = np.random.default_rng(4)
    for streams, sizes in ((3, (1, 2, 5, 130, 7)), (1, (4, 300))):
        as_rows, as_bodies = XaddPacker(KEYS[:streams]), XaddPacker(KEYS[:streams])
        for n in sizes:
            rows = rng.integers(0, 256, (n, 60), dtype=np.uint8)
            rows[0, -1] = 0  # (a NUL where numpy's fixed-width bytes would drop it)
            batch = RowsBatch(rows)
            packed = as_rows.pack_rows(batch)
            assert packed.tobytes() == as_bodies.pack(list(batch))
            assert as_rows.turn == as_bodies.turn
            # and a batch of bodies after it continues from the same turn
            tail = [b"t" * 60, b"u" * 60]
            assert as_rows.pack(tail) == as_bodies.pack(tail)
    assert XaddPacker(KEYS).pack_rows(RowsBatch(np.empty((0, 60), np.uint8))).size == 0


def test_bodies_of_different_sizes_go_in_order_and_the_keys_carry_on() -> None:
    packer = XaddPacker(KEYS)
    bodies = [b"x" * 5, b"y" * 700, b"", b"z" * 100]
    keys = itertools.cycle(KEYS)
    expected = [(b"XADD", next(keys), b"*", FIELD, body) for body in bodies + bodies[:2]]
    assert packer.pack(bodies) + packer.pack(bodies[:2]) == redis_py(expected)  # type: ignore[arg-type]


def test_bodies_of_different_sizes_and_a_wait() -> None:
    packer = XaddPacker(KEYS[:1])
    bodies = [b"x" * 5, b"y" * 700, b""]
    expected = [(b"XADD", KEYS[0], b"*", FIELD, body) for body in bodies]
    assert packer.pack(bodies) == redis_py(expected)  # type: ignore[arg-type]
    assert packer.pack([]) == b""
    assert pack(b"WAIT", 1, 500) == redis_py([(b"WAIT", 1, 500)])


def test_entry_ids_are_packed_as_redis_py_packs_them_grouped_by_length() -> None:
    ids = [b"1795740272123-%d" % i for i in (0, 12, 3, 999, 45, 7)]
    packed = pack_with_ids((b"XACK", KEYS[0], b"brokerbench"), ids)
    # The ids of one length are joined together; the commands do not care about order.
    in_length_order = sorted(ids, key=len)
    assert packed == redis_py([(b"XACK", KEYS[0], b"brokerbench", *in_length_order)])
    assert pack_with_ids((b"XDEL", KEYS[0]), ids[:1]) == redis_py([(b"XDEL", KEYS[0], ids[0])])


def test_messages_with_keys_go_each_to_its_keys_stream() -> None:
    packer = XaddPacker(KEYS)
    bodies = [b"m%d" % i for i in range(40)]
    keys = [b"k%d" % (i % 7) for i in range(40)]
    expected = [
        (b"XADD", KEYS[stream_of(key, len(KEYS))], b"*", FIELD, body)
        for body, key in zip(bodies, keys, strict=True)
    ]
    assert packer.pack_keyed(bodies, keys) == redis_py(expected)  # type: ignore[arg-type]
    # One key, one stream; and the keys spread over every stream.
    assert len({stream_of(key, 3) for key in keys if key == b"k4"}) == 1
    assert {stream_of(b"k%d" % k, 3) for k in range(50)} == {0, 1, 2}


def resp(replies: list[bytes | str | int]) -> bytes:
    """Replies as a server writes them: entry ids (bytes), errors (str), integers."""
    return b"".join(
        b"$%d\r\n%s\r\n" % (len(r), r)
        if isinstance(r, bytes)
        else b"-%s\r\n" % r.encode()
        if isinstance(r, str)
        else b":%d\r\n" % r
        for r in replies
    )


def tallied(replies: list[bytes | str | int]) -> list[tuple[int, object]]:
    """What :class:`ReplyTally` should say of these replies: runs of entry ids counted,
    each error or integer on its own."""
    out: list[tuple[int, object]] = []
    for reply in replies:
        if isinstance(reply, bytes):
            if out and out[-1][1] is None:
                out[-1] = (out[-1][0] + 1, None)
            else:
                out.append((1, None))
        else:
            out.append((1, reply))
    return out


@pytest.mark.parametrize("errors", [False, True])
def test_replies_are_counted_however_the_bytes_arrive(errors: bool) -> None:
    rng = random.Random(7 + errors)
    for _ in range(2_000):
        replies: list[bytes | str | int] = []
        for _ in range(rng.randint(1, 40)):
            kind = rng.random() if errors else 0.0
            if kind < 0.8:
                replies.append(b"%d-%d" % (rng.randrange(10**12, 10**13), rng.randrange(10**4)))
            elif kind < 0.9:
                replies.append(rng.choice(["ERR no such key", "OOM command not allowed -x :y"]))
            else:
                replies.append(rng.randrange(100))
        data = resp(replies)
        cuts = sorted(rng.sample(range(1, len(data)), min(len(data) - 1, rng.randint(0, 10))))
        tally, got, before = ReplyTally(), [], 0
        for cut in [*cuts, len(data)]:
            tally.feed(data[before:cut])
            before = cut
            got += tally.take()
        assert tally.buffer == b""
        merged: list[tuple[int, object]] = []
        for count, value in got:
            value = str(value) if isinstance(value, ReplyError) else value
            if value is None and merged and merged[-1][1] is None:
                merged[-1] = (merged[-1][0] + count, None)
            else:
                merged.append((count, value))
        assert merged == tallied(replies)


def test_a_reply_half_read_waits_for_the_rest() -> None:
    tally = ReplyTally()
    tally.feed(b"$15\r\n1795808737302-0\r\n$16\r\n17958087")
    assert tally.take() == [(1, None)]
    assert tally.pending() and tally.take() == []
    tally.feed(b"37302-12\r\n$15\r")
    assert tally.take() == [(1, None)] and tally.buffer == b"$15\r"
    tally.feed(b"\n")
    assert tally.take() == [] and tally.buffer == b"$15\r\n"
    tally.feed(b"1795808737302-3\r\n")
    assert tally.take() == [(1, None)] and not tally.pending()


def test_the_fewest_reply_bytes_of_a_group() -> None:
    """An XADD's reply is at least ``$15\\r\\n<13-digit ms>-<digit>\\r\\n``; a WAIT's ``:0\\r\\n``."""
    from brokers.redis.protocol import fewest_reply_bytes

    assert fewest_reply_bytes(3, 0) == 3 * len(b"$15\r\n1764288000000-0\r\n")
    assert fewest_reply_bytes(3, 2) == 2 * 22 + len(b":0\r\n")
    assert fewest_reply_bytes(0, 2) == 0
