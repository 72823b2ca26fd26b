"""The Pulsar client of one worker (pulsar-client, blocking API).

* ``submit``: every message of the batch goes out with ``send_async``; the batch is
  confirmed once the broker confirmed each message, i.e. each is persisted on
  ``ack_quorum`` bookies. A worker keeps up to ``max_in_flight`` batches submitted; the
  producer's own batching (``batching_max_publish_delay_ms``, ``batching_max_messages``)
  gathers their messages into entries, as pulsar-perf's producers do.
* ``send`` (one batch in flight): ``submit``, then ``flush`` so that the batch leaves at
  once instead of after the publish delay, then wait for the confirmation.
* ``receive``: a consumer on the point's Shared subscription waits up to 1 s for a first
  message, then takes what is already buffered, up to ``max_n``.
* ``ack``: individual acknowledgements. Unacknowledged messages come back after
  ``ack_timeout`` or when the consumer goes away (another receiver gets them).

One callback per batch, not per message: a callback runs on the client's I/O thread and
must take the GIL from the worker that is sending, which cost 15.7 µs of CPU per message
against 3.4 µs with one callback per 50 messages (one producer alone, 100-byte messages).
A producer confirms its messages in the order they were sent, and a failure (a send
timeout, a closed producer) fails every message still pending after the failed one, so
the last message of a producer's run in the batch speaks for the run. Hence a partitioned
topic gets a producer per partition (the batch goes to one of them, round robin; keyed
messages to the partition of their key's hash), and a message that could fail on its own
(larger than :data:`ALONE_BYTES`, near the broker's 5 MB limit) gets a callback of its own.

The producers and the consumer are created on first use: a sender worker must not hold a
consumer, or the broker would push it messages that nobody processes.
"""

from __future__ import annotations

import contextlib
import itertools
import threading
import time
import zlib
from collections.abc import Sequence
from typing import Any

from brokers.base import Adapter, Confirmation, Destination, Endpoints, Received
from brokers.batches import ReceivedBatch, keys_of
from brokers.connection import require_reachable
from brokers.errors import BrokerError
from brokers.pulsar.admin import SUBSCRIPTION, topic_url
from brokers.pulsar.params import PulsarParams

#: How long ``receive`` waits for a first message.
RECEIVE_WAIT_MS = 1000
#: A message this large gets a callback of its own (it could fail alone: over the broker's
#: ``maxMessageSize``, 5 MB by default).
ALONE_BYTES = 1 << 20


class _Confirmations(Confirmation):
    """A submitted batch: counts the send callbacks that speak for it (run on the client's
    I/O threads) and notes when the last one arrived; ``messages`` is the batch's size."""

    __slots__ = ("done", "done_ns", "failures", "lock", "messages", "ok", "remaining")

    def __init__(self, messages: int, ok: Any) -> None:
        self.ok = ok
        self.messages = messages
        self.remaining = 0
        self.failures: list[str] = []
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.done_ns = 0

    def expect(self, callbacks: int) -> None:
        """Set before any callback can run: how many callbacks confirm the batch."""
        self.remaining = callbacks
        if callbacks == 0:
            self.done_ns = time.time_ns()
            self.done.set()

    def callback(self, result: Any, _message_id: Any) -> None:
        with self.lock:
            if result != self.ok:
                self.failures.append(str(result))
            self.remaining -= 1
            if self.remaining == 0:
                self.done_ns = time.time_ns()
                self.done.set()

    def wait(self, timeout: float) -> int | None:
        if not self.done.wait(timeout):
            return None
        if self.failures:
            raise BrokerError(
                f"Pulsar: a batch of {self.messages} messages failed: {self.failures[0]}"
            )
        return self.done_ns


