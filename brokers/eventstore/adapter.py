"""The EventStoreDB / KurrentDB adapter (kurrentdbclient, blocking).

``send`` appends the whole batch to the sweep point's stream in one ``append_to_stream``
call (atomic; in a cluster the leader confirms it once a quorum of nodes has written it).
Receivers read from a persistent subscription (consumer group) on that stream with manual
acks: a background thread pulls events from the subscription into a local buffer —
bounded by the subscription's ``event_buffer_size`` of unacknowledged events — and
``receive`` takes up to ``max_n`` of them, waiting at most ``receive_wait`` for the first.
``ack`` hands event ids to the client, which sends them in batches
(``max_ack_batch_size`` / ``max_ack_delay``). On ``close`` every event pulled but not
acknowledged is nacked with ``retry`` so another consumer gets it at once. When the
subscription ends (node gone, leader change), the next ``receive`` raises and the one
after opens a new subscription; unacked events come back after ``message_timeout``.

The subscription is opened lazily on the first ``receive``: sender workers never join
the consumer group. :class:`EventStoreAdapter` works on any object with the client's
``append_to_stream`` / ``read_subscription_to_stream`` / ``close`` methods.

Endpoints: every node's ``host:port`` (HTTP/gRPC port, 2113); the client discovers the
leader through gossip. Extras: ``tls`` (``true``/``false``, default ``false``),
``username`` / ``password``.
"""

from __future__ import annotations

import contextlib
import json
import queue
import threading
import urllib.request
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal, Protocol
from uuid import UUID

from brokers.base import Adapter, Destination, Endpoints, Received
from brokers.errors import BrokerConnectionError, BrokerError

if TYPE_CHECKING:
    from brokers.eventstore.params import EventStoreParams

EVENT_TYPE = "brokerbench"
CONTENT_TYPE: Literal["application/octet-stream"] = "application/octet-stream"
#: Gossip discovery gives up after about this many seconds (so "unreachable" is fast).
DISCOVERY_ATTEMPTS = 3
GOSSIP_TIMEOUT_S = 5


class EventStoreClient(Protocol):
    """The part of ``kurrentdbclient.KurrentDBClient`` the adapter uses."""

    def append_to_stream(
        self, stream_name: str, *, events: Any, current_version: Any, timeout: float | None = None
    ) -> int: ...

    def read_subscription_to_stream(
        self,
        group_name: str,
        stream_name: str,
        *,
        event_buffer_size: int = ...,
        max_ack_batch_size: int = ...,
        max_ack_delay: float = ...,
    ) -> Any:
        """An iterator of recorded events with ``ack(id)``, ``nack(id, action)`` and ``stop()``."""
        ...

    def close(self) -> None: ...


def client_uri(endpoints: Endpoints) -> str:
    tls = endpoints.get("tls", "false").lower()
    user = endpoints.get("username")
    credentials = f"{user}:{endpoints.get('password')}@" if user else ""
    return (
        f"kurrentdb://{credentials}{','.join(endpoints.hosts)}?Tls={tls}"
        f"&MaxDiscoverAttempts={DISCOVERY_ATTEMPTS}&GossipTimeout={GOSSIP_TIMEOUT_S}"
        "&DiscoveryInterval=500&NodePreference=leader"
    )


def open_client(endpoints: Endpoints) -> EventStoreClient:
    """A connected client; an unreachable cluster raises :class:`BrokerConnectionError`."""
    from kurrentdbclient import KurrentDBClient
    from kurrentdbclient.exceptions import KurrentDBClientError

    try:
        client = KurrentDBClient(uri=client_uri(endpoints))
        # With one seed the client connects lazily: ask for the cluster's members now.
        client.read_gossip(timeout=GOSSIP_TIMEOUT_S)
    except KurrentDBClientError as exc:
        host, port = endpoints.first
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise BrokerConnectionError(
            f"cannot reach EventStoreDB at {host}:{port}: {reason}"
        ) from None
    connected: EventStoreClient = client
    return connected


def subscription_settings(params: EventStoreParams) -> dict[str, Any]:
    """The consumer group's settings (server side) as ``create_subscription_to_stream`` takes them."""
    return {
        "from_end": False,
        "consumer_strategy": params.consumer_strategy,
        "message_timeout": params.message_timeout,
        "max_retry_count": params.max_retry_count,
        "max_subscriber_count": params.max_subscriber_count,
        "live_buffer_size": params.live_buffer_size,
        "read_batch_size": params.read_batch_size,
        "history_buffer_size": params.history_buffer_size,
        "checkpoint_after": params.checkpoint_after,
    }


def prepare(endpoints: Endpoints, params: EventStoreParams, destination: Destination) -> None:
    """The consumer group on the sweep point's stream (the stream appears with its first event)."""
    client = open_client(endpoints)
    try:
        client.create_subscription_to_stream(  # type: ignore[attr-defined]
            params.group, destination.name, **subscription_settings(params)
        )
    finally:
        client.close()


def server_info(endpoints: Endpoints, timeout: float = 5) -> dict[str, Any]:
    """``GET /info`` of the first node (version, state)."""
    host, port = endpoints.first
    scheme = "https" if endpoints.get("tls", "false").lower() == "true" else "http"
    with urllib.request.urlopen(f"{scheme}://{host}:{port}/info", timeout=timeout) as response:
        data: dict[str, Any] = json.loads(response.read())
    return data


