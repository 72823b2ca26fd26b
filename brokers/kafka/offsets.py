"""What a Kafka receiver may commit: offsets handed out, acknowledged and committed per
partition (:class:`AckTracker`), and the consumer group of a sweep point. Shared by the
adapters of every client library.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

from brokers.base import Destination


def group_of(destination: Destination) -> str:
    """The consumer group every receiver of one sweep point joins."""
    return f"{destination.name}.receivers"


class AckTracker:
    """Per partition: offsets handed out but not acknowledged, and what may be committed.

    The committable offset of a partition is its lowest unacknowledged offset, or one
    past the highest offset handed out when everything was acknowledged.
    """

    def __init__(self) -> None:
        self._open: dict[int, set[int]] = defaultdict(set)
        self._next: dict[int, int] = {}
        self._committed: dict[int, int] = {}

    def handed_out(self, partition: int, offset: int) -> None:
        self._open[partition].add(offset)
        self._next[partition] = max(self._next.get(partition, 0), offset + 1)

    def handed_out_many(self, partition: int, offsets: list[int]) -> None:
        """:meth:`handed_out` for offsets of one partition, in the order fetched."""
        self._open[partition].update(offsets)
        self._next[partition] = max(self._next.get(partition, 0), max(offsets) + 1)

    def acked(self, partition: int, offset: int) -> None:
        pending = self._open.get(partition)
        if pending is not None:
            pending.discard(offset)

    def acked_many(self, partition: int, offsets: list[int]) -> None:
        pending = self._open.get(partition)
        if pending is not None:
            pending.difference_update(offsets)

    def rewind(self, partition: int, offset: int) -> None:
        """Messages from ``offset`` on will be received again: stop counting them."""
        pending = self._open.get(partition)
        if pending is not None:
            pending.difference_update([o for o in pending if o >= offset])
        if partition in self._next:
            self._next[partition] = min(self._next[partition], offset)

    def unacked(self) -> int:
        return sum(len(v) for v in self._open.values())

    def commit_points(self, partitions: Iterable[int] | None = None) -> dict[int, int]:
        """Offsets to commit now (only those that moved since the last commit)."""
        chosen = self._next if partitions is None else set(partitions) & set(self._next)
        points: dict[int, int] = {}
        for partition in chosen:
            pending = self._open.get(partition)
            point = min(pending) if pending else self._next[partition]
            if point > self._committed.get(partition, -1):
                points[partition] = point
        return points

    def committed(self, points: dict[int, int]) -> None:
        self._committed.update(points)

    def forget(self, partitions: Iterable[int]) -> None:
        for partition in partitions:
            self._open.pop(partition, None)
            self._next.pop(partition, None)
            self._committed.pop(partition, None)
