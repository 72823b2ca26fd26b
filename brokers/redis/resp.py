"""Redis's wire protocol (RESP2) on a socket of our own: commands encoded here
(:func:`pack`, :func:`pack_with_ids`), replies parsed by hiredis's public reader
(``hiredis.Reader``: ``feed`` and ``gets``), one TCP connection per
:class:`RespConnection`.

The sending and receiving connections of a worker against one master are these, not
redis-py's: redis-py's public API offers no socket to write arrays on, wait on with a
receive low-water mark or read replies off without a Python object each, and reaching
into its private parts broke with its releases (issue #43). redis-py still serves what
runs once (prepare, describe) and Redis Cluster, through its public API.

The socket blocks, with the kernel's send and receive timeouts (``SO_SNDTIMEO``,
``SO_RCVTIMEO``) rather than Python's: a Python socket with a timeout polls before every
send and receive, a system call more per batch.
"""

from __future__ import annotations

import itertools
import select
import socket
import struct
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import hiredis

from brokers.errors import BrokerConnectionError

#: Socket send and receive timeout: a write that moves nothing, or a read that gets
#: nothing, for this long fails.
IO_TIMEOUT = 30.0
#: How long connecting may take.
CONNECT_TIMEOUT = 10.0
#: Bytes read from the socket at once.
RECEIVE_BYTES = 1 << 18


class ReplyError(Exception):
    """A server's error reply (``-ERR …``, ``-WRONGTYPE …``): returned as the command's
    reply, not raised, so that the replies after it are still read."""


class ProtocolError(Exception):
    """Bytes that are not RESP: the connection cannot go on."""


def pack(*args: bytes | int) -> bytes:
    """One command in RESP: an array of bulk strings."""
    items = [a if isinstance(a, bytes) else str(a).encode() for a in args]
    return b"*%d\r\n" % len(items) + b"".join(b"$%d\r\n%s\r\n" % (len(i), i) for i in items)


def one_length(items: Sequence[bytes]) -> int | None:
    """The length every item has, or None when they differ or there are none."""
    size = len(items[0]) if items else None
    return size if size is not None and list(map(len, items)).count(size) == len(items) else None


def pack_with_ids(head: Sequence[bytes], ids: Sequence[bytes]) -> bytes:
    """``pack(*head, *ids)`` for a long list of entry ids (XACK, XDEL): ids of one length
    are joined in one call, not encoded one by one (their order does not matter to these
    commands)."""
    parts = [b"*%d\r\n" % (len(head) + len(ids))]
    parts += [b"$%d\r\n%s\r\n" % (len(item), item) for item in head]
    size = one_length(ids)
    if size is not None:  # the usual case: no sorting needed
        prefix = b"$%d\r\n" % size
        return b"".join([*parts, prefix, (b"\r\n" + prefix).join(ids), b"\r\n"])
    for size, group in itertools.groupby(sorted(ids, key=len), len):
        prefix = b"$%d\r\n" % size
        parts += [prefix, (b"\r\n" + prefix).join(group), b"\r\n"]
    return b"".join(parts)


@dataclass(frozen=True)
class Server:
    """Where a connection goes, and the user it authenticates as (``AUTH``)."""

    host: str
    port: int
    username: str | None = None
    password: str | None = field(default=None, repr=False)

    @property
    def where(self) -> str:
        return f"{self.host}:{self.port}"


def _timeval(seconds: float) -> bytes:
    whole = int(seconds)
    return struct.pack("ll", whole, int((seconds - whole) * 1e6))


