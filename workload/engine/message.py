"""Message identity (docs/measurement.md §2): every payload starts with an ASCII header naming its run and
sweep point, sender node, worker, sequence number, actual and intended send time (ns on
the sender's wall clock: the receiver compares them with its own).

The header is ASCII so that every broker (text protocols, JSON, SQS bodies) carries it
unchanged; the rest of the payload is random ASCII from the message pool. After the run's
prefix (``bb1|<tag>|``) the numbers are lower-case hex of fixed widths — node 3, worker 4,
sequence number 10, send and intended time 16 digits, each followed by ``|`` — so a
receiver finds every field at a known offset.

:class:`Stamper` (a sender worker's) and :class:`Reader` (a receiver worker's) do per batch
what :func:`header` and :func:`parse` do per message, with the constant parts of the header
built once: they are the hot path of the harness.
"""

from __future__ import annotations

import random
import string
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from brokers.batches import RowsBatch
from workload.model.bounds import HEADER_MAX
from workload.model.sections import LoadSection

MAGIC = b"bb1"
#: Hex digits of the header's numbers after the prefix: sender node (a scenario has at most
#: 1,000 sender nodes), worker (10,000 per node), sequence number (10**12 per worker), send
#: and intended time (ns since the epoch).
_WIDTHS = (3, 4, 10, 16, 16)
#: Where each number starts after the prefix (each is followed by ``|``).
_OFFSETS = tuple(sum(w + 1 for w in _WIDTHS[:i]) for i in range(len(_WIDTHS)))
#: The header's length after the prefix.
FIELDS_LENGTH = sum(w + 1 for w in _WIDTHS)
#: Batches of at least this many bodies are read with numpy (below it, per message).
NUMPY_BATCH = 32
#: Batches of at least this many payloads of one size are stamped with numpy (below it,
#: one by one, which is as fast: a batch of 8 took 2.9 µs one by one and 3.8 µs as an
#: array made into bytes objects, of 16 4.2 and 4.0 µs, of 64 12.5 and 5.0 µs).
NUMPY_STAMP = 16
_SEP = ord("|")
#: A column of :class:`Identities`: a list (small batch) or a numpy int64 array.
Column = Any
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
    return b"%s|%s|%03x|%04x|%010x|%016x|%016x|" % (
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

    __slots__ = ("prefix", "size")

    def __init__(self, tag: str, node: int, worker: int, size: int | None = None) -> None:
        self.prefix = b"%s|%s|%03x|%04x|" % (MAGIC, tag.encode(), node, worker)
        #: Every payload's size when the load's message size is fixed (a batch of at least
        #: :data:`NUMPY_STAMP` is then stamped as one array), else None.
        head = len(self.prefix) - _OFFSETS[2] + FIELDS_LENGTH
        self.size = size if size is not None and size >= head else None

    def stamp_batch(
        self,
        payloads: list[bytes] | np.ndarray,
        first_seq: int,
        send_ns: int,
        intended_ns: int,
        spacing_ns: float = 0.0,
    ) -> Sequence[bytes]:
        """``payloads`` stamped with sequence numbers from ``first_seq`` (sizes unchanged):
        a list, or for a large batch of one size a :class:`~brokers.base.RowsBatch`.
        ``payloads`` may be given as rows of an array already (:func:`take_rows`, when
        :meth:`stamps_rows`): they are stamped in place.

        Every message carries ``intended_ns`` as its intended send time, or, with
        ``spacing_ns`` (an open-loop schedule), message ``i`` of the batch carries
        ``intended_ns + i·spacing_ns``."""
        if isinstance(payloads, np.ndarray):
            return self._stamp_array(payloads, first_seq, send_ns, intended_ns, spacing_ns)
        if self.stamps_rows(len(payloads), first_seq):
            rows = np.frombuffer(bytearray().join(payloads), np.uint8).reshape(
                len(payloads), self.size or 0
            )
            return self._stamp_array(rows, first_seq, send_ns, intended_ns, spacing_ns)
        prefix = self.prefix
        seqs = range(first_seq, first_seq + len(payloads))
        # Every head is as long (the fields are fixed-width): one format per message.
        cut = len(prefix) + len(b"%010x|%016x|%016x|" % (first_seq, send_ns, intended_ns))
        if spacing_ns:
            sent = b"%016x|" % send_ns
            return [
                b"%s%010x|%s%016x|%s"
                % (prefix, seq, sent, intended_ns + int(i * spacing_ns), payload[cut:])
                for i, (seq, payload) in enumerate(zip(seqs, payloads, strict=True))
            ]
        suffix = b"%016x|%016x|" % (send_ns, intended_ns)
        return [
            b"%s%010x|%s%s" % (prefix, seq, suffix, payload[cut:])
            for seq, payload in zip(seqs, payloads, strict=True)
        ]

    def stamps_rows(self, count: int, first_seq: int) -> bool:
        """Whether a batch of ``count`` payloads from ``first_seq`` is stamped as one array:
        payloads of one size (the load's fixed size), at least :data:`NUMPY_STAMP` of them,
        sequence numbers within 10 hex digits."""
        return self.size is not None and count >= NUMPY_STAMP and first_seq + count <= _SEQ_LIMIT

    def _stamp_array(
        self,
        rows: np.ndarray,
        first_seq: int,
        send_ns: int,
        intended_ns: int,
        spacing_ns: float,
    ) -> RowsBatch:
        """:meth:`stamp_batch` of payloads of one size (``self.size``), given as the rows of
        an array (stamped in place), byte for byte: the headers' columns are written for the
        whole batch at once; the messages are the array's rows (made bytes objects only if
        the sender asks)."""
        n, prefix = len(rows), self.prefix
        # The header, written a run of sequence numbers at a time: within a run the first
        # seven of their 10 hex digits agree (written with the header) and the last three
        # are consecutive rows of a table (at most two runs in a batch of up to 4,096).
        low_at = len(prefix) + 7  # the last three digits (the prefix ends with the worker)
        at = 0
        while at < n:
            seq = first_seq + at
            low = seq & 0xFFF
            run = min(n - at, 0x1000 - low)
            head = b"%s%07x000|%016x|%016x|" % (prefix, seq >> 12, send_ns, intended_ns)
            rows[at : at + run, : len(head)] = np.frombuffer(head, np.uint8)
            rows[at : at + run, low_at : low_at + 3] = _LOW_HEX[low : low + run]
            at += run
        if spacing_ns:
            # as int(i * spacing_ns): the same double product, truncated
            steps = (np.arange(n) * spacing_ns).astype(np.int64)
            intended_at = len(prefix) + 11 + 17  # after the sequence number and send time
            rows[:, intended_at : intended_at + 16] = _hex_columns(
                (intended_ns + steps).astype(">u8"), 16
            )
        return RowsBatch(rows)


#: Each byte value's two lower-case hex digits, as one 16-bit item.
_HEX_PAIRS = np.frombuffer(b"".join(b"%02x" % i for i in range(256)), np.uint16)
#: The last three hex digits of 0 to 4,095, a row each.
_LOW_HEX = np.frombuffer(b"".join(b"%03x" % i for i in range(0x1000)), np.uint8).reshape(-1, 3)
#: Sequence numbers below this fill their 10 hex digits.
_SEQ_LIMIT = 16**10


def _hex_columns(values: np.ndarray, digits: int) -> np.ndarray:
    """Each value's lower-case hex digits (``digits`` of them, even, zero-padded), a row
    each: its big-endian bytes (``values`` are big-endian 64-bit integers) looked up two
    digits at a time."""
    octets = values.view(np.uint8).reshape(-1, 8)[:, 8 - digits // 2 :]
    return np.take(_HEX_PAIRS, octets).view(np.uint8)


class Identities:
    """The identities :meth:`Reader.read` found in one batch of bodies, column by column:
    the sender node, worker, sequence number, intended send time and size in bytes of each
    message of this run and sweep point — Python lists for a small batch, numpy arrays for
    a large one — and the positions of the bodies that are not (another run's, or not
    brokerbench messages)."""

    __slots__ = ("foreign", "intended", "nodes", "seqs", "sizes", "workers")

    def __init__(
        self,
        nodes: Column,
        workers: Column,
        seqs: Column,
        intended: Column,
        foreign: list[int],
        sizes: Column,
    ) -> None:
        self.nodes = nodes
        self.workers = workers
        self.seqs = seqs
        self.intended = intended
        self.foreign = foreign
        self.sizes = sizes

    def __len__(self) -> int:
        return len(self.seqs)


class Reader:
    """Reads the identities of the messages one receiver worker gets, a batch at a time.

    The header's fields sit at fixed offsets after the run's prefix, so a large batch is
    read with a few numpy operations over all its bodies at once (no Python work per
    message); a small one, where numpy's fixed cost per call would dominate, with one
    slice and ``int`` per field.
    """

    __slots__ = ("_digits", "_end", "_seps", "_start", "_weights", "prefix")

    def __init__(self, tag: str) -> None:
        self.prefix = b"%s|%s|" % (MAGIC, tag.encode())
        start = self._start = len(self.prefix)
        self._end = start + FIELDS_LENGTH
        self._seps = np.array([start + o - 1 for o in _OFFSETS[1:]] + [self._end - 1])
        # The digit columns of the four fields read (node, worker, sequence number,
        # intended time), and the weights that sum them into five exact float64 values:
        # the intended time's 16 digits as two halves of 8 (each below 2**32).
        read = [0, 1, 2, 4]
        columns = [start + _OFFSETS[f] + k for f in read for k in range(_WIDTHS[f])]
        self._digits = np.array(columns)
        weights = np.zeros((len(columns), 5))
        row = 0
        for j, f in enumerate(read):
            for k in range(_WIDTHS[f]):
                place = _WIDTHS[f] - 1 - k
                out = j if place < 8 or f != 4 else 4
                weights[row, out] = 16.0 ** (place % 8 if f == 4 else place)
                row += 1
        self._weights = weights

    def read(self, bodies: Sequence[bytes]) -> Identities:
        if len(bodies) >= NUMPY_BATCH:
            found = self._read_numpy(bodies)
            if found is not None:
                return found
        return self._read_python(bodies)

    def _read_python(self, bodies: Sequence[bytes]) -> Identities:
        prefix = self.prefix
        s = self._start
        nodes: list[int] = []
        workers: list[int] = []
        seqs: list[int] = []
        intended: list[int] = []
        sizes: list[int] = []
        foreign: list[int] = []
        for i, body in enumerate(bodies):
            if body.startswith(prefix) and body[s + 53 : s + 54] == b"|":
                try:
                    n = int(body[s : s + 3], 16)
                    w = int(body[s + 4 : s + 8], 16)
                    q = int(body[s + 9 : s + 19], 16)
                    t = int(body[s + 37 : s + 53], 16)
                except ValueError:
                    foreign.append(i)
                    continue
                nodes.append(n)
                workers.append(w)
                seqs.append(q)
                intended.append(t)
                sizes.append(len(body))
            else:
                foreign.append(i)
        return Identities(nodes, workers, seqs, intended, foreign, sizes)

    def _read_numpy(self, bodies: Sequence[bytes]) -> Identities | None:
        """None when the bodies are not all ``bytes`` (numpy would read them otherwise)."""
        heads = np.array(bodies, dtype=f"S{self._end}")  # each body's first bytes
        if heads.ndim != 1:
            return None
        grid = heads.view(np.uint8).reshape(len(bodies), self._end)
        chars = grid[:, self._digits]
        decimal = chars - np.uint8(48)  # "0".."9" → 0..9, anything else wraps above 9
        letter = chars - np.uint8(97)  # "a".."f" → 0..5
        is_decimal = decimal < 10
        ok = (
            np.char.startswith(heads, self.prefix)
            & (grid[:, self._seps] == _SEP).all(axis=1)
            & (is_decimal | (letter < 6)).all(axis=1)
        )
        digits = np.where(is_decimal, decimal, letter + np.uint8(10))
        sums = (digits @ self._weights).astype(np.int64)  # exact: every sum is below 2**53
        values = sums[:, :4]
        values[:, 3] += sums[:, 4] << 32
        sizes = np.fromiter(map(len, bodies), dtype=np.int64, count=len(bodies))
        foreign: list[int] = []
        if not ok.all():
            foreign = np.flatnonzero(~ok).tolist()
            values = values[ok]
            sizes = sizes[ok]
        return Identities(values[:, 0], values[:, 1], values[:, 2], values[:, 3], foreign, sizes)


def message_pool(count: int, size: int, seed: int | None = None) -> list[bytes]:
    """``count`` random ASCII payloads of exactly ``size`` bytes."""
    rng = random.Random(seed)
    return [bytes(rng.choices(_ALPHABET, k=size)) for _ in range(count)]


def sized_pool(sizes: Sequence[int], seed: int | None = None) -> list[bytes]:
    """Random ASCII payloads of exactly these sizes, in order (numpy draws the bytes: a
    pool of large payloads is made in a moment)."""
    rng = np.random.default_rng(seed)
    alphabet = np.frombuffer(_ALPHABET, dtype=np.uint8)
    return [alphabet[rng.integers(0, len(alphabet), size)].tobytes() for size in sizes]


#: The largest pool :func:`pool_rows` copies into an array (the copy is kept beside it).
POOL_ROWS_MAX = 64 * 2**20


def pool_rows(pool: list[bytes], size: int | None) -> np.ndarray | None:
    """The pool as an array, a payload a row, when every payload has ``size`` bytes (a
    load of one message size) and the pool is at most :data:`POOL_ROWS_MAX` bytes: a large
    batch is then taken from it as rows (:func:`take_rows`), with no list of payloads in
    between. Else None (large messages: the copy would cost memory, and per-message work
    is small beside their bytes)."""
    if size is None or not pool or len(pool) * size > POOL_ROWS_MAX:
        return None
    if any(len(p) != size for p in pool):
        return None
    return np.frombuffer(b"".join(pool), np.uint8).reshape(len(pool), size)


def take_rows(rows: np.ndarray, start: int, count: int) -> np.ndarray:
    """:func:`take` of a pool given as rows (:func:`pool_rows`): a new array of them."""
    end = start + count
    if end <= len(rows):
        return rows[start:end].copy()
    return rows[np.arange(start, end) % len(rows)]


def take(pool: list[bytes], start: int, count: int) -> list[bytes]:
    """``count`` consecutive payloads of ``pool`` from ``start``, wrapping around its end.

    A batch's payloads: the pool's payloads (and sizes) are independent draws, so a run of
    them from a random place is as random as picking each one at random — at one random
    number per batch instead of one per message."""
    if start + count <= len(pool):
        return pool[start : start + count]
    out = pool[start:]
    while len(out) < count:
        out += pool[: count - len(out)]
    return out


def payload_pool(load: LoadSection, seed: int | None = None) -> list[bytes]:
    """A sender process's payloads: ``load.pool_size`` of them, of sizes drawn from
    ``load.message_size`` (all of one size when it is fixed); messages take the sizes of
    the payloads they are picked from."""
    sizes = load.message_size
    if sizes.fixed is not None:
        return message_pool(load.pool_size, sizes.fixed, seed)
    return sized_pool(sizes.draw(load.pool_size, seed), seed)
