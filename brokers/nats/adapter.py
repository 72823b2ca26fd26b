"""The NATS JetStream adapter (nats-py, asyncio): a file-backed work-queue stream with
``replicas`` copies and one durable pull consumer with explicit acks.

``send`` publishes every message of the batch before awaiting any acknowledgement — a
keyed one to the stream's subject with the key as its last token —
(:class:`PubAcks`) and returns when the stream has acknowledged each one (a PubAck: stored
by a majority of the stream's replicas); concurrent ``send`` calls on one adapter are
fine (``max_in_flight``). ``receive`` pulls up to ``max_n`` messages from the shared
durable consumer, returning as soon as one is there and waiting at most a second; ``ack``
sends ``+ACK`` to each message's reply subject. A message not acked within ``ack_wait``
is delivered again.

Workers are spread over the servers: each new client starts at the next server of the
list (offset by the process id) and fails over to the others. nats-py is imported
lazily, so the package loads without it.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import re
import time
from collections import deque
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from brokers.base import AsyncAdapter, Destination, Endpoints, Received
from brokers.batches import ReceivedBatch, keys_of
from brokers.errors import BrokerConnectionError, BrokerError

if TYPE_CHECKING:
    from nats.aio.client import Client
    from nats.aio.msg import Msg
    from nats.js import JetStreamContext

    from brokers.nats.params import NatsParams

CONSUMER = "brokerbench"
CONNECT_TIMEOUT = 15.0
#: Lifetime of one pull request on the server.
PULL_EXPIRES = 1.0
#: A pull request asks for this many receive batches at once: a receiver whose request
#: brought only one batch waited a round trip to the server for each (receivers fell
#: behind the senders); what arrives ahead waits in the worker's queue, as a prefetch.
PULL_AHEAD = 4

_next_client = itertools.count(os.getpid())


def stream_name(destination: Destination) -> str:
    """A valid stream name for the destination (no dots, wildcards or spaces)."""
    return re.sub(r"[^A-Za-z0-9_-]", "_", destination.name)


def subject(destination: Destination) -> str:
    return f"brokerbench.{stream_name(destination)}"


def server_order(endpoints: Endpoints) -> list[str]:
    """Server URLs in the order a new client tries them (a different first one each time)."""
    urls = [f"nats://{host}" for host in endpoints.hosts]
    start = next(_next_client) % len(urls)
    return urls[start:] + urls[:start]


class _ConnectFailures:
    """Errors nats-py reports while connecting: the last one, and whether to give up."""

    def __init__(self, servers: int) -> None:
        self.limit = 2 * servers
        self.count = 0
        self.last: BaseException | None = None
        self.refused = asyncio.Event()

    async def record(self, exc: Exception) -> None:
        self.count += 1
        self.last = exc
        if self.count >= self.limit:
            self.refused.set()


#: Seconds between the client's pings, and how many may go unanswered before it reconnects.
PING_INTERVAL = 1
MAX_OUTSTANDING_PINGS = 3


async def open_connection(endpoints: Endpoints, servers: list[str] | None = None) -> Client:
    """A connection that reconnects on its own once up.

    The first connection gives up when every server failed twice, or after 15 s.
    """
    import nats

    servers = servers or server_order(endpoints)
    failures = _ConnectFailures(len(servers))
    options: dict[str, Any] = {}
    if endpoints.get("user"):
        options.update(user=endpoints.get("user"), password=endpoints.get("password"))
    connecting = asyncio.ensure_future(
        nats.connect(
            servers=servers,
            dont_randomize=True,
            connect_timeout=5,
            reconnect_time_wait=0.5,
            max_reconnect_attempts=-1,
            # A server cut off from the network answers nothing and closes nothing: the
            # client finds out from unanswered pings (3 s here, not nats-py's 4 minutes).
            ping_interval=PING_INTERVAL,
            max_outstanding_pings=MAX_OUTSTANDING_PINGS,
            error_cb=failures.record,
            # Every subject a client publishes to is made here (from a sanitised stream
            # name, a key scheme's names, an inbox) or is a reply subject the server gave;
            # checking each again on every publish and ack was 6 % of a sender's CPU.
            skip_subject_validation=True,
            **options,
        )
    )
    giving_up = asyncio.ensure_future(failures.refused.wait())
    await asyncio.wait(
        {connecting, giving_up}, timeout=CONNECT_TIMEOUT, return_when=asyncio.FIRST_COMPLETED
    )
    giving_up.cancel()
    cause = failures.last
    if connecting.done():
        failure = connecting.exception()
        if failure is None:
            client: Client = connecting.result()
            return client
        if not isinstance(failure, OSError | nats.errors.Error):
            raise failure
        cause = failure
    else:
        connecting.cancel()
        with contextlib.suppress(BaseException):
            await connecting
    hosts = ", ".join(s.removeprefix("nats://") for s in servers)
    detail = f"{type(cause).__name__} {cause}".strip() if cause else "no answer within 15 s"
    raise BrokerConnectionError(f"cannot reach NATS at {hosts}: {detail}")


class PullConsumer:
    """Pull requests to the durable consumer, answered into a private inbox.

    One request (``batch`` = :data:`PULL_AHEAD` × ``max_n``, expiring after
    :data:`PULL_EXPIRES`) is in flight at a time; messages it brings are queued and handed
    out as soon as one is there (nats-py's ``fetch`` waits for the whole batch or its
    timeout, which would add up to a second to the measured latency at low rates).
    """

    def __init__(self, client: Client, stream: str) -> None:
        self.client = client
        self.api = f"$JS.API.CONSUMER.MSG.NEXT.{stream}.{CONSUMER}"
        self.inbox = client.new_inbox()
        self.queue: deque[Msg] = deque()
        self.arrived = asyncio.Event()
        self.active_until = 0.0  # monotonic end of the request in flight (0: none)
        self.owed = 0  # messages the request in flight may still bring
        self.subscription: Any = None

    async def _on_message(self, msg: Msg) -> None:
        headers = msg.headers  # a message has none; a status from the server has
        status = headers.get("Status", "") if headers else ""
        if status == "100":  # idle heartbeat
            return
        if status:  # 408 expired, 409 refused (e.g. max waiting), 404 none (no_wait)
            back_off = 0.2 if status == "409" else 0.0
            self.active_until = time.monotonic() + back_off if back_off else 0.0
        else:
            self.queue.append(msg)
            self.owed -= 1
            if self.owed <= 0:
                self.active_until = 0.0
        self.arrived.set()

    async def _request(self, batch: int) -> None:
        if self.subscription is None:
            self.subscription = await self.client.subscribe(self.inbox, cb=self._on_message)
        body = b'{"batch":%d,"expires":%d}' % (batch, int(PULL_EXPIRES * 1e9))
        await self.client.publish(self.api, body, reply=self.inbox)
        # A little longer than the server's expiry: its 408 normally ends the request.
        self.active_until = time.monotonic() + PULL_EXPIRES + 0.2
        self.owed = batch

    async def take(self, max_n: int, wait: float) -> list[Msg]:
        """Up to ``max_n`` messages; waits at most ``wait`` seconds for the first one."""
        deadline = time.monotonic() + wait
        while not self.queue:
            now = time.monotonic()
            if now >= deadline:
                return []
            if now >= self.active_until:
                await self._request(PULL_AHEAD * max_n)
            self.arrived.clear()
            timeout = max(0.0, min(deadline, self.active_until) - time.monotonic())
            # asyncio.timeout, not wait_for: no task made for every wait.
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await self.arrived.wait()
        return [self.queue.popleft() for _ in range(min(max_n, len(self.queue)))]


class _BatchAcks:
    """The PubAcks one batch still awaits: a count, the reasons of the failed ones, and a
    future set once every message of the batch was answered."""

    __slots__ = ("done", "failures", "remaining")

    def __init__(self, messages: int, done: asyncio.Future[None]) -> None:
        self.remaining = messages
        self.failures: list[str] = []
        self.done = done


class PubAcks:
    """Publishes awaiting the stream's acknowledgement, answered into one private inbox.

    Each message of a batch is published with the batch's reply subject under the inbox,
    ``<inbox>.<batch>``; its PubAck (or an error, or a 503 "no responders" status) arrives
    there and counts against its batch. A batch is one future, not one per message (a
    future and a wait per message were a third of the sending CPU). Any number of batches,
    of any number of concurrent ``send`` calls, may be waiting at once.
    """

    def __init__(self, client: Client, stream: str) -> None:
        self.client = client
        self.stream = stream
        self.prefix = f"{client.new_inbox()}."
        self.next_batch = itertools.count()
        self.waiting: dict[str, _BatchAcks] = {}
        # A PubAck of a message stored in the stream starts so (then its sequence number).
        self._stored = b'{"stream":"' + stream.encode() + b'",'

    async def start(self) -> None:
        await self.client.subscribe(f"{self.prefix}>", cb=self._on_reply)

    async def _on_reply(self, msg: Msg) -> None:
        batch_id = msg.subject[len(self.prefix) :]
        batch = self.waiting.get(batch_id)
        if batch is None:
            return  # a batch that already timed out
        if not msg.data.startswith(self._stored) or msg.headers:
            reason = self._failure(msg)
            if reason is not None:
                batch.failures.append(reason)
        batch.remaining -= 1
        if batch.remaining == 0:
            del self.waiting[batch_id]
            if not batch.done.done():
                batch.done.set_result(None)

    async def publish(self, subject: str, batch: Sequence[bytes], timeout: float) -> list[str]:
        """Publish the batch; the reasons messages were not stored (empty: all were). A
        keyed batch's messages go each to ``subject.<key>``."""
        if not batch:
            return []
        batch_id = str(next(self.next_batch))
        acks = self.waiting[batch_id] = _BatchAcks(
            len(batch), asyncio.get_running_loop().create_future()
        )
        reply = f"{self.prefix}{batch_id}"
        keys = keys_of(batch)
        publish = self.client.publish
        try:
            if keys is None:
                for body in batch:
                    await publish(subject, body, reply=reply)
            else:
                for body, key in zip(batch, keys, strict=True):
                    await publish(f"{subject}.{key.decode()}", body, reply=reply)
            await asyncio.wait([acks.done], timeout=timeout)
        finally:
            self.waiting.pop(batch_id, None)
        if acks.remaining:
            acks.failures += [f"no acknowledgement within {timeout:.0f} s"] * acks.remaining
        return acks.failures

    def _failure(self, msg: Msg) -> str | None:
        status = (msg.headers or {}).get("Status")
        if status:
            return f"status {status} {(msg.headers or {}).get('Description', '')}".strip()
        try:
            ack = json.loads(msg.data)
        except ValueError:
            return f"unreadable acknowledgement {msg.data[:80]!r}"
        if "error" in ack:
            return f"{ack['error'].get('description', ack['error'])}"
        if ack.get("stream") != self.stream:
            return f"stored in stream {ack.get('stream')!r}"
        return None


