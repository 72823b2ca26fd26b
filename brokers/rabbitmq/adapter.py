"""The RabbitMQ adapter (pika, blocking): quorum queue, persistent messages, publisher
confirms per batch, consumer prefetch, manual acks.

``send`` publishes the whole batch on a confirm-mode channel (one write of pre-encoded
frames, see :mod:`brokers.rabbitmq.confirms`) and returns when the broker has confirmed
every message of it (for a quorum queue: committed by a Raft majority); a nack, an
unroutable message or a timeout raises. ``submit`` publishes likewise and leaves the
confirms to be awaited later, so several batches can be in flight on one channel.
``receive`` takes up to ``max_n`` deliveries from a ``basic_consume`` buffer bounded by the
prefetch; ``ack`` acknowledges them (one ``multiple`` ack where the receipts are the oldest
outstanding deliveries) once a quarter of the prefetch is due, or before ``receive`` waits
for more, or at ``close``: a receiver that acked every batch of 10 spent a fifth of its
time writing acks and waiting in between (a late ack only delays a redelivery).

Workers are spread over the nodes: each new client starts at the next node of the list
(offset by the process id) and falls back to the others when it is unreachable. pika is
imported lazily, so the package loads without it.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import time
import uuid
from collections import deque
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from brokers import credentials
from brokers.base import Adapter, Confirmation, Destination, Endpoints, Received
from brokers.errors import BrokerConnectionError, BrokerError
from brokers.rabbitmq.confirms import ConfirmTracker, PublishedBatch, PublishFrames
from brokers.rabbitmq.ctl import Ctl

if TYPE_CHECKING:
    from pika.adapters.blocking_connection import BlockingChannel, BlockingConnection

    from brokers.rabbitmq.params import RabbitMQParams

_next_client = itertools.count(os.getpid())


def node_order(endpoints: Endpoints) -> list[tuple[str, int]]:
    """The nodes in the order a new client tries them (a different first node each time)."""
    addresses = endpoints.addresses()
    start = next(_next_client) % len(addresses)
    return addresses[start:] + addresses[:start]


def _short(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    detail = text[0][:160] if text and text[0] not in ("", "()") else ""
    return f"{type(exc).__name__}: {detail}" if detail else type(exc).__name__


def login(endpoints: Endpoints) -> tuple[str, str]:
    """The user and password clients log in with: the endpoints', else RabbitMQ's guest."""
    return endpoints.get("user", "guest"), endpoints.get("password", "guest")


def open_connection(
    addresses: Sequence[tuple[str, int]], endpoints: Endpoints, params: RabbitMQParams
) -> tuple[BlockingConnection, str]:
    """A connection to the first reachable node, and that node's ``host:port``."""
    import pika
    import pika.exceptions

    plain = pika.PlainCredentials(*login(endpoints))
    # Each node gets at most ~9 s, so three unreachable nodes fail within 30 s.
    per_node = max(3.0, 27.0 / max(1, len(addresses)))
    errors = []
    for host, port in addresses:
        parameters = pika.ConnectionParameters(
            host=host,
            port=port,
            virtual_host=endpoints.get("vhost", "/"),
            credentials=plain,
            heartbeat=params.heartbeat,
            connection_attempts=1,
            socket_timeout=min(5.0, per_node),
            stack_timeout=per_node,
            blocked_connection_timeout=params.confirm_timeout,
        )
        try:
            return pika.BlockingConnection(parameters), f"{host}:{port}"
        except (pika.exceptions.AMQPError, OSError) as exc:
            errors.append(f"{host}:{port} ({_short(exc)})")
    raise BrokerConnectionError(f"cannot reach RabbitMQ at {', '.join(errors)}")


def queue_arguments(params: RabbitMQParams) -> dict[str, Any]:
    arguments: dict[str, Any] = {"x-queue-type": params.queue_type}
    if params.queue_type == "quorum" and params.quorum_size is not None:
        arguments["x-quorum-initial-group-size"] = params.quorum_size
    return arguments


def prepare(endpoints: Endpoints, params: RabbitMQParams, destination: Destination) -> None:
    connection, _ = open_connection(endpoints.addresses(), endpoints, params)
    try:
        channel = connection.channel()
        channel.queue_declare(destination.name, durable=True, arguments=queue_arguments(params))
    finally:
        connection.close()


def describe(endpoints: Endpoints, params: RabbitMQParams) -> dict[str, Any]:
    """Version, cluster nodes and the type and members of a queue declared like ``prepare``."""
    connection, node = open_connection(endpoints.addresses(), endpoints, params)
    probe = f"brokerbench-describe-{uuid.uuid4().hex[:12]}"
    try:
        # BlockingConnection does not expose the server's connection.start properties.
        server = connection._impl.server_properties
        channel = connection.channel()
        channel.queue_declare(probe, durable=True, arguments=queue_arguments(params))
        info: dict[str, Any] = {
            "version": _text(server.get("version")),
            "product": _text(server.get("product")),
            "described_via": node,
            "client_settings": {
                "delivery_mode": "persistent" if params.persistent else "transient",
                "publisher_confirms": "per batch",
                "consumer_prefetch": params.prefetch,
                "acks": "manual",
            },
            "auth": credentials.auth(login(endpoints)[1]),
        }
        try:
            info.update(_read_back(Ctl.from_endpoints(endpoints), probe))
        finally:
            channel.queue_delete(probe)
    finally:
        connection.close()
    return info


