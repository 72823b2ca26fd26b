"""The Redis adapter's own connection (brokers/redis/resp.py) against a scripted server on
a local socket: authentication, replies however their bytes arrive, error replies, waits,
and each failure named with the server. No Redis server is started."""

from __future__ import annotations

import socket
import threading
from collections.abc import Callable, Iterator

import pytest

from brokers.errors import BrokerConnectionError
from brokers.redis.protocol import ReplyChannel
from brokers.redis.resp import ReplyError, RespConnection, Server, pack

#: What the scripted server does with a connection: read, write, sleep and close.
Script = Callable[[socket.socket], None]


@pytest.fixture
def serve() -> Iterator[Callable[[Script], Server]]:
    """``serve(script)``: a listening socket whose first connection runs ``script``."""
    listeners: list[socket.socket] = []
    threads: list[threading.Thread] = []

    def start(script: Script) -> Server:
        listener = socket.create_server(("127.0.0.1", 0))
        listeners.append(listener)

        def run() -> None:
            peer, _ = listener.accept()
            with peer:
                script(peer)

        threads.append(threading.Thread(target=run, daemon=True))
        threads[-1].start()
        return Server("127.0.0.1", listener.getsockname()[1], "default", "s3cret-pass")

    yield start
    for listener in listeners:
        listener.close()
    for thread in threads:
        thread.join(5)


def expect(peer: socket.socket, wanted: bytes) -> None:
    got = b""
    while len(got) < len(wanted):
        chunk = peer.recv(len(wanted) - len(got))
        assert chunk, f"closed after {got!r}, wanted {wanted!r}"
        got += chunk
    assert got == wanted


def test_a_connection_authenticates_then_reads_replies_however_they_arrive(serve) -> None:
    done = threading.Event()

    def script(peer: socket.socket) -> None:
        expect(peer, pack(b"AUTH", b"default", b"s3cret-pass"))
        peer.sendall(b"+OK\r\n")
        expect(peer, pack(b"XREADGROUP", b"x") + pack(b"XACK", b"k"))
        for part in (b"*1\r\n*2\r\n$1\r\nk\r\n*1", b"\r\n*2\r\n$3\r\n1-0\r\n*2\r\n$1\r\nm\r\n"):
            peer.sendall(part)
            done.wait(0.05)
        peer.sendall(b"$1\r\nx\r\n-NOGROUP no such group\r\n")
        done.wait(5)

    server = serve(script)
    connection = RespConnection(server)
    assert "s3cret" not in repr(server)
    connection.send([pack(b"XREADGROUP", b"x"), pack(b"XACK", b"k")])
    assert connection.read_reply() == [[b"k", [[b"1-0", [b"m", b"x"]]]]]
    error = connection.read_reply()
    assert isinstance(error, ReplyError) and str(error) == "NOGROUP no such group"
    assert not connection.can_read(0.05)
    done.set()
    connection.close()
    assert connection.sock is None


def test_a_refused_password_fails_the_connection_without_showing_it(serve) -> None:
    def script(peer: socket.socket) -> None:
        expect(peer, pack(b"AUTH", b"default", b"s3cret-pass"))
        peer.sendall(b"-WRONGPASS invalid username-password pair\r\n")

    server = serve(script)
    with pytest.raises(BrokerConnectionError) as raised:
        RespConnection(server).connect()
    message = str(raised.value)
    assert message.startswith(f"Redis {server.where}: AUTH refused: WRONGPASS")
    assert "s3cret" not in message


def test_a_server_that_is_not_there_is_named() -> None:
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
    with pytest.raises(BrokerConnectionError, match=rf"cannot reach Redis at 127.0.0.1:{port}"):
        RespConnection(Server("127.0.0.1", port)).connect()


def test_a_reply_that_does_not_come_fails_after_the_timeout(serve) -> None:
    done = threading.Event()

    def script(peer: socket.socket) -> None:
        expect(peer, pack(b"AUTH", b"default", b"s3cret-pass"))
        peer.sendall(b"+OK\r\n")
        done.wait(5)

    server = serve(script)
    connection = RespConnection(server, timeout=0.2)
    connection.send([pack(b"PING")])
    with pytest.raises(
        BrokerConnectionError, match=rf"Redis {server.where}: no reply within 0.2 s"
    ):
        connection.read_reply()
    done.set()


def test_a_closed_connection_fails_what_waits_and_the_next_write_reconnects(serve) -> None:
    def first(peer: socket.socket) -> None:
        expect(peer, pack(b"AUTH", b"default", b"s3cret-pass"))
        peer.sendall(b"+OK\r\n:1\r\n")  # one reply of two, then closed

    def second(peer: socket.socket) -> None:
        expect(peer, pack(b"AUTH", b"default", b"s3cret-pass"))
        peer.sendall(b"+OK\r\n")
        expect(peer, pack(b"PING"))
        peer.sendall(b"+PONG\r\n")

    server = serve(first)
    channel = ReplyChannel(RespConnection(server))
    written = channel.write_packed(pack(b"INCR", b"a") + pack(b"INCR", b"a"), 2)
    with pytest.raises(BrokerConnectionError, match="connection closed by the server"):
        channel.settle(written, None)
    assert channel.connection.sock is None and not channel.waiting
    # The same server address, a new listener: reconnecting goes where the server is.
    again = serve(second)
    channel.connection.server = again
    assert channel.call(b"PING") == b"PONG"
    channel.connection.close()
