"""The Pulsar client of one worker (pulsar-client, blocking API).

* ``send``: every message of the batch goes out with ``send_async``; ``flush`` pushes
  them to the broker and the call returns only when every callback reported ``Ok``,
  i.e. each message is persisted on ``ack_quorum`` bookies.
* ``receive``: a consumer on the point's Shared subscription waits up to 1 s for a first
  message, then takes what is already buffered, up to ``max_n``.
* ``ack``: individual acknowledgements. Unacknowledged messages come back after
  ``ack_timeout`` or when the consumer goes away (another receiver gets them).

The producer and the consumer are created on first use: a sender worker must not hold a
consumer, or the broker would push it messages that nobody processes.
"""

from __future__ import annotations

import itertools
import socket
import threading
from collections.abc import Sequence
from typing import Any

from brokers.base import Adapter, Destination, Endpoints, Received
from brokers.batches import keys_of
from brokers.errors import BrokerConnectionError, BrokerError
from brokers.pulsar.admin import SUBSCRIPTION, topic_url
from brokers.pulsar.params import PulsarParams

#: How long ``receive`` waits for a first message.
RECEIVE_WAIT_MS = 1000


class _Confirmations:
    """Counts the send callbacks of one batch."""

    def __init__(self, expected: int, ok: Any) -> None:
        self.ok = ok
        self.remaining = expected
        self.failures: list[str] = []
        self.lock = threading.Lock()
        self.done = threading.Event()
        if expected == 0:
            self.done.set()

    def callback(self, result: Any, _message_id: Any) -> None:
        with self.lock:
            if result != self.ok:
                self.failures.append(str(result))
            self.remaining -= 1
            if self.remaining <= 0:
                self.done.set()


class PulsarAdapter(Adapter[int]):
    """One worker's client; a received message's receipt is a token for the message it
    holds until the acknowledgement."""

    def __init__(self, endpoints: Endpoints, params: PulsarParams, destination: Destination):
        import pulsar

        self._pulsar = pulsar
        self.params = params
        self.topic = topic_url(params, destination)
        self.client = pulsar.Client(
            "pulsar://" + ",".join(endpoints.hosts),
            operation_timeout_seconds=30,
            connection_timeout_ms=10_000,
            logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn),
        )
        self._producer: Any = None
        self._consumer: Any = None
        self._tokens = itertools.count()
        self._unacked: dict[int, Any] = {}

    def _producer_for_send(self) -> Any:
        if self._producer is None:
            self._producer = self.client.create_producer(
                self.topic,
                send_timeout_millis=int(self.params.send_timeout * 1000),
                block_if_queue_full=True,
                batching_enabled=self.params.batching,
                batching_max_publish_delay_ms=10,
            )
        return self._producer

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

    def send(self, batch: Sequence[bytes]) -> None:
        producer = self._producer_for_send()
        confirmations = _Confirmations(len(batch), self._pulsar.Result.Ok)
        keys = keys_of(batch)
        if keys is None:
            for body in batch:
                producer.send_async(body, confirmations.callback)
        else:  # the message key (a partitioned topic routes by its hash)
            for body, key in zip(batch, keys, strict=True):
                producer.send_async(body, confirmations.callback, partition_key=key.decode())
        producer.flush()
        if not confirmations.done.wait(self.params.send_timeout + 5):
            raise BrokerError(
                f"Pulsar: {confirmations.remaining} of {len(batch)} messages not confirmed "
                f"within {self.params.send_timeout + 5:.0f} s"
            )
        if confirmations.failures:
            raise BrokerError(
                f"Pulsar: {len(confirmations.failures)} of {len(batch)} messages failed: "
                f"{confirmations.failures[0]}"
            )

    def receive(self, max_n: int) -> list[Received[int]]:
        consumer = self._consumer_for_receive()
        timeout = self._pulsar.Timeout
        try:
            messages = [consumer.receive(timeout_millis=RECEIVE_WAIT_MS)]
        except timeout:
            return []
        while len(messages) < max_n:
            try:
                messages.append(consumer.receive(timeout_millis=0))
            except timeout:
                break
        received = []
        for message in messages:
            token = next(self._tokens)
            self._unacked[token] = message
            received.append(Received(message.data(), token, message.redelivery_count() > 0))
        return received

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
        try:
            self.client.close()
        except Exception:
            pass


def connect(endpoints: Endpoints, params: PulsarParams, destination: Destination) -> PulsarAdapter:
    """One worker's client; fails within seconds, naming the broker, when it is unreachable."""
    host, port = endpoints.first
    try:
        with socket.create_connection((host, port), timeout=10):
            pass
    except OSError as exc:
        raise BrokerConnectionError(
            f"Pulsar broker at {host}:{port} is unreachable: {exc}"
        ) from None
    return PulsarAdapter(endpoints, params, destination)