def _read_back(ctl: Ctl | None, queue: str) -> dict[str, Any]:
    if ctl is None:
        return {"queue_members": "unknown (rabbitmqctl cannot reach these nodes)"}
    status = ctl.cluster_status()
    row = ctl.queue(queue) or {}
    members = row.get("members") or []
    return {
        "cluster_nodes": sorted(status.get("running_nodes", [])),
        "queue_type": row.get("type"),
        "queue_durable": row.get("durable"),
        "queue_members": sorted(members) if isinstance(members, list) else members,
        "replicas": len(members) if isinstance(members, list) else 1,
    }


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


#: A received message's receipt: the generation of its connection and its delivery tag.
DeliveryReceipt = tuple[int, int]


class RabbitMQAdapter(Adapter[DeliveryReceipt]):
    """One worker's connection, with a publishing and a consuming channel (each lazy)."""

    pipelined = True

    def __init__(self, endpoints: Endpoints, params: RabbitMQParams, destination: Destination):
        import pika

        self.endpoints = endpoints
        self.params = params
        self.queue = destination.name
        self.order = node_order(endpoints)
        self.properties = pika.BasicProperties(delivery_mode=2 if params.persistent else 1)
        self.connection: BlockingConnection | None = None
        self.node = ""
        self.generation = 0  # bumped on reconnect: older delivery tags are void
        self._publisher: BlockingChannel | None = None
        self._consumer: BlockingChannel | None = None
        self._confirms: ConfirmTracker | None = None
        self._frames: PublishFrames | None = None
        self._wakeup_pending = False
        self._buffer: deque[Received[DeliveryReceipt]] = deque()
        self._unacked: set[int] = set()
        self._acks_due: list[int] = []  # delivery tags acked by the caller, not yet sent
        self._ack_every = max(1, params.prefetch // 4)
        self._connect()

    # -- connection -------------------------------------------------------------------

    def _connect(self) -> BlockingConnection:
        if self.connection is None or not self.connection.is_open:
            self.connection, self.node = open_connection(self.order, self.endpoints, self.params)
        return self.connection

    def _reset(self) -> None:
        """Drop the connection after a failure; the next call reconnects."""
        connection, self.connection = self.connection, None
        self._publisher = self._consumer = None
        self._buffer.clear()  # unacked deliveries return to the queue
        self._unacked.clear()
        self._acks_due.clear()
        self._fail_unconfirmed("the connection was lost before the confirms arrived")
        self._wakeup_pending = False  # a timer of the old connection never fires
        self.generation += 1
        if connection is not None and connection.is_open:
            with contextlib.suppress(Exception):
                connection.close()

    def _guard(self, action: Callable[[], Any], what: str) -> Any:
        import pika.exceptions

        try:
            return action()
        except BrokerError:
            self._reset()
            raise
        except (pika.exceptions.AMQPError, OSError) as exc:
            node = self.node
            self._reset()
            raise BrokerConnectionError(f"RabbitMQ {node}: {what} failed: {_short(exc)}") from None

    def _wake(self) -> None:
        # Callbacks of the underlying channel do not end process_data_events by
        # themselves; a zero-delay timer does.
        if not self._wakeup_pending and self.connection is not None:
            self._wakeup_pending = True
            self.connection.call_later(0, self._woken)

    def _woken(self) -> None:
        self._wakeup_pending = False

    def _wait(self, done: Callable[[], bool], timeout: float) -> bool:
        connection = self._connect()
        deadline = time.monotonic() + timeout
        while not done():
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            connection.process_data_events(time_limit=remaining)
        return True

    # -- send ---------------------------------------------------------------------------

    def _open_publisher(self) -> BlockingChannel:
        if self._publisher is None or not self._publisher.is_open:
            self._fail_unconfirmed("the publishing channel was closed")
            connection = self._connect()
            channel = connection.channel()
            selected: list[bool] = []

            def on_select_ok(_frame: Any) -> None:
                selected.append(True)
                self._wake()

            # The blocking channel's confirm mode waits for each message; the underlying
            # channel lets many messages be in flight and confirmed together.
            channel._impl.confirm_delivery(
                ack_nack_callback=self._on_confirm, callback=on_select_ok
            )
            channel._impl.add_on_return_callback(self._on_return)
            if not self._wait(lambda: bool(selected), self.params.confirm_timeout):
                raise BrokerError(f"RabbitMQ {self.node}: confirm.select not answered")
            self._publisher = channel
            self._confirms = ConfirmTracker(self.node, self.queue)
            self._frames = PublishFrames(
                channel.channel_number,
                self.queue,
                self.properties,
                connection._impl._body_max_length,
            )
        return self._publisher

    def _fail_unconfirmed(self, reason: str) -> None:
        if self._confirms is not None:
            self._confirms.fail_all(reason)
            self._confirms = None

    def _on_confirm(self, frame: Any) -> None:
        import pika.spec

        method = frame.method
        if self._confirms is not None and self._confirms.on_confirm(
            method.delivery_tag, method.multiple, isinstance(method, pika.spec.Basic.Nack)
        ):
            self._wake()

    def _on_return(self, _channel: Any, _method: Any, _properties: Any, body: bytes) -> None:
        if self._confirms is not None:
            self._confirms.on_return(body)

    def submit(self, batch: Sequence[bytes]) -> Confirmation:
        result: PublishedBatch = self._guard(lambda: self._publish(batch), "publish")
        return result

    def _publish(self, batch: Sequence[bytes]) -> PublishedBatch:
        self._open_publisher()
        assert self.connection is not None and self._frames is not None and self._confirms
        deadline = time.monotonic() + self.params.confirm_timeout
        published = PublishedBatch(batch, deadline, self._settle)
        # One write for the whole batch: every message is in flight before any confirm.
        self.connection._impl._adapter_emit_data(self._frames.encode(batch))
        self._confirms.add(published)
        return published

    def send(self, batch: Sequence[bytes]) -> None:
        published = self.submit(batch)
        while published.wait(self.params.confirm_timeout) is None:
            pass

    def _settle(self, published: PublishedBatch, timeout: float) -> int | None:
        """Wait at most ``timeout`` s for the batch's confirms (``Confirmation.wait``)."""
        if not published.finished:
            self._guard(lambda: self._await_confirms(published, timeout), "publish")
        if published.error is not None:
            raise published.error
        return published.done_ns

    def _await_confirms(self, published: PublishedBatch, timeout: float) -> None:
        connection = self._connect()
        until = time.monotonic() + timeout
        while not published.finished:
            now = time.monotonic()
            if now >= published.deadline:
                raise BrokerError(
                    f"RabbitMQ {self.node}: {published.left} of {published.size} messages "
                    f"not confirmed within {self.params.confirm_timeout:.0f} s"
                )
            if now >= until:
                return
            connection.process_data_events(time_limit=min(until, published.deadline) - now)
            if not published.finished and not (self._publisher and self._publisher.is_open):
                raise BrokerError(f"RabbitMQ {self.node}: the publishing channel was closed")

    # -- receive / ack ------------------------------------------------------------------

    def _open_consumer(self) -> BlockingChannel:
        if self._consumer is None or not self._consumer.is_open:
            channel = self._connect().channel()
            channel.basic_qos(prefetch_count=self.params.prefetch)
            channel.basic_consume(self.queue, self._on_delivery, auto_ack=False)
            self._consumer = channel
        return self._consumer

    def _on_delivery(self, _channel: Any, method: Any, _properties: Any, body: bytes) -> None:
        receipt = (self.generation, method.delivery_tag)
        self._buffer.append(Received(body, receipt, bool(method.redelivered)))

    def receive(self, max_n: int) -> list[Received[DeliveryReceipt]]:
        result: list[Received[DeliveryReceipt]] = self._guard(
            lambda: self._receive(max_n), "consume"
        )
        return result

    def _receive(self, max_n: int) -> list[Received[DeliveryReceipt]]:
        self._open_consumer()
        if not self._buffer:
            self._send_acks()  # the broker delivers no more than the prefetch unacked
            self._wait(lambda: bool(self._buffer), 1.0)
        out = [self._buffer.popleft() for _ in range(min(max_n, len(self._buffer)))]
        self._unacked.update(r.receipt[1] for r in out)
        return out

    def ack(self, receipts: Sequence[DeliveryReceipt]) -> None:
        # Receipts from before a reconnect are void: those messages are redelivered.
        self._acks_due += (tag for generation, tag in receipts if generation == self.generation)
        if len(self._acks_due) >= self._ack_every:
            self._guard(self._send_acks, "ack")

    def _send_acks(self) -> None:
        tags, self._acks_due = sorted(self._acks_due), []
        channel = self._consumer
        if channel is None or not tags:
            return
        top = tags[-1]
        given = set(tags)
        if len(tags) > 1 and all(t in given for t in self._unacked if t <= top):
            channel.basic_ack(delivery_tag=top, multiple=True)
        else:
            for tag in tags:
                channel.basic_ack(delivery_tag=tag)
        self._unacked.difference_update(tags)

    def close(self) -> None:
        if self._acks_due and self.connection is not None and self.connection.is_open:
            with contextlib.suppress(Exception):  # not acknowledged: redelivered
                self._send_acks()
                self.connection.process_data_events(time_limit=0)
        self._buffer.clear()
        connection, self.connection = self.connection, None
        if connection is not None and connection.is_open:
            with contextlib.suppress(Exception):
                connection.close()


def connect(
    endpoints: Endpoints, params: RabbitMQParams, destination: Destination
) -> RabbitMQAdapter:
    return RabbitMQAdapter(endpoints, params, destination)
