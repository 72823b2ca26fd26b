"""Names derived from a run id: the tag stamped into every message and the destination
(queue/topic/table) of each sweep point. Every client machine derives the same names."""

from __future__ import annotations

import hashlib

from brokers.base import Destination


def run_tag(run_id: str) -> str:
    return hashlib.sha256(run_id.encode()).hexdigest()[:8]


def point_tag(tag: str, point: int) -> str:
    return f"{tag}.{point:x}"


def destination_name(tag: str, point: int, keyed: bool = False) -> Destination:
    return Destination(f"bb_{tag}_p{point}", keyed)
