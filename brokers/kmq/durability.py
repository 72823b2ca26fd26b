"""What a confirmed KMQ send survives: Kafka's (:mod:`brokers.kafka.durability`), read
from the queue topic and its markers topic, which are prepared alike — the lower
replication factor of the two counts."""

from __future__ import annotations

from brokers.kafka.durability import durability

__all__ = ["durability"]
