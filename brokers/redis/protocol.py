"""Redis's wire protocol as the sending and acknowledging connections use it: commands
written in groups on one connection and their replies read later, in order
(:class:`ReplyChannel`; on the sending connection, :class:`SendChannel` counts the XADDs'
replies with :class:`ReplyTally` instead of parsing each), and a batch's XADDs encoded in
RESP at once (:class:`XaddPacker`), as redis-py would encode them.
"""

from __future__ import annotations

import itertools
import select
import socket
import struct
import time
import zlib
from collections import deque
from collections.abc import Sequence
from typing import Any

import numpy as np
import redis
from redis._parsers.hiredis import NOT_ENOUGH_DATA, _HiredisParser

from brokers.base import Confirmation
from brokers.batches import RowsBatch
from brokers.errors import BrokerConnectionError, BrokerError

#: What redis-py's hiredis reader returns while a reply is not complete yet.
_MORE = NOT_ENOUGH_DATA

FIELD = b"m"
#: Socket timeout, and how long a written batch may wait for its replies.
REPLY_TIMEOUT = 30.0
#: Bytes read from the socket at once by :class:`SendChannel`.
RECEIVE_BYTES = 1 << 18
_CRLF = np.frombuffer(b"\r\n", np.uint8)
#: The fewest bytes an XADD's reply takes: ``$15\r\n<ms>-<seq>\r\n`` — an entry id made
#: by ``*`` has 13 digits of milliseconds (until the year 2286) and a sequence digit.
XADD_REPLY_MIN = len(b"$15\r\n") + 15 + 2
#: The fewest bytes WAIT's reply takes: ``:0\r\n``.
WAIT_REPLY_MIN = len(b":0\r\n")
#: The fewest reply bytes :class:`SendChannel` sets a low-water mark for: the server reads
#: commands 16 KB at a time and answers what it read in one write, so the replies of fewer
#: than about 90 XADDs of 100 bytes come in one part anyway.
LOWAT_FROM = 2048
#: The highest receive low-water mark :class:`SendChannel` sets.
LOWAT_MAX = 1 << 16
#: How long :class:`SendChannel` waits for the fewest bytes a group's replies take before
#: it reads what there is (replies shorter than counted on: an error).
LOWAT_WAIT = 0.05


def fewest_reply_bytes(commands: int, replicas: int) -> int:
    """The fewest bytes the replies of ``commands`` XADDs take — the last of them a WAIT
    when ``replicas`` > 0 — if none fails."""
    if replicas and commands:
        return (commands - 1) * XADD_REPLY_MIN + WAIT_REPLY_MIN
    return commands * XADD_REPLY_MIN


def _replicas_failure(confirmed: int, wanted: int) -> BrokerError:
    return BrokerError(f"WAIT: only {confirmed} of {wanted} replicas confirmed")


class Written(Confirmation):
    """Commands written on a :class:`ReplyChannel` whose replies are not all read yet."""

    __slots__ = ("channel", "commands", "deadline", "done_ns", "error", "left", "replicas", "reply")

    def __init__(self, channel: ReplyChannel, commands: int, replicas: int) -> None:
        self.channel = channel
        self.commands = commands
        self.left = commands
        #: When the last command is a WAIT: the replicas it must report.
        self.replicas = replicas
        self.deadline = time.monotonic() + REPLY_TIMEOUT
        self.reply: Any = None  # the last command's reply
        self.error: BaseException | None = None
        self.done_ns: int | None = None

    def wait(self, timeout: float) -> int | None:
        return self.channel.settle(self, timeout)


def pack(*args: bytes | int) -> bytes:
    """One command in RESP: an array of bulk strings."""
    items = [a if isinstance(a, bytes) else str(a).encode() for a in args]
    return b"*%d\r\n" % len(items) + b"".join(b"$%d\r\n%s\r\n" % (len(i), i) for i in items)


def _one_length(items: Sequence[bytes]) -> int | None:
    """The length every item has, or None when they differ or there are none."""
    size = len(items[0]) if items else None
    return size if size is not None and list(map(len, items)).count(size) == len(items) else None


