"""The confluent-kafka adapter's delivery bookkeeping of one batch (no broker needed):
a batch is confirmed once every message's report came, and fails when some of it could not
even be queued."""

from __future__ import annotations

from typing import Any

import pytest

from brokers.base import Endpoints
from brokers.errors import BrokerError
from brokers.kafka.confluent import Delivery

ENDPOINTS = Endpoints(("127.0.0.1:9092",))


class IdleProducer:
    def poll(self, timeout: float) -> int:
        return 0


def test_a_batch_is_done_when_every_report_came() -> None:
    delivery = Delivery(IdleProducer(), ENDPOINTS, 3)
    for _ in range(2):
        delivery(None, object())
    assert delivery.wait(0) is None
    delivery(None, object())
    assert delivery.wait(0) is not None


def test_messages_that_were_never_queued_fail_the_batch() -> None:
    delivery = Delivery(IdleProducer(), ENDPOINTS, 5)
    for _ in range(3):
        delivery(None, object())
    delivery.not_queued(2, None)  # the producer's queue was full
    with pytest.raises(BrokerError, match="_QUEUE_FULL"):
        delivery.wait(0)


def test_a_failed_report_fails_the_batch_with_its_error() -> None:
    from confluent_kafka import KafkaError

    delivery = Delivery(IdleProducer(), ENDPOINTS, 2)
    delivery(KafkaError(KafkaError._MSG_TIMED_OUT), object())
    error: Any = None
    delivery.not_queued(1, error)
    with pytest.raises(BrokerError, match="_MSG_TIMED_OUT"):
        delivery.wait(0)
