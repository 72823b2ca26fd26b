"""The RocketMQ client of one worker: rocketmq-python-client over gRPC through the proxy.

* ``send``: every message of the batch is sent with ``send_async`` (with keys, each key is
  its messages' message group, on the FIFO topic ``prepare`` made, and a key's messages are
  sent one after the other, the keys side by side: a FIFO topic keeps the order in which one
  producer sent a group's messages one at a time); the call returns when
  every send receipt arrived, i.e. the master has the message fsynced (``SYNC_FLUSH``; see
  the durability line for the slave). A failed send, or one the client could not start
  (no writable queue in the route it holds), raises, and the next send uses a new producer
  (one that asks for the topic's route afresh).
* ``receive``: a ``SimpleConsumer`` of the point's consumer group (clustering mode) long-polls
  for up to ``long_polling`` seconds; what it returns stays invisible to the other
  receivers for ``invisible_duration`` and comes back if it is not acknowledged by then.
* ``ack``: one acknowledgement request per message, sent concurrently and waited for.

Producer and consumer are created on first use, so a sender worker never joins the group.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import time
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any

from brokers.base import Adapter, Destination, Endpoints, Received
from brokers.batches import keys_of
from brokers.connection import require_reachable
from brokers.errors import BrokerError
from brokers.rocketmq.admin import group_name, topic_name
from brokers.rocketmq.params import RocketMQParams

#: How long after start-up a consumer may still be unknown to the proxy.
SETTINGS_GRACE = 15.0


class RocketMQAdapter(Adapter[int]):
    """One worker's client; a received message's receipt is a token for the message it
    holds until the acknowledgement."""

    def __init__(
        self, endpoints: Endpoints, params: RocketMQParams, destination: Destination
    ) -> None:
        import rocketmq

        logging.getLogger("rocketmq-python-client").setLevel(logging.WARNING)
        self._rocketmq = rocketmq
        self.params = params
        self.topic = topic_name(destination)
        self.group = group_name(destination)
        self.config = rocketmq.ClientConfiguration(
            ";".join(endpoints.hosts),
            rocketmq.Credentials(),
            request_timeout=params.send_timeout,
        )
        self._producer: Any = None
        self._consumer: Any = None
        self._consumer_started = 0.0
        self._tokens = itertools.count()
        self._unacked: dict[int, Any] = {}
        self._ack_pool: ThreadPoolExecutor | None = None
        self._key_pool: ThreadPoolExecutor | None = None

    def _producer_for_send(self) -> Any:
        if self._producer is None:
            producer = self._rocketmq.Producer(self.config, (self.topic,))
            producer.startup()
            self._producer = producer
        return self._producer

    def _consumer_for_receive(self) -> Any:
        if self._consumer is None:
            rocketmq = self._rocketmq
            consumer = rocketmq.SimpleConsumer(
                self.config,
                self.group,
                {self.topic: rocketmq.FilterExpression()},
                await_duration=self.params.long_polling,
            )
            consumer.startup()
            settled = getattr(consumer, "_init_settings_event", None)
            if settled is not None:
                settled.wait(timeout=10)
            self._consumer = consumer
            self._consumer_started = time.monotonic()
        return self._consumer

    @property
    def _confirm_timeout(self) -> float:
        """How long a batch's sends may take: the client retries each up to 3 times."""
        return self.params.send_timeout * 3 + 5

    def _message(self, body: bytes, group: str | None = None) -> Any:
        message = self._rocketmq.Message()
        message.topic = self.topic
        message.body = body
        if group is not None:
            message.message_group = group
        return message

    def _send_in_order(self, producer: Any, group: str, bodies: Sequence[bytes]) -> None:
        """One message group's messages, each sent once the one before it is confirmed: a
        FIFO topic keeps a group's order as one producer sent it one at a time."""
        for body in bodies:
            producer.send(self._message(body, group))

    def _start_sends(self, producer: Any, batch: Sequence[bytes]) -> tuple[list[Future[Any]], int]:
        """The batch's sends, started: one per message, side by side; with keys, one per key
        (its messages one after the other, the keys side by side). Also the most messages
        one of them sends."""
        keys = keys_of(batch)
        if keys is None:
            return [producer.send_async(self._message(body)) for body in batch], 1
        groups: dict[bytes, list[bytes]] = {}
        for key, body in zip(keys, batch, strict=True):
            groups.setdefault(key, []).append(body)
        if self._key_pool is None:
            self._key_pool = ThreadPoolExecutor(16, thread_name_prefix="rocketmq-group")
        pool = self._key_pool
        futures = [
            pool.submit(self._send_in_order, producer, k.decode(), b) for k, b in groups.items()
        ]
        return futures, max(map(len, groups.values()))

    def send(self, batch: Sequence[bytes]) -> None:
        producer = self._producer_for_send()
        futures: list[Future[Any]] = []
        try:
            futures, longest = self._start_sends(producer, batch)
        except Exception as exc:
            # The client picks a queue before it sends, from the route it holds; one taken
            # while the master was down has no writable queue, and it keeps that (empty)
            # choice until its next route refresh (30 s): start a new producer, which asks.
            self._drop_producer()
            wait(futures, timeout=self._confirm_timeout)
            raise BrokerError(
                f"RocketMQ: send of {len(batch)} not started: {_one_line(exc)}"
            ) from None
        timeout = self._confirm_timeout * longest
        done, pending = wait(futures, timeout=timeout)
        errors = [f.exception() for f in done if f.exception() is not None]
        if pending or errors:
            # The producer keeps the topic's route it had when the master went away (it
            # refreshes it only every 30 s): the next send starts a new one, which asks.
            self._drop_producer()
        if pending:
            raise BrokerError(
                f"RocketMQ: {len(pending)} of {len(futures)} sends not confirmed within "
                f"{timeout:.0f} s"
            )
        if errors:
            raise BrokerError(
                f"RocketMQ: {len(errors)} of {len(futures)} sends failed: {_one_line(errors[0])}"
            )

    def _drop_consumer(self) -> None:
        consumer, self._consumer = self._consumer, None
        self._unacked.clear()
        if consumer is not None:
            with contextlib.suppress(Exception):
                consumer.shutdown()

    def _drop_producer(self) -> None:
        producer, self._producer = self._producer, None
        if producer is not None:
            with contextlib.suppress(Exception):
                producer.shutdown()

    def receive(self, max_n: int) -> list[Received[int]]:
        consumer = self._consumer_for_receive()
        try:
            messages = consumer.receive(max_n, int(self.params.invisible_duration))
        except Exception as exc:
            # Right after start-up the proxy may not have this consumer's settings yet.
            if time.monotonic() - self._consumer_started < SETTINGS_GRACE and "settings" in str(
                exc
            ):
                time.sleep(0.2)
                return []
            # Like a producer, the consumer would keep a stale route for 30 s: start anew.
            # What it received and did not acknowledge comes back after invisible_duration.
            self._drop_consumer()
            raise
        received = []
        for message in messages:
            token = next(self._tokens)
            self._unacked[token] = message
            attempt = message.delivery_attempt or 1
            received.append(Received(message.body, token, attempt > 1))
        return received

    def ack(self, receipts: Sequence[int]) -> None:
        consumer = self._consumer_for_receive()
        messages = [self._unacked.pop(r, None) for r in receipts]
        pending = [m for m in messages if m is not None]
        if len(pending) == 1:
            consumer.ack(pending[0])
        elif pending:
            # One request per message: send them concurrently, raise the first failure.
            if self._ack_pool is None:
                self._ack_pool = ThreadPoolExecutor(16, thread_name_prefix="rocketmq-ack")
            list(self._ack_pool.map(consumer.ack, pending))

    def close(self) -> None:
        self._unacked.clear()
        for pool in (self._ack_pool, self._key_pool):
            if pool is not None:
                pool.shutdown(wait=True)
        for client in (self._producer, self._consumer):
            if client is not None:
                with contextlib.suppress(Exception):
                    client.shutdown()


def _one_line(error: BaseException | None) -> str:
    return " ".join(str(error).split())[:300]


def connect(
    endpoints: Endpoints, params: RocketMQParams, destination: Destination
) -> RocketMQAdapter:
    """One worker's client; fails within seconds, naming the proxy, when it is unreachable."""
    require_reachable(endpoints, "RocketMQ proxy")
    return RocketMQAdapter(endpoints, params, destination)
