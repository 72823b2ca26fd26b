"""The bucket a latency falls in, as the engine's histograms record it (for tests)."""

from __future__ import annotations

from workload.engine.histogram import Histogram


def bucket_of(us: float) -> int:
    """The bucket :meth:`Histogram.record` counts a latency of ``us`` microseconds in."""
    histogram = Histogram()
    histogram.record(us)
    (bucket,) = histogram.counts
    return bucket
