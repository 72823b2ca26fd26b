"""Mergeable log-scale latency histograms (docs/measurement.md §3).

Bucket ``i`` holds values in ``(γ^(i-1), γ^i]`` microseconds with ``γ = (1+α)/(1-α)`` and
``α = 1 %``; it is represented by ``2γ^i/(γ+1)``, which is within α of every value in it.
Bucket 0 holds everything from 0 up to 1 µs; :data:`MAX_BUCKET` is the one holding 10
minutes. Two buckets of their own count what lies outside that range rather than folding it
silently into the nearest one. A negative latency (a message received before it was sent, by
the receiver's clock: two nodes' clocks differ by more than the latency) goes to
:data:`NEGATIVE`, not read as 1 µs: it reads as 0 and, as the lowest bucket, leaves the ranks
of the other samples as they are. A latency above :data:`MAX_BUCKET` (about 10.1 minutes: a
backlog that old) goes to :data:`CLIPPED`: it reads as 10 minutes (:data:`MAX_US`, a lower
bound) and, as the highest bucket, keeps its rank above every other sample. Histograms are
sparse ``{bucket: count}`` maps and merge by adding counts, so percentiles of merged
histograms are exact to the bucket width — never averages of percentiles.
The analysis job uses the same constants to read the buckets back.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

import numpy as np

from workload.model.buckets import CLIPPED, GAMMA, MAX_BUCKET, MAX_US, NEGATIVE

_INV_LOG_GAMMA = 1.0 / math.log(GAMMA)


def bucket_value(i: int) -> float:
    """The representative latency (µs) of bucket ``i`` (0 for :data:`NEGATIVE`, :data:`MAX_US`
    for :data:`CLIPPED`)."""
    if i == NEGATIVE:
        return 0.0
    return 2.0 * GAMMA**i / (GAMMA + 1.0) if i != CLIPPED else MAX_US


class Histogram:
    """A sparse bucket → count map with O(1) recording."""

    __slots__ = ("counts",)

    def __init__(self, counts: Mapping[int, int] | None = None) -> None:
        self.counts: dict[int, int] = dict(counts or {})

    def record(self, us: float) -> None:
        if us <= 1.0:
            i = 0 if us >= 0.0 else NEGATIVE
        else:
            i = math.ceil(math.log(us) * _INV_LOG_GAMMA)
            if i > MAX_BUCKET:
                i = CLIPPED
        counts = self.counts
        counts[i] = counts.get(i, 0) + 1

    def record_many(self, values_us: Iterable[float]) -> None:
        """:meth:`record` for many values (one call per received batch)."""
        counts = self.counts
        get = counts.get
        log = math.log
        ceil = math.ceil
        for us in values_us:
            if us <= 1.0:
                i = 0 if us >= 0.0 else NEGATIVE
            else:
                i = ceil(log(us) * _INV_LOG_GAMMA)
                if i > MAX_BUCKET:
                    i = CLIPPED
            counts[i] = get(i, 0) + 1

    def record_array(self, values_us: np.ndarray) -> None:
        """:meth:`record` for a numpy array of values, in a few array operations (a large
        received batch)."""
        if not len(values_us):
            return
        with np.errstate(divide="ignore", invalid="ignore"):
            above = np.ceil(np.log(values_us) * _INV_LOG_GAMMA)
        buckets = np.where(
            values_us <= 1.0,
            np.where(values_us >= 0.0, 0, NEGATIVE),
            np.minimum(above, CLIPPED),
        ).astype(np.int64)
        # Counts per bucket, shifted by one so that NEGATIVE (-1) has an index.
        counts = np.bincount(buckets + 1)
        found = np.flatnonzero(counts)
        mine = self.counts
        get = mine.get
        for index, n in zip(found.tolist(), counts[found].tolist(), strict=True):
            mine[index - 1] = get(index - 1, 0) + n

    def __bool__(self) -> bool:
        return bool(self.counts)


def percentile_of(buckets: Iterable[tuple[int, int]], q: float) -> float | None:
    """Percentile of (bucket, count) pairs: the bucket holding the sample of rank ⌈q·n⌉."""
    ordered = sorted(buckets)
    total = sum(n for _, n in ordered)
    if total == 0:
        return None
    rank = max(1, math.ceil(q * total))
    seen = 0
    for i, n in ordered:
        seen += n
        if seen >= rank:
            return bucket_value(i)
    return bucket_value(ordered[-1][0])
