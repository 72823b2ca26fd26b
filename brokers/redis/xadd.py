"""A batch's XADDs encoded in RESP at once, as redis-py would encode them
(:class:`XaddPacker`), and the stream a message key goes to (:func:`stream_of`)."""

from __future__ import annotations

import zlib
from collections.abc import Sequence

import numpy as np

from brokers.batches import RowsBatch
from brokers.redis.resp import one_length, pack

#: The field each entry holds its message in.
FIELD = b"m"
_CRLF = np.frombuffer(b"\r\n", np.uint8)


class XaddPacker:
    """``XADD <key> * m <body>`` for each body of a batch, in RESP, as one bytes object;
    the keys take turns message by message (the turn carries over to the next batch), or,
    for messages with keys of their own (:meth:`pack_keyed`), each message goes to the
    stream of its key (:func:`stream_of`)."""

    def __init__(self, keys: Sequence[bytes]) -> None:
        #: Each key's command up to the body's length.
        self.by_stream = [
            pack(b"XADD", key, b"*", FIELD, b"")[: -len(b"$0\r\n\r\n")] for key in keys
        ]
        #: The stream the next batch's first message goes to.
        self.turn = 0
        self._templates: dict[tuple[int, int], np.ndarray] = {}

    def pack_keyed(self, bodies: Sequence[bytes], keys: Sequence[bytes]) -> bytes:
        """Each body to the stream its message key names."""
        heads, streams = self.by_stream, len(self.by_stream)
        return b"".join(
            [
                part
                for body, key in zip(bodies, keys, strict=True)
                for part in (heads[stream_of(key, streams)], b"$%d\r\n" % len(body), body, b"\r\n")
            ]
        )

    def pack(self, bodies: Sequence[bytes]) -> bytes:
        """Message ``i`` of the batch goes to stream ``turn + i`` (modulo the streams).

        Bodies of one size (the usual case) are packed stream by stream, each stream's
        commands by one ``join`` — no Python work per message: each stream gets its
        messages in their order, and the order between streams does not matter. Else
        message by message, in order."""
        heads, streams, turn, n = self.by_stream, len(self.by_stream), self.turn, len(bodies)
        self.turn = (turn + n) % streams
        if not n:
            return b""
        size = one_length(bodies)
        if size is not None:
            length = b"$%d\r\n" % size
            parts: list[bytes] = []
            for j in range(min(streams, n)):
                command = heads[(turn + j) % streams] + length
                parts += [command, (b"\r\n" + command).join(bodies[j::streams]), b"\r\n"]
            return b"".join(parts)
        return b"".join(
            [
                part
                for i, body in enumerate(bodies)
                for part in (heads[(turn + i) % streams], b"$%d\r\n" % len(body), body, b"\r\n")
            ]
        )

    def pack_rows(self, batch: RowsBatch) -> np.ndarray:
        """:meth:`pack` of a batch given as one array, into one array of bytes, stream by
        stream as :meth:`pack` packs bodies of one size: each stream's commands are a
        block whose rows are the command's head, a message and its line end, written
        column by column — no Python object per message."""
        streams, turn, rows = len(self.by_stream), self.turn, batch.rows
        n, size = rows.shape
        self.turn = (turn + n) % streams
        if not n:
            return np.empty(0, np.uint8)
        blocks = []
        for j in range(min(streams, n)):
            count = len(range(j, n, streams))
            template = self._template((turn + j) % streams, size, count)
            block = template[:count]
            block[:, -2 - size : -2] = rows[j::streams]
            blocks.append(block)
        return blocks[0].ravel() if len(blocks) == 1 else np.concatenate(blocks, axis=None)

    def _template(self, stream: int, size: int, count: int) -> np.ndarray:
        """Rows of ``stream``'s command for bodies of ``size`` bytes — its head and line
        end written, the body's place left — at least ``count`` of them. Kept and reused:
        a batch's commands are written (copied into the socket) before the next is packed."""
        template = self._templates.get((stream, size))
        if template is None or len(template) < count:
            head = self.by_stream[stream] + b"$%d\r\n" % size
            template = np.empty((max(count, 1024), len(head) + size + 2), np.uint8)
            template[:, : len(head)] = np.frombuffer(head, np.uint8)
            template[:, -2:] = _CRLF
            self._templates[(stream, size)] = template
        return template


def stream_of(key: bytes, streams: int) -> int:
    """The stream (of ``streams``) every message of one message key goes to: a fixed hash
    of the key, so that one key's messages are in one stream, in the order they were
    added (docs/measurement.md §2, keys)."""
    return zlib.crc32(key) % streams
