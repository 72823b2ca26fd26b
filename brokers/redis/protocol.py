"""Redis's wire protocol as the sending and acknowledging connections use it: commands
written in groups on one connection and their replies read later, in order
(:class:`ReplyChannel`; on the sending connection, :class:`SendChannel` counts the XADDs'
replies with :class:`ReplyTally` instead of parsing each). Both write and read a
:class:`~brokers.redis.resp.RespConnection`: a socket of our own, replies parsed by
``hiredis.Reader``.
"""

from __future__ import annotations

import time
from collections import deque
from typing import Any

from brokers.base import Confirmation
from brokers.errors import BrokerConnectionError, BrokerError
from brokers.redis.resp import ReplyError, RespConnection, pack

#: How long a written batch may wait for its replies.
REPLY_TIMEOUT = 30.0

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


class ReplyChannel:
    """One connection on which commands are written in groups and replies read later.

    Redis answers in order, so the replies of the oldest group come first; reading the
    replies of a group reads those of every group written before it. A lost connection
    fails every group still waiting (the next write reconnects).
    """

    def __init__(self, connection: RespConnection) -> None:
        self.connection = connection
        self.waiting: deque[Written] = deque()

    def write_packed(self, packed: Any, count: int, replicas: int = 0) -> Written:
        """Write ``count`` commands already in RESP (bytes-like, or a list of bytes-like
        parts), the last a WAIT for ``replicas`` if that is > 0."""
        try:
            self.connection.send(packed if isinstance(packed, list) else [packed])
        except BaseException as exc:
            self._fail_all(exc)
            raise
        written = Written(self, count, replicas)
        self.waiting.append(written)
        return written

    def call(self, *command: bytes | int) -> Any:
        """One command and its reply (after the replies of everything written before it)."""
        return self.call_packed(pack(*command))

    def call_packed(self, packed: Any) -> Any:
        """:meth:`call` of a command already in RESP."""
        written = self.write_packed(packed, 1)
        self.settle(written, None)
        return written.reply

    def settle(self, written: Written, timeout: float | None) -> int | None:
        """Read replies until ``written`` is answered; ``timeout`` None blocks (up to the
        socket's timeout).

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
                        raise self._no_reply()
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
        return self.connection.can_read(timeout)

    def _read_group(self, head: Written) -> Any:
        """Read the rest of ``head``'s replies; its last one. A failed command's error is
        kept as ``head.error`` (its group fails; the replies after it are still read).

        Each reply is one call into hiredis's reader once the socket's bytes are in."""
        read = self.connection.read_reply
        reply: Any = None
        while head.left:
            reply = read()
            if isinstance(reply, ReplyError):
                head.error = head.error or BrokerError(f"Redis: {reply}")
            head.left -= 1
        return reply

    def _no_reply(self) -> BrokerConnectionError:
        where = self.connection.server.where
        return BrokerConnectionError(f"Redis {where}: no reply within {REPLY_TIMEOUT:.0f} s")

    def _fail_all(self, exc: BaseException) -> None:
        """The connection is in an unknown state: drop it and fail what waits on it."""
        if isinstance(exc, BrokerConnectionError):  # (it names the server)
            message = str(exc)
        else:
            where = self.connection.server.where
            message = f"Redis {where}: {type(exc).__name__} {exc}"
        for written in self.waiting:
            written.error = BrokerConnectionError(message)
        self.waiting.clear()
        self.connection.close()


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
    for ``n`` bulk strings, ``(1, value)`` for an error (a
    :class:`~brokers.redis.resp.ReplyError`) or an integer; it leaves an incomplete reply in
    the buffer for the next :meth:`feed`.
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
                out.append((1, ReplyError(text.decode(errors="replace"))))
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
    about 11 µs of CPU each. A wait for a group's replies therefore sets the socket's
    receive low-water mark (``SO_RCVLOWAT``) to the fewest bytes they can take, so the
    kernel wakes the sender once they can all be there; should they be shorter than that
    (an error reply), the mark drops back to one byte after :data:`LOWAT_WAIT`.

    The connection's socket blocks (``SO_SNDTIMEO``: a server that stopped reading fails
    the write after the connection's timeout); this class polls it only to wait for
    replies.
    """

    def __init__(self, connection: RespConnection) -> None:
        super().__init__(connection)
        self.tally = ReplyTally()

    def _can_read(self, timeout: float) -> bool:
        if self.tally.pending():
            return True
        return self._wait(self.waiting[0], timeout)

    def _read_group(self, head: Written) -> Any:
        while head.left:
            replies = self.tally.take()
            if not replies:
                if not self._wait(head, REPLY_TIMEOUT):
                    raise self._no_reply()
                self.tally.feed(self.connection.recv())
                continue
            for count, value in replies:
                self._credit(count, value)
        return head.reply

    def _wait(self, head: Written, timeout: float) -> bool:
        """Whether bytes of ``head``'s replies are there to read within ``timeout`` s:
        first (for at most :data:`LOWAT_WAIT`) as many as its replies take at the least,
        then any."""
        connection = self.connection
        want = min(fewest_reply_bytes(head.left, head.replicas), LOWAT_MAX)
        want -= len(self.tally.buffer)
        if want > LOWAT_FROM:
            connection.mark(want)
            first = min(timeout, LOWAT_WAIT)
            if connection.wait(first):
                return True
            timeout -= first
        connection.mark(1)
        return connection.wait(timeout)

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
                if isinstance(value, ReplyError):
                    group.error = group.error or BrokerError(f"Redis: {value}")
                group.reply = value
        if count:
            raise BrokerError(f"Redis: {count} replies more than commands written")

    def _fail_all(self, exc: BaseException) -> None:
        self.tally = ReplyTally()
        super()._fail_all(exc)