def describe(endpoints: Endpoints, params: EventStoreParams) -> dict[str, Any]:
    """Version and cluster members read back from the nodes; the consumer-group settings used."""
    try:
        info = server_info(endpoints)
    except OSError as exc:
        host, port = endpoints.first
        raise BrokerConnectionError(f"cannot reach EventStoreDB at {host}:{port}: {exc}") from None
    client = open_client(endpoints)
    try:
        members = client.read_gossip()  # type: ignore[attr-defined]
    finally:
        client.close()
    alive = [{"address": f"{m.address}:{m.port}", "state": m.state} for m in members]
    return {
        "version": str(info.get("dbVersion") or info.get("esVersion") or "?"),
        "node_state": info.get("state", ""),
        "members": alive,
        "replication": f"quorum writes: an append is confirmed once {len(alive) // 2 + 1} of "
        f"{len(alive)} nodes have written it",
        "subscription": {"group": params.group, **subscription_settings(params)},
        "client_buffers": {
            "event_buffer_size": params.event_buffer_size,
            "max_ack_batch_size": params.max_ack_batch_size,
            "max_ack_delay_s": params.max_ack_delay,
        },
    }


class SubscriptionClosed(BrokerError):
    """The persistent subscription ended (server gone, subscription dropped)."""


class EventStoreAdapter(Adapter[UUID]):
    """One worker's client; a received event's receipt is its ack id in the persistent
    subscription."""

    def __init__(
        self, client: EventStoreClient, params: EventStoreParams, destination: Destination
    ) -> None:
        self.client = client
        self.params = params
        self.stream = destination.name
        self.subscription: Any = None
        self.buffer: queue.Queue[Any] = queue.Queue()
        self.reader: threading.Thread | None = None
        #: Receipts handed out by ``receive`` and not acknowledged yet.
        self.outstanding: set[UUID] = set()
        self.stopping = threading.Event()
        #: How the subscription ended, raised by the next receive (which then reopens it).
        self.failure: BaseException | None = None

    # -- sending ---------------------------------------------------------------------------

    def send(self, batch: Sequence[bytes]) -> None:
        from kurrentdbclient import NewEvent, StreamState

        events = [NewEvent(type=EVENT_TYPE, data=body, content_type=CONTENT_TYPE) for body in batch]
        self.client.append_to_stream(
            self.stream,
            events=events,
            current_version=StreamState.ANY,
            timeout=self.params.append_timeout,
        )

    # -- receiving -------------------------------------------------------------------------

    def _subscribe(self) -> None:
        subscription = self.client.read_subscription_to_stream(
            self.params.group,
            self.stream,
            event_buffer_size=self.params.event_buffer_size,
            max_ack_batch_size=self.params.max_ack_batch_size,
            max_ack_delay=self.params.max_ack_delay,
        )
        buffer: queue.Queue[Any] = queue.Queue()
        self.subscription, self.buffer = subscription, buffer
        self.reader = threading.Thread(
            target=self._read,
            args=(subscription, buffer),
            name=f"subscription-{self.stream}",
            daemon=True,
        )
        self.reader.start()

    def _read(self, subscription: Any, buffer: queue.Queue[Any]) -> None:
        """Move events from the subscription into its buffer; its end becomes an error item."""
        try:
            for event in subscription:
                buffer.put(event)
        except Exception as exc:
            if not self.stopping.is_set():
                buffer.put(SubscriptionClosed(f"persistent subscription ended: {exc}"))
            return
        if not self.stopping.is_set():
            buffer.put(SubscriptionClosed("persistent subscription ended"))

    def _drop_subscription(self) -> None:
        """Forget a subscription that ended; the next receive opens a new one. Events it
        delivered and that were not acked come back after the group's message timeout."""
        subscription, self.subscription = self.subscription, None
        self.outstanding.clear()
        self.failure = None
        with contextlib.suppress(Exception):
            subscription.stop()

    def receive(self, max_n: int) -> list[Received[UUID]]:
        if self.failure is not None:
            failure = self.failure
            self._drop_subscription()
            raise failure
        if self.subscription is None:
            self._subscribe()
        out: list[Received[UUID]] = []
        try:
            item = self.buffer.get(timeout=self.params.receive_wait)
            while True:
                if isinstance(item, BaseException):
                    self.failure = item
                    break
                receipt = getattr(item, "ack_id", item.id)
                self.outstanding.add(receipt)
                out.append(
                    Received(
                        body=bytes(item.data), receipt=receipt, redelivered=item.retry_count > 0
                    )
                )
                if len(out) >= max_n:
                    break
                item = self.buffer.get_nowait()
        except queue.Empty:
            pass
        if self.failure is not None and not out:
            return self.receive(max_n)  # raises the failure
        return out

    def ack(self, receipts: Sequence[UUID]) -> None:
        if self.subscription is None:
            raise SubscriptionClosed(
                "no open subscription to ack on; these events will be delivered again"
            )
        for receipt in receipts:
            self.subscription.ack(receipt)
            self.outstanding.discard(receipt)

    def close(self) -> None:
        self.stopping.set()
        try:
            if self.subscription is not None:
                self._release_unacked()
                self.subscription.stop()
                if self.reader is not None:
                    self.reader.join(timeout=5)
        finally:
            self.client.close()

    def _release_unacked(self) -> None:
        """Nack (retry) what this consumer holds: handed out but unacked, or still buffered."""
        pending = list(self.outstanding)
        while True:
            try:
                item = self.buffer.get_nowait()
            except queue.Empty:
                break
            if not isinstance(item, BaseException):
                pending.append(getattr(item, "ack_id", item.id))
        for receipt in pending:
            self.subscription.nack(receipt, "retry")
        self.outstanding.clear()


def connect(
    endpoints: Endpoints, params: EventStoreParams, destination: Destination
) -> EventStoreAdapter:
    return EventStoreAdapter(open_client(endpoints), params, destination)
