"""Message identity (docs/measurement.md §2): every payload starts with an ASCII header naming its run and
sweep point, sender node, worker, sequence number, actual and intended send time (ns on
the sender's wall clock: the receiver compares them with its own).

The header is ASCII so that every broker (text protocols, JSON, SQS bodies) carries it
unchanged; the rest of the payload is random ASCII from the message pool.

:class:`Stamper` (a sender worker's) and :class:`Reader` (a receiver worker's) do per batch
what :func:`header` and :func:`parse` do per message, with the constant parts of the header
built once: they are the hot path of the harness.
"""

from __future__ import annotations

import random
import string
from dataclasses import dataclass

from workload.model.bounds import HEADER_MAX

MAGIC = b"bb1"
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


class Stamper:
    """Stamps the messages of one sender worker: the run tag, node and worker are fixed."""

    __slots__ = ("prefix",)

    def __init__(self, tag: str, node: int, worker: int) -> None:
        self.prefix = b"%s|%s|%x|%x|" % (MAGIC, tag.encode(), node, worker)

    def stamp_batch(
        self,
        payloads: list[bytes],
        first_seq: int,
        send_ns: int,
        intended_ns: int,
        spacing_ns: float = 0.0,
    ) -> list[bytes]:
        """``payloads`` stamped with sequence numbers from ``first_seq`` (sizes unchanged).

        Every message carries ``intended_ns`` as its intended send time, or, with
        ``spacing_ns`` (an open-loop schedule), message ``i`` of the batch carries
        ``intended_ns + i·spacing_ns``."""
        prefix = self.prefix
        out: list[bytes] = []
        append = out.append
        seq = first_seq
        if spacing_ns:
            sent = b"%x|" % send_ns
            for i, payload in enumerate(payloads):
                when = intended_ns + int(i * spacing_ns)
                head = b"%s%x|%s%x|" % (prefix, seq + i, sent, when)
                append(head + payload[len(head) :])
            return out
        suffix = b"%x|%x|" % (send_ns, intended_ns)
        for payload in payloads:
            head = b"%s%x|%s" % (prefix, seq, suffix)
            append(head + payload[len(head) :])
            seq += 1
        return out


class Reader:
    """Reads the identities of the messages one receiver worker gets, a batch at a time.

    :meth:`read` appends the sender node, worker, sequence number and intended send time
    of each message of this run and sweep point to the given arrays, and returns how many
    bodies were foreign (another run's, or not brokerbench messages).
    """

    __slots__ = ("prefix",)

    def __init__(self, tag: str) -> None:
        self.prefix = b"%s|%s|" % (MAGIC, tag.encode())

    def read(
        self,
        bodies: list[bytes],
        nodes: list[int],
        workers: list[int],
        seqs: list[int],
        intended: list[int],
    ) -> int:
        prefix = self.prefix
        start = len(prefix)
        add_node, add_worker, add_seq, add_intended = (
            nodes.append,
            workers.append,
            seqs.append,
            intended.append,
        )
        foreign = 0
        for body in bodies:
            if not body.startswith(prefix):
                foreign += 1
                continue
            try:
                node, worker, seq, _, when, _ = body[start:HEADER_MAX].split(b"|", 5)
                n, w, q, t = int(node, 16), int(worker, 16), int(seq, 16), int(when, 16)
            except ValueError:
                foreign += 1
                continue
            add_node(n)
            add_worker(w)
            add_seq(q)
            add_intended(t)
        return foreign


def message_pool(count: int, size: int, seed: int | None = None) -> list[bytes]:
    """``count`` random ASCII payloads of exactly ``size`` bytes."""
    rng = random.Random(seed)
    return [bytes(rng.choices(_ALPHABET, k=size)) for _ in range(count)]