def pack_with_ids(head: Sequence[bytes], ids: Sequence[bytes]) -> bytes:
    """``pack(*head, *ids)`` for a long list of entry ids (XACK, XDEL): ids of one length
    are joined in one call, not encoded one by one (their order does not matter to these
    commands)."""
    parts = [b"*%d\r\n" % (len(head) + len(ids))]
    parts += [b"$%d\r\n%s\r\n" % (len(item), item) for item in head]
    size = _one_length(ids)
    if size is not None:  # the usual case: no sorting needed
        prefix = b"$%d\r\n" % size
        return b"".join([*parts, prefix, (b"\r\n" + prefix).join(ids), b"\r\n"])
    for size, group in itertools.groupby(sorted(ids, key=len), len):
        prefix = b"$%d\r\n" % size
        parts += [prefix, (b"\r\n" + prefix).join(group), b"\r\n"]
    return b"".join(parts)


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
        size = _one_length(bodies)
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


class ReplyChannel:
    """One connection on which commands are written in groups and replies read later.

    Redis answers in order, so the replies of the oldest group come first; reading the
    replies of a group reads those of every group written before it. A lost connection
    fails every group still waiting (the next write reconnects).
    """

    def __init__(self, client: redis.Redis) -> None:
        self.connection: Any = client.connection_pool.get_connection()
        self.waiting: deque[Written] = deque()

    def write_packed(self, packed: Any, count: int, replicas: int = 0) -> Written:
        """Write ``count`` commands already in RESP (bytes-like, or a list of bytes-like
        parts), the last a WAIT for ``replicas`` if that is > 0."""
        try:
            self._send(packed if isinstance(packed, list) else [packed])
        except BaseException as exc:
            self._fail_all(exc)
            raise
        written = Written(self, count, replicas)
        self.waiting.append(written)
        return written

    def _send(self, parts: list[Any]) -> None:
        self.connection.send_packed_command(parts)

    def call(self, *command: Any) -> Any:
        """One command and its reply (after the replies of everything written before it)."""
        return self.call_packed(self.connection.pack_commands((command,)))

    def call_packed(self, packed: Any) -> Any:
        """:meth:`call` of a command already in RESP."""
        written = self.write_packed(packed, 1)
        self.settle(written, None)
        return written.reply

    def settle(self, written: Written, timeout: float | None) -> int | None:
        """Read replies until ``written`` is answered; ``timeout`` None blocks (socket timeout).

        Returns the time its last reply was read, or None when ``timeout`` ran out first;
        raises when a command of it failed or the connection was lost.
        """
        waiting = self.waiting
        deadline = None if timeout is None else time.monotonic() + timeout
        while written.done_ns is None:
            if written.error is not None:
                raise written.error
            head = waiting[0]
            try:
                # Wait (bounded) only for a group's first reply: the rest of the group
                # follows it, so they are read as they come.
                if (
                    deadline is not None
                    and head.left == head.commands
                    and not self._can_read(max(0.0, deadline - time.monotonic()))
                ):
                    if time.monotonic() > head.deadline:
                        raise redis.TimeoutError(f"no reply within {REPLY_TIMEOUT:.0f} s")
                    return None
                reply = self._read_group(head)
            except BaseException as exc:
                self._fail_all(exc)
                if not isinstance(exc, Exception):
                    raise  # an interrupt goes on; the batches waiting have failed
                continue
            waiting.popleft()
            head.reply = reply
            if head.replicas and head.error is None and reply < head.replicas:
                head.error = _replicas_failure(reply, head.replicas)
            if head.error is None:
                head.done_ns = time.time_ns()
        return written.done_ns

    def _can_read(self, timeout: float) -> bool:
        """Whether a reply (or part of one) is there to read within ``timeout`` seconds."""
        return bool(self.connection.can_read(timeout))

    def _read_group(self, head: Written) -> Any:
        """Read the rest of ``head``'s replies; its last one. A failed command's error is
        kept as ``head.error`` (its group fails; the replies after it are still read).

        With redis-py's hiredis parser each reply is one call into the reader once the
        socket's bytes are in (redis-py's read_response costs microseconds a reply, which
        a batch of small messages pays per message); else read_response.
        """
        parser = self.connection._parser
        reader = getattr(parser, "_reader", None) if isinstance(parser, _HiredisParser) else None
        reply: Any = None
        while head.left:
            if reader is None:
                try:
                    reply = self.connection.read_response()
                except redis.ResponseError as exc:
                    reply = exc
            else:
                reply = reader.gets()
                while reply is _MORE:
                    parser.read_from_socket()  # raises when the connection is lost
                    reply = reader.gets()
            if isinstance(reply, redis.ResponseError):
                head.error = head.error or BrokerError(f"Redis: {reply}")
            head.left -= 1
        return reply

    def _where(self) -> str:
        return f"{self.connection.host}:{self.connection.port}"

    def _fail_all(self, exc: BaseException) -> None:
        """The connection is in an unknown state: drop it and fail what waits on it."""
        where = self._where()
        for written in self.waiting:
            written.error = BrokerConnectionError(f"Redis {where}: {type(exc).__name__} {exc}")
        self.waiting.clear()
        self.connection.disconnect()


