"""The Redis adapter's own RESP encoding of a batch of XADDs: byte for byte what redis-py
would write, keys taking turns across batches. No server is started."""

from __future__ import annotations

import itertools

import redis

from brokers.redis.protocol import FIELD, XaddPacker, pack

KEYS = [b"bb_x_p0:{0}", b"bb_x_p0:{1}", b"bb_x_p0:{2}"]


def redis_py(commands: list[tuple[bytes | int, ...]]) -> bytes:
    return b"".join(redis.connection.Connection().pack_commands(commands))


def test_a_batch_is_packed_as_redis_py_packs_it_and_the_keys_carry_on() -> None:
    packer = XaddPacker(KEYS)
    first = [b"a" * 100, b"b" * 100, b"c" * 100, b"d" * 100]
    second = [b"e" * 100, b"f" * 100]
    keys = itertools.cycle(KEYS)
    expected = [(b"XADD", next(keys), b"*", FIELD, body) for body in first + second]
    assert packer.pack(first) + packer.pack(second) == redis_py(expected)  # type: ignore[arg-type]


def test_bodies_of_different_sizes_and_a_wait() -> None:
    packer = XaddPacker(KEYS[:1])
    bodies = [b"x" * 5, b"y" * 700, b""]
    expected = [(b"XADD", KEYS[0], b"*", FIELD, body) for body in bodies]
    assert packer.pack(bodies) == redis_py(expected)  # type: ignore[arg-type]
    assert packer.pack([]) == b""
    assert pack(b"WAIT", 1, 500) == redis_py([(b"WAIT", 1, 500)])
