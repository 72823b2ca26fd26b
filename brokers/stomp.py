"""A STOMP 1.2 worker client with confirmed sends and individual acks (stomp.py).

Used by ActiveMQ Artemis and ActiveMQ Classic, which differ only in the headers passed in
:class:`StompOptions`. The guarantees:

* ``send``: every SEND frame carries a ``receipt`` header and ``persistent:true``; the call
  returns only when the RECEIPT of every frame of the batch has arrived. Both brokers send
  a RECEIPT for a persistent message only after it is in their journal (Artemis: after
  the journal sync and, with replication, the backup's confirmation).
* ``receive``: one subscription with ``ack:client-individual`` and a bounded prefetch; the
  messages the broker pushed wait in a local queue until ``receive`` hands them out.
* ``ack``: one ACK frame per message, without waiting (a lost ack means a redelivery).
  Messages of a dropped connection come back from the broker to another consumer, so
  receipts of an earlier connection are never acked on a new one.

``stomp`` is imported lazily, so that the broker packages import without it.
"""

from __future__ import annotations

import contextlib
import itertools
import queue
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from brokers.base import Adapter, Received
from brokers.errors import BrokerConnectionError, BrokerError


@dataclass(frozen=True)
class StompOptions:
    """How one broker speaks STOMP: where, as whom, and with which headers."""

    hosts: tuple[tuple[str, int], ...]
    destination: str
    user: str = ""
    password: str = ""
    send_headers: dict[str, str] = field(default_factory=dict)
    subscribe_headers: dict[str, str] = field(default_factory=dict)
    send_timeout: float = 30.0
    connect_timeout: float = 20.0
    heartbeat_ms: int = 10_000


class StompFailure(BrokerError):
    """The broker refused a frame (ERROR) or a receipt did not come in time."""


def _import_stomp() -> Any:
    try:
        import stomp  # optional client library, imported when first used
    except ImportError:
        raise BrokerError(
            "the Python package stomp.py is not installed (pip install 'brokerbench[brokers]')"
        ) from None
    return stomp


def _where(hosts: Sequence[tuple[str, int]]) -> str:
    return ", ".join(f"{h}:{p}" for h, p in hosts)