#: The first bytes of the RESP2 replies :class:`ReplyTally` tells apart.
_ERROR, _INTEGER, _BULK = ord("-"), ord(":"), ord("$")
#: Every byte of XADD replies (bulk strings of entry ids, ``<ms>-<seq>``).
_BULK_ONLY = b"0123456789$-\r\n"


class ReplyTally:
    """Counts RESP2 replies in the bytes of a connection as they arrive, without making a
    Python object of each: the replies of XADDs — bulk strings ``$<n>\\r\\n<entry id>\\r\\n``,
    two lines each, whose ids hold no line break — are counted by counting lines; an error
    or integer reply (a failed command, WAIT's count) is read on its own.

    :meth:`take` yields what the complete replies in the buffer are, in order: ``(n, None)``
    for ``n`` bulk strings, ``(1, value)`` for an error (a ``redis.ResponseError``) or an
    integer; it leaves an incomplete reply in the buffer for the next :meth:`feed`.
    """

    __slots__ = ("buffer",)

    def __init__(self) -> None:
        self.buffer = b""

    def feed(self, data: bytes) -> None:
        self.buffer = self.buffer + data if self.buffer else data

    def pending(self) -> bool:
        """Whether (part of) a reply is in the buffer, not taken yet."""
        return bool(self.buffer)

    def take(self) -> list[tuple[int, Any]]:
        buf = self.buffer
        last = buf.rfind(b"\r\n")
        if last < 0:
            return []
        if buf.translate(None, _BULK_ONLY):
            return self._take_parsed()  # an error or an integer is among them
        # Entry ids only: the replies up to the last complete one are counted by their '$'.
        before = buf.rfind(b"\r\n", 0, last)
        start = before + 2 if before >= 0 else 0  # the last complete line's
        cut = start if buf[start] == _BULK else last + 2  # (a head whose id is still coming)
        count = buf.count(b"$", 0, cut)
        self.buffer = buf[cut:]
        return [(count, None)] if count else []

    def _take_parsed(self) -> list[tuple[int, Any]]:
        """:meth:`take` line by line: bulk strings counted up to each error or integer."""
        buf, pos = self.buffer, 0
        out: list[tuple[int, Any]] = []
        while pos < len(buf):
            special = self._next_special(buf, pos)
            if special != pos:  # bulk strings up to the next error or integer, or the end
                upto = len(buf) if special < 0 else special
                lines = buf.count(b"\r\n", pos, upto)
                if lines >= 2:
                    out.append((lines // 2, None))
                if special >= 0:
                    if lines % 2:
                        raise BrokerError("Redis: a reply began inside another")
                    pos = special
                    continue
                if lines:
                    last = buf.rfind(b"\r\n", pos)
                    if lines % 2:  # the last line is the head of a bulk string still coming
                        last = buf.rfind(b"\r\n", pos, last)
                    pos = last + 2 if last >= 0 else pos
                break
            line_end = buf.find(b"\r\n", pos)
            if line_end < 0:
                break
            text = buf[pos + 1 : line_end]
            if buf[pos] == _ERROR:
                out.append((1, redis.ResponseError(text.decode(errors="replace"))))
            else:
                out.append((1, int(text)))
            pos = line_end + 2
        self.buffer = buf[pos:]
        return out

    @staticmethod
    def _next_special(buf: bytes, pos: int) -> int:
        """Where the first error or integer reply at or after ``pos`` starts (-1: none)."""
        if buf[pos] in (_ERROR, _INTEGER):
            return pos
        found = [i + 1 for i in (buf.find(b"\n-", pos), buf.find(b"\n:", pos)) if i >= 0]
        return min(found) if found else -1


class SendChannel(ReplyChannel):
    """The sending connection: only XADDs (and WAITs) are written on it, and their
    replies are counted off the socket (:class:`ReplyTally`) rather than parsed one by
    one — reading replies was the largest part of a sender's CPU per message.

    The server writes a group's replies in parts (one per read of the commands); waiting
    for each part woke the sender three or four times per batch of a few hundred, at
    about 11 µs of CPU per wake. A wait for a group's replies therefore sets the socket's
    receive low-water mark (``SO_RCVLOWAT``) to the fewest bytes they can take, so the
    kernel wakes the sender once they can all be there; should they be shorter than that
    (an error reply), the mark drops back to one byte after :data:`LOWAT_WAIT`.

    Its socket is written and read directly, blocking, with this class's own waits:
    redis-py's socket timeout made Python poll before every send and receive.
    """

    def __init__(self, client: redis.Redis, write_timeout: float = REPLY_TIMEOUT) -> None:
        super().__init__(client)
        self.write_timeout = write_timeout
        self.tally = ReplyTally()
        #: The socket the poller and the low-water mark below are of.
        self._sock: Any = None
        self._poller: Any = None
        self._lowat = 1

    def _can_read(self, timeout: float) -> bool:
        if self.tally.pending():
            return True
        return self._wait(self.waiting[0], timeout)

    def _read_group(self, head: Written) -> Any:
        while head.left:
            replies = self.tally.take()
            if not replies:
                if not self._wait(head, REPLY_TIMEOUT):
                    raise redis.TimeoutError(f"no reply within {REPLY_TIMEOUT:.0f} s")
                self._receive()
                continue
            for count, value in replies:
                self._credit(count, value)
        return head.reply

    def _send(self, parts: list[Any]) -> None:
        """Written on the socket itself, blocking: a socket with a timeout (redis-py's)
        polls before every send and receive, a system call more per batch. A write that
        moves nothing for ``write_timeout`` seconds (``SO_SNDTIMEO``: a server that
        stopped reading) fails."""
        sock = self._socket(connect=True)
        try:
            for part in parts:
                sock.sendall(part)
        except BlockingIOError:
            raise BrokerConnectionError(
                f"Redis {self._where()}: nothing written for {self.write_timeout:g} s "
                "(the server reads no more)"
            ) from None
        except OSError as exc:
            raise BrokerConnectionError(f"Redis {self._where()}: {exc}") from None

    def _socket(self, connect: bool = False) -> Any:
        """The connection's socket (connected first if ``connect``), set up once per
        connection: blocking with the write timeout, a poller of its own, its receive
        low-water mark at one byte."""
        sock = self.connection._sock
        if sock is None:
            if not connect:
                raise redis.ConnectionError("not connected")
            self.connection.connect()
            sock = self.connection._sock
        if sock is not self._sock:  # (re)connected: a new socket, its mark at one byte
            sock.settimeout(None)
            seconds = int(self.write_timeout)
            micros = int((self.write_timeout - seconds) * 1e6)
            sock.setsockopt(
                socket.SOL_SOCKET, socket.SO_SNDTIMEO, struct.pack("ll", seconds, micros)
            )
            self._sock, self._lowat = sock, 1
            self._poller = select.poll()  # (select cannot wait on descriptors past 1023)
            self._poller.register(sock, select.POLLIN)
        return sock

    def _wait(self, head: Written, timeout: float) -> bool:
        """Whether bytes of ``head``'s replies are there to read within ``timeout`` s:
        first (for at most :data:`LOWAT_WAIT`) as many as its replies take at the least,
        then any."""
        self._socket()
        want = min(fewest_reply_bytes(head.left, head.replicas), LOWAT_MAX)
        want -= len(self.tally.buffer)
        if want > LOWAT_FROM:
            self._mark(want)
            first = min(timeout, LOWAT_WAIT)
            if self._poller.poll(first * 1000):
                return True
            timeout -= first
        self._mark(1)
        return bool(self._poller.poll(timeout * 1000))

    def _mark(self, lowat: int) -> None:
        if lowat != self._lowat:
            self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, lowat)
            self._lowat = lowat

    def _receive(self) -> None:
        data = self._socket().recv(RECEIVE_BYTES)
        if not data:
            raise redis.ConnectionError("connection closed by the server")
        self.tally.feed(data)

    def _credit(self, count: int, value: Any) -> None:
        """``count`` replies, the last ``value``, to the oldest groups still waiting."""
        for group in self.waiting:
            if not count:
                return
            if not group.left:
                continue
            took = min(count, group.left)
            group.left -= took
            count -= took
            if not count:
                if isinstance(value, redis.ResponseError):
                    group.error = group.error or BrokerError(f"Redis: {value}")
                group.reply = value
        if count:
            raise BrokerError(f"Redis: {count} replies more than commands written")

    def _fail_all(self, exc: BaseException) -> None:
        self.tally = ReplyTally()
        super()._fail_all(exc)