class RespConnection:
    """One connection to a Redis server, connected on first use and again after
    :meth:`close`. Replies are read in order: :meth:`read_reply` parses one with hiredis;
    a caller that counts them itself (:class:`~brokers.redis.protocol.SendChannel`) reads
    the raw bytes with :meth:`recv`, waiting with :meth:`wait` at the receive low-water mark
    :meth:`mark` sets.

    Every failure raises :class:`BrokerConnectionError` naming the server; the connection
    is then in an unknown state, and its user closes it.
    """

    def __init__(self, server: Server, timeout: float = IO_TIMEOUT) -> None:
        self.server = server
        #: The socket's send and receive timeout (seconds).
        self.timeout = timeout
        self.sock: socket.socket | None = None
        #: The socket's receive low-water mark (bytes).
        self.lowat = 1
        self.poller: Any = None
        self.reader: Any = None
        #: A reply :meth:`can_read` took from the reader before it was asked for.
        self.ahead: Any = False
        self.buffer = bytearray(RECEIVE_BYTES)

    def connect(self) -> socket.socket:
        """The socket, connected and authenticated first if it is not."""
        if self.sock is not None:
            return self.sock
        where = self.server.where
        try:
            sock = socket.create_connection(
                (self.server.host, self.server.port), timeout=CONNECT_TIMEOUT
            )
        except OSError as exc:
            raise BrokerConnectionError(f"cannot reach Redis at {where}: {exc}") from None
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.settimeout(None)  # blocking; the kernel's timeouts below bound each call
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDTIMEO, _timeval(self.timeout))
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVTIMEO, _timeval(self.timeout))
        self.sock, self.lowat, self.ahead = sock, 1, False
        self.reader = hiredis.Reader(protocolError=ProtocolError, replyError=ReplyError)
        self.poller = select.poll()  # (select cannot wait on descriptors past 1023)
        self.poller.register(sock, select.POLLIN)
        try:
            self._authenticate()
        except BaseException:
            self.close()
            raise
        return sock

    def _authenticate(self) -> None:
        password, username = self.server.password, self.server.username
        if not password:
            return
        reply = self.call(b"AUTH", *([username.encode()] if username else []), password.encode())
        if isinstance(reply, ReplyError):
            raise BrokerConnectionError(f"Redis {self.server.where}: AUTH refused: {reply}")

    def call(self, *command: bytes | int) -> Any:
        """One command, its reply (an error reply returned as a :class:`ReplyError`); only
        when no other reply is due."""
        self.send([pack(*command)])
        return self.read_reply()

    def send(self, parts: Sequence[Any]) -> None:
        """Write bytes-like ``parts``, blocking; a write that moves nothing for
        :attr:`timeout` seconds (a server that stopped reading) fails."""
        sock = self.connect()
        try:
            for part in parts:
                sock.sendall(part)
        except BlockingIOError:
            raise BrokerConnectionError(
                f"Redis {self.server.where}: nothing written for {self.timeout:g} s "
                "(the server reads no more)"
            ) from None
        except OSError as exc:
            raise BrokerConnectionError(f"Redis {self.server.where}: {exc}") from None

    def read_reply(self) -> Any:
        """The next reply, read off the socket as far as it takes (blocking)."""
        reply, self.ahead = self.ahead, False
        if reply is False:  # (RESP2 has no boolean reply: False is hiredis's "not yet")
            reader = self._reader()
            reply = reader.gets()
            while reply is False:
                self._fill()
                reply = reader.gets()
        return reply

    def can_read(self, timeout: float) -> bool:
        """Whether a reply, or part of one, is there to read within ``timeout`` seconds."""
        if self.ahead is False:
            self.ahead = self._reader().gets()
            if self.ahead is False:
                if not self.wait(timeout):
                    return False
                self._fill()
        return True

    def _reader(self) -> Any:
        if self.reader is None:
            raise self._not_connected()
        return self.reader

    def _fill(self) -> None:
        """Feed the reader what the socket holds (waiting for at least a byte)."""
        if self.sock is None:
            raise self._not_connected()
        try:
            count = self.sock.recv_into(self.buffer)
        except OSError as exc:
            raise self._read_failure(exc) from None
        if not count:
            raise self._read_failure(None)
        self.reader.feed(self.buffer, 0, count)

    def recv(self) -> bytes:
        """The bytes the socket holds, up to :data:`RECEIVE_BYTES` (waiting for at least
        one, or for the low-water mark's)."""
        if self.sock is None:
            raise self._not_connected()
        try:
            data = self.sock.recv(RECEIVE_BYTES)
        except OSError as exc:
            raise self._read_failure(exc) from None
        if not data:
            raise self._read_failure(None)
        return data

    def _read_failure(self, exc: OSError | None) -> BrokerConnectionError:
        """What a read that failed with ``exc`` (None: the server closed) raises."""
        if exc is None:
            what = "connection closed by the server"
        elif isinstance(exc, BlockingIOError):  # SO_RCVTIMEO ran out
            what = f"no reply within {self.timeout:g} s"
        else:
            what = str(exc)
        return BrokerConnectionError(f"Redis {self.server.where}: {what}")

    def _not_connected(self) -> BrokerConnectionError:
        return BrokerConnectionError(f"Redis {self.server.where}: not connected")

    def wait(self, timeout: float) -> bool:
        """Whether the socket holds bytes to read — at least the low-water mark's — within
        ``timeout`` seconds."""
        if self.poller is None:
            raise self._not_connected()
        return bool(self.poller.poll(timeout * 1000))

    def mark(self, lowat: int) -> None:
        """Set the socket's receive low-water mark (``SO_RCVLOWAT``): a wait and a read
        wake once that many bytes are there."""
        if lowat != self.lowat and self.sock is not None:
            self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVLOWAT, lowat)
            self.lowat = lowat

    def close(self) -> None:
        """Close the socket (the next use connects again); replies not read are lost."""
        sock, self.sock = self.sock, None
        self.reader = self.poller = None
        self.ahead, self.lowat = False, 1
        if sock is not None:
            sock.close()
