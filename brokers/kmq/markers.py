"""KMQ's marker records: a start marker before a message is handed to a receiver, an end
marker when it was acknowledged, both on the markers topic.

The marker key names the message (queue partition and offset); markers of queue
partition *p* go to markers partition *p*, so a message's start and end markers stay in
order. A start marker carries the time (ms since the epoch) after which the message is
redelivered unless its end marker arrived.
"""

from __future__ import annotations

from dataclasses import dataclass

START = b"S"
END = b"E"
#: Header put on a message the tracker sent again.
REDELIVERED_HEADER = "kmq-redelivered"


def markers_topic(queue_topic: str) -> str:
    return f"{queue_topic}.markers"


def key(partition: int, offset: int) -> bytes:
    return b"%d:%d" % (partition, offset)


def start(redeliver_at_ms: int) -> bytes:
    return START + b"%d" % redeliver_at_ms


def end() -> bytes:
    return END


@dataclass(frozen=True, slots=True)
class Marker:
    partition: int
    offset: int
    is_start: bool
    redeliver_at_ms: int = 0


def parse(raw_key: bytes | None, value: bytes | None) -> Marker | None:
    """A marker record's meaning, or None for anything else on the topic."""
    if not raw_key or not value:
        return None
    try:
        partition, offset = (int(part) for part in raw_key.split(b":", 1))
        if value.startswith(START):
            return Marker(partition, offset, True, int(value[len(START) :]))
        if value == END:
            return Marker(partition, offset, False)
    except ValueError:
        return None
    return None