class _SharedClients:
    """One ``pulsar.Client`` per broker URL in a process, shared by its workers as
    pulsar-perf's producers share one: a client has its own I/O and listener threads and
    connections, and one per worker multiplies their wake-ups. Closed with its last user."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._clients: dict[str, tuple[Any, int]] = {}

    def take(self, url: str) -> Any:
        import pulsar

        with self._lock:
            client, users = self._clients.get(url, (None, 0))
            if client is None:
                client = pulsar.Client(
                    url,
                    operation_timeout_seconds=30,
                    connection_timeout_ms=10_000,
                    logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn),
                )
            self._clients[url] = (client, users + 1)
            return client

    def give_back(self, url: str) -> None:
        with self._lock:
            client, users = self._clients.get(url, (None, 0))
            if users > 1:
                self._clients[url] = (client, users - 1)
                return
            self._clients.pop(url, None)
        if client is not None:
            with contextlib.suppress(Exception):
                client.close()


_CLIENTS = _SharedClients()


class PulsarAdapter(Adapter[int]):
    """One worker's client; a received message's receipt is a token for the message it
    holds until the acknowledgement."""

    pipelined = True

    def __init__(self, endpoints: Endpoints, params: PulsarParams, destination: Destination):
        import pulsar

        self._pulsar = pulsar
        self.params = params
        self.topic = topic_url(params, destination)
        self._url = "pulsar://" + ",".join(endpoints.hosts)
        self.client = _CLIENTS.take(self._url)
        self._producers: list[Any] = []
        self._next_partition = itertools.count()
        self._consumer: Any = None
        self._next_token = 0
        self._unacked: dict[int, Any] = {}

    def _producers_for_send(self) -> list[Any]:
        """One producer, or one per partition of a partitioned topic."""
        if not self._producers:
            partitions = self.params.partitions
            topics = [f"{self.topic}-partition-{i}" for i in range(partitions)] or [self.topic]
            self._producers = [
                self.client.create_producer(
                    topic,
                    send_timeout_millis=int(self.params.send_timeout * 1000),
                    block_if_queue_full=True,
                    batching_enabled=self.params.batching,
                    batching_max_publish_delay_ms=self.params.batching_max_publish_delay_ms,
                    batching_max_messages=self.params.batching_max_messages,
                    max_pending_messages=self.params.max_pending_messages,
                )
                for topic in topics
            ]
        return self._producers

    def _consumer_for_receive(self) -> Any:
        if self._consumer is None:
            pulsar = self._pulsar
            self._consumer = self.client.subscribe(
                self.topic,
                SUBSCRIPTION,
                consumer_type=pulsar.ConsumerType.Shared,
                receiver_queue_size=self.params.receiver_queue_size,
                unacked_messages_timeout_ms=int(self.params.ack_timeout * 1000),
                negative_ack_redelivery_delay_ms=int(self.params.negative_ack_delay * 1000),
                initial_position=pulsar.InitialPosition.Earliest,
                batch_index_ack_enabled=self.params.batching,
            )
        return self._consumer

    def submit(self, batch: Sequence[bytes]) -> _Confirmations:
        producers = self._producers_for_send()
        confirmations = _Confirmations(len(batch), self._pulsar.Result.Ok)
        keys = keys_of(batch)
        runs: list[tuple[Any, Sequence[bytes], list[str] | None]]
        if keys is None:
            runs = [(producers[next(self._next_partition) % len(producers)], batch, None)]
        else:
            runs = list(_runs_by_key(producers, batch, keys))
        alone = [any(len(body) > ALONE_BYTES for body in bodies) for _, bodies, _ in runs]
        confirmations.expect(
            sum(len(bodies) if big else 1 for (_, bodies, _), big in zip(runs, alone, strict=True))
        )
        callback = confirmations.callback
        for (producer, bodies, run_keys), big in zip(runs, alone, strict=True):
            send_async, last = producer.send_async, len(bodies) - 1
            if run_keys is None and not big:
                for body in bodies[:last]:
                    send_async(body, None)
                send_async(bodies[last], callback)
            elif run_keys is None:
                for body in bodies:
                    send_async(body, callback)
            else:
                for i, (body, key) in enumerate(zip(bodies, run_keys, strict=True)):
                    send_async(body, callback if big or i == last else None, partition_key=key)
        return confirmations

    def send(self, batch: Sequence[bytes]) -> None:
        confirmations = self.submit(batch)
        for producer in self._producers:
            producer.flush()
        if confirmations.wait(self.params.send_timeout + 5) is None:
            raise BrokerError(
                f"Pulsar: a batch of {len(batch)} messages not confirmed "
                f"within {self.params.send_timeout + 5:.0f} s"
            )

    def _receive(self, max_n: int) -> list[Any]:
        consumer = self._consumer_for_receive()
        timeout = self._pulsar.Timeout
        try:
            messages = [consumer.receive(timeout_millis=RECEIVE_WAIT_MS)]
        except timeout:
            return []
        receive = consumer.receive
        while len(messages) < max_n:
            try:
                messages.append(receive(timeout_millis=0))
            except timeout:
                break
        return messages

    def receive(self, max_n: int) -> list[Received[int]]:
        received = self.receive_batch(max_n)
        again = set(received.redelivered)
        return [
            Received(body, receipt, i in again)
            for i, (body, receipt) in enumerate(
                zip(received.bodies, received.receipts, strict=True)
            )
        ]

    def receive_batch(self, max_n: int) -> ReceivedBatch[int]:
        """What the worker calls: the messages as columns, with no object per message."""
        messages = self._receive(max_n)
        first = self._next_token
        self._next_token = first + len(messages)
        tokens = range(first, self._next_token)
        self._unacked.update(zip(tokens, messages, strict=True))
        again = [i for i, message in enumerate(messages) if message.redelivery_count()]
        return ReceivedBatch([message.data() for message in messages], tokens, again)

    def ack(self, receipts: Sequence[int]) -> None:
        consumer = self._consumer_for_receive()
        for receipt in receipts:
            message = self._unacked.pop(receipt, None)
            if message is not None:
                consumer.acknowledge(message)

    def negative_ack(self, receipts: Sequence[int]) -> None:
        """Hand messages back for redelivery after ``negative_ack_delay``."""
        consumer = self._consumer_for_receive()
        for receipt in receipts:
            message = self._unacked.pop(receipt, None)
            if message is not None:
                consumer.negative_acknowledge(message)

    def close(self) -> None:
        self._unacked.clear()
        for handle in [*self._producers, self._consumer]:
            with contextlib.suppress(Exception):
                if handle is not None:
                    handle.close()
        _CLIENTS.give_back(self._url)


def _runs_by_key(
    producers: list[Any], batch: Sequence[bytes], keys: Sequence[bytes]
) -> list[tuple[Any, list[bytes], list[str]]]:
    """A keyed batch split by the partition of each key (CRC-32 of the key, modulo the
    partitions), each run in the batch's order, with its keys as the message keys."""
    runs: dict[int, tuple[list[bytes], list[str]]] = {}
    for body, key in zip(batch, keys, strict=True):
        bodies, run_keys = runs.setdefault(zlib.crc32(key) % len(producers), ([], []))
        bodies.append(body)
        run_keys.append(key.decode())
    return [(producers[i], bodies, run_keys) for i, (bodies, run_keys) in runs.items()]


def connect(endpoints: Endpoints, params: PulsarParams, destination: Destination) -> PulsarAdapter:
    """One worker's client; fails within seconds, naming the broker, when it is unreachable."""
    require_reachable(endpoints, "Pulsar broker")
    return PulsarAdapter(endpoints, params, destination)
