"""KMQ's ``[broker.params]``: Kafka's, plus how long a message may stay unacknowledged."""

from __future__ import annotations

from pydantic import Field

from brokers.kafka.params import KafkaParams


class KmqParams(KafkaParams):
    redelivery_timeout: float = Field(
        15.0,
        ge=0.1,
        le=3600,
        description="Seconds after which a received, unacknowledged message is sent again.",
    )