def delivered_more_than_once(reply: str) -> bool:
    """Whether a JetStream message was delivered before, read from its reply subject
    (``$JS.ACK.<stream>.<consumer>.<delivered>.…``, or with a domain and account hash
    before the stream in the 12-token form): ``Msg.metadata`` parses every field and a
    timestamp for the one number."""
    tokens = reply.split(".", 7)
    delivered = tokens[4] if reply.count(".") == V1_ACK_DOTS else tokens[6]
    return delivered != "1"


#: Dots in a reply subject of the 9-token (pre-2.9 domain-less) form.
V1_ACK_DOTS = 8


class NatsAdapter(AsyncAdapter[str]):
    """One worker's connection; the pull consumer is set up on the first receive. A received
    message's receipt is its reply subject, where the acknowledgement goes."""

    def __init__(self, endpoints: Endpoints, params: NatsParams, destination: Destination):
        self.endpoints = endpoints
        self.params = params
        self.stream = stream_name(destination)
        self.subject = subject(destination)
        self.client: Client | None = None
        self.js: JetStreamContext | None = None
        self.consumer: PullConsumer | None = None
        self.acks: PubAcks | None = None

    async def open(self) -> NatsAdapter:
        self.client = await open_connection(self.endpoints)
        self.js = self.client.jetstream(timeout=self.params.publish_timeout)
        self.acks = PubAcks(self.client, self.stream)
        await self.acks.start()
        return self

    @property
    def server(self) -> str:
        """``host:port`` of the server this client is connected to."""
        url = self.client.connected_url if self.client else None
        return url.netloc if url else ""

    async def send(self, batch: Sequence[bytes]) -> None:
        assert self.acks is not None
        failed = await self.acks.publish(self.subject, batch, self.params.publish_timeout)
        if failed:
            raise BrokerError(
                f"NATS {self.server}: {len(failed)} of {len(batch)} messages not acknowledged "
                f"by stream {self.stream}: {failed[0]}"
            )

    async def receive(self, max_n: int) -> list[Received[str]]:
        messages = await self._take(max_n)
        return [Received(m.data, m.reply, delivered_more_than_once(m.reply)) for m in messages]

    async def receive_batch(self, max_n: int) -> ReceivedBatch[str]:
        """What the worker awaits: the messages as columns, with no object per message."""
        messages = await self._take(max_n)
        replies = [m.reply for m in messages]
        again = [i for i, reply in enumerate(replies) if delivered_more_than_once(reply)]
        return ReceivedBatch([m.data for m in messages], replies, again)

    async def _take(self, max_n: int) -> list[Msg]:
        assert self.client is not None
        if self.consumer is None:
            self.consumer = PullConsumer(self.client, self.stream)
        return await self.consumer.take(max_n, wait=1.0)

    async def ack(self, receipts: Sequence[str]) -> None:
        assert self.client is not None
        for reply in receipts:
            await self.client.publish(reply, b"+ACK")

    async def close(self) -> None:
        client, self.client = self.client, None
        if client is not None and not client.is_closed:
            try:
                await client.flush(timeout=5)
            finally:
                await client.close()


async def connect(
    endpoints: Endpoints, params: NatsParams, destination: Destination
) -> NatsAdapter:
    return await NatsAdapter(endpoints, params, destination).open()
