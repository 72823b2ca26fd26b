"""A batch-sticky partitioner for kafka-python: every keyless record of one send batch goes
to the same partition, so the batch leaves as one produce request; the next batch picks
another partition at random among those with a leader. Keyed records keep kafka-python's
hashing. (kafka-python's default sends each keyless record to a random partition, which
turns a batch of 10 into up to 10 requests.)
"""

from __future__ import annotations

import random
from typing import Any

from kafka.partitioner import DefaultPartitioner, Partitioner


class BatchPartitioner(Partitioner):
    """Sticks to one partition per topic until :meth:`next_batch`."""

    def __init__(self) -> None:
        self._hashing = DefaultPartitioner()
        self._current: dict[str, int] = {}
        self._previous: dict[str, int] = {}
        self._random = random.Random()

    def next_batch(self) -> None:
        """The records that follow belong to a new batch: move to another partition."""
        self._previous.update(self._current)
        self._current.clear()

    def partition(
        self,
        topic: str,
        key: Any,
        serialized_key: bytes | None,
        value: Any,
        serialized_value: bytes | None,
        cluster: Any,
    ) -> int:
        if serialized_key is not None:
            return int(
                self._hashing.partition(
                    topic, key, serialized_key, value, serialized_value, cluster
                )
            )
        available = cluster.available_partitions_for_topic(topic) or ()
        chosen = self._current.get(topic)
        if chosen is None or (available and chosen not in available):
            chosen = self._pick(topic, sorted(available or cluster.partitions_for_topic(topic)))
            self._current[topic] = chosen
        return chosen

    def _pick(self, topic: str, pool: list[int]) -> int:
        previous = self._previous.get(topic)
        others = [p for p in pool if p != previous] if len(pool) > 1 else pool
        return self._random.choice(others)