class _Listener:
    """Receives the frames of one connection (on stomp.py's receiver thread)."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.pending: set[str] = set()
        self.error: str | None = None
        self.server = ""
        self.messages: queue.SimpleQueue[Any] = queue.SimpleQueue()

    # stomp.py listener interface -------------------------------------------------
    def on_connected(self, frame: Any) -> None:
        self.server = frame.headers.get("server", "")

    def on_receipt(self, frame: Any) -> None:
        with self.cond:
            self.pending.discard(frame.headers.get("receipt-id", ""))
            self.cond.notify_all()

    def on_error(self, frame: Any) -> None:
        message = frame.headers.get("message") or _text(frame.body).strip() or "ERROR frame"
        with self.cond:
            self.error = message.splitlines()[0]
            self.cond.notify_all()

    def on_disconnected(self) -> None:
        with self.cond:
            if self.error is None:
                self.error = "connection closed by the broker"
            self.cond.notify_all()

    def on_message(self, frame: Any) -> None:
        self.messages.put(frame)

    def __getattr__(self, name: str) -> Any:
        # The other callbacks (on_send, on_heartbeat, …) are not needed.
        if name.startswith("on_"):
            return lambda *args, **kwargs: None
        raise AttributeError(name)


def _text(body: Any) -> str:
    return body.decode(errors="replace") if isinstance(body, bytes) else str(body or "")


class StompConnection:
    """One STOMP connection and its listener; ``generation`` tells connections apart."""

    _generations = itertools.count()

    def __init__(self, options: StompOptions) -> None:
        stomp = _import_stomp()
        self.options = options
        self.generation = next(self._generations)
        self.listener = _Listener()
        beat = options.heartbeat_ms
        self.conn = stomp.Connection12(
            host_and_ports=list(options.hosts),
            prefer_localhost=False,
            try_loopback_connect=False,
            reconnect_attempts_max=1,
            reconnect_sleep_initial=0.2,
            timeout=options.connect_timeout,
            heartbeats=(beat, beat),
            auto_decode=False,
        )
        self.conn.set_listener("brokerbench", self.listener)
        try:
            self.conn.connect(
                username=options.user or None, passcode=options.password or None, wait=True
            )
        except Exception as exc:
            detail = self.listener.error or type(exc).__name__
            self._stop_transport()
            raise BrokerConnectionError(
                f"cannot connect to STOMP broker at {_where(options.hosts)}: {detail}"
            ) from None
        if self.listener.error:
            raise BrokerConnectionError(
                f"STOMP broker at {_where(options.hosts)} refused the connection: "
                f"{self.listener.error}"
            )

    @property
    def server(self) -> str:
        return self.listener.server

    @property
    def broken(self) -> str | None:
        return self.listener.error or (None if self.conn.is_connected() else "not connected")

    def send_confirmed(self, bodies: Sequence[bytes]) -> None:
        """SEND every body with a receipt; return when all receipts arrived."""
        listener = self.listener
        ids = [f"s{self.generation}-{uuid.uuid4().hex[:12]}-{i}" for i in range(len(bodies))]
        with listener.cond:
            listener.pending.update(ids)
        headers = self.options.send_headers
        try:
            for body, receipt in zip(bodies, ids, strict=True):
                self.conn.send(
                    self.options.destination, body, headers={**headers, "receipt": receipt}
                )
        except Exception as exc:
            raise StompFailure(f"send to {_where(self.options.hosts)} failed: {exc}") from None
        waiting = set(ids)
        deadline = time.monotonic() + self.options.send_timeout
        with listener.cond:
            while waiting & listener.pending:
                if listener.error:
                    listener.pending.difference_update(waiting)
                    raise StompFailure(
                        f"broker {_where(self.options.hosts)} did not confirm the batch: "
                        f"{listener.error}"
                    )
                left = deadline - time.monotonic()
                if left <= 0:
                    listener.pending.difference_update(waiting)
                    raise StompFailure(
                        f"no receipt from {_where(self.options.hosts)} within "
                        f"{self.options.send_timeout:.0f} s"
                    )
                listener.cond.wait(left)

    def subscribe(self, subscription_id: str) -> None:
        receipt = f"sub-{self.generation}-{subscription_id}"
        with self.listener.cond:
            self.listener.pending.add(receipt)
        self.conn.subscribe(
            self.options.destination,
            id=subscription_id,
            ack="client-individual",
            headers={**self.options.subscribe_headers, "receipt": receipt},
        )
        self._wait_receipt(receipt, "SUBSCRIBE")

    def unsubscribe(self, subscription_id: str) -> None:
        receipt = f"unsub-{self.generation}-{subscription_id}"
        with self.listener.cond:
            self.listener.pending.add(receipt)
        self.conn.unsubscribe(id=subscription_id, headers={"receipt": receipt})
        self._wait_receipt(receipt, "UNSUBSCRIBE")

    def _wait_receipt(self, receipt: str, what: str) -> None:
        listener = self.listener
        deadline = time.monotonic() + self.options.connect_timeout
        with listener.cond:
            while receipt in listener.pending:
                left = deadline - time.monotonic()
                if listener.error or left <= 0:
                    listener.pending.discard(receipt)
                    raise StompFailure(
                        f"{what} of {self.options.destination} on {_where(self.options.hosts)} "
                        f"failed: {listener.error or 'no receipt'}"
                    )
                listener.cond.wait(left)

    def ack(self, ack_id: str) -> None:
        self.conn.ack(ack_id)

    def close(self) -> None:
        """DISCONNECT with a receipt (so that every ACK sent before is processed), bounded."""
        if self.conn.is_connected() and not self.listener.error:
            done = threading.Thread(target=self._disconnect, daemon=True)
            done.start()
            done.join(5.0)
        self._stop_transport()

    def _disconnect(self) -> None:
        with contextlib.suppress(Exception):
            self.conn.disconnect(receipt=f"bye-{self.generation}")

    def _stop_transport(self) -> None:
        with contextlib.suppress(Exception):
            self.conn.transport.disconnect_socket()


#: A received message's receipt: the generation of its connection and its ack id.
StompReceipt = tuple[int, str]


class StompAdapter(Adapter[StompReceipt]):
    """One worker's STOMP client (send, or subscribe on the first ``receive``)."""

    def __init__(self, options: StompOptions) -> None:
        self.options = options
        self.subscription = f"bb-{uuid.uuid4().hex[:10]}"
        self.subscribed = False
        self.connection: StompConnection | None = StompConnection(options)

    def _connection(self) -> StompConnection:
        if self.connection is not None and self.connection.broken:
            self.connection.close()
            self.connection = None
            self.subscribed = False
        if self.connection is None:
            self.connection = StompConnection(self.options)
        return self.connection

    def send(self, batch: Sequence[bytes]) -> None:
        self._connection().send_confirmed(batch)

    def receive(self, max_n: int) -> list[Received[StompReceipt]]:
        connection = self._connection()
        if not self.subscribed:
            connection.subscribe(self.subscription)
            self.subscribed = True
        inbox = connection.listener.messages
        try:
            frames = [inbox.get(timeout=1.0)]
        except queue.Empty:
            if connection.broken:
                raise StompFailure(
                    f"lost STOMP connection to {_where(self.options.hosts)}: {connection.broken}"
                ) from None
            return []
        while len(frames) < max_n:
            try:
                frames.append(inbox.get_nowait())
            except queue.Empty:
                break
        generation = connection.generation
        return [
            Received(
                body=frame.body if isinstance(frame.body, bytes) else _text(frame.body).encode(),
                receipt=(generation, frame.headers.get("ack") or frame.headers["message-id"]),
                redelivered=frame.headers.get("redelivered", "false") == "true",
            )
            for frame in frames
        ]

    def ack(self, receipts: Sequence[StompReceipt]) -> None:
        connection = self.connection
        if connection is None:
            return
        for generation, ack_id in receipts:
            if generation == connection.generation:
                connection.ack(ack_id)

    def close(self) -> None:
        if self.connection is not None:
            self.connection.close()
            self.connection = None


def server_header(options: StompOptions) -> str:
    """The ``server`` header of the broker's CONNECTED frame (product/version)."""
    connection = StompConnection(options)
    try:
        return connection.server
    finally:
        connection.close()
