"""Message identity (SPEC §2): every payload starts with an ASCII header naming its run and
sweep point, sender node, worker, sequence number, actual and intended send time.

The header is ASCII so that every broker (text protocols, JSON, SQS bodies) carries it
unchanged; the rest of the payload is random ASCII from the message pool.
"""

from __future__ import annotations

import random
import string
from dataclasses import dataclass

MAGIC = b"bb1"
#: The longest header; scenarios may not ask for smaller messages.
HEADER_MAX = 72
_ALPHABET = (string.ascii_letters + string.digits).encode()


@dataclass(frozen=True, slots=True)
class Identity:
    tag: str  # run tag + sweep point, e.g. "3fa2c9d1.0"
    node: int
    worker: int
    seq: int
    send_ns: int
    intended_ns: int


def header(tag: str, node: int, worker: int, seq: int, send_ns: int, intended_ns: int) -> bytes:
    return b"%s|%s|%x|%x|%x|%x|%x|" % (
        MAGIC,
        tag.encode(),
        node,
        worker,
        seq,
        send_ns,
        intended_ns,
    )


def stamp(payload: bytes, head: bytes) -> bytes:
    """The pool payload with its first bytes replaced by the header (size unchanged)."""
    return head + payload[len(head) :]


def parse(body: bytes) -> Identity | None:
    """The identity in a payload, or None when it is not a brokerbench message."""
    parts = body[:HEADER_MAX].split(b"|", 7)
    if len(parts) < 8 or parts[0] != MAGIC:
        return None
    try:
        return Identity(
            tag=parts[1].decode(),
            node=int(parts[2], 16),
            worker=int(parts[3], 16),
            seq=int(parts[4], 16),
            send_ns=int(parts[5], 16),
            intended_ns=int(parts[6], 16),
        )
    except (ValueError, UnicodeDecodeError):
        return None


def message_pool(count: int, size: int, seed: int | None = None) -> list[bytes]:
    """``count`` random ASCII payloads of exactly ``size`` bytes."""
    rng = random.Random(seed)
    return [bytes(rng.choices(_ALPHABET, k=size)) for _ in range(count)]
