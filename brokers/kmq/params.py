"""KMQ's ``[broker.params]``: Kafka's, plus how long a message may stay unacknowledged."""

from __future__ import annotations

from brokers.connection import seconds
from brokers.kafka.params import KafkaParams


class KmqParams(KafkaParams):
    redelivery_timeout: float = seconds(
        15.0, "Seconds after which a received, unacknowledged message is sent again."
    )
