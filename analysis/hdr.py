"""Each point's whole-run histograms as HdrHistogram percentile-distribution files.

The ``.hgrm`` text is what HdrHistogram's ``outputPercentileDistribution`` prints and what
its plotter (and the tools built on it) read: a header, then one line per value with the
percentile reached at it, the count so far and ``1/(1-percentile)``, and a footer with mean,
standard deviation, max and total count. Values are milliseconds. brokerbench's histograms
are log-scale buckets 1 % wide (:mod:`workload.model.buckets`), so every line is one non-empty
bucket at its representative value; negative latencies (clocks apart) read as 0. Where a
point's file goes is :meth:`workload.model.layout.RunLayout.hdr`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass


@dataclass(frozen=True)
class Bucket:
    """One non-empty bucket of a merged histogram."""

    bucket: int
    count: int
    value_ms: float


def hgrm(buckets: Iterable[Bucket]) -> str:
    """The percentile distribution of one histogram ("" for an empty one)."""
    ordered = sorted((b for b in buckets if b.count > 0), key=lambda b: b.bucket)
    total = sum(b.count for b in ordered)
    if not total:
        return ""
    lines = [f"{'Value':>12} {'Percentile':>14} {'TotalCount':>10} {'1/(1-Percentile)':>14}", ""]
    seen = 0
    for b in ordered:
        seen += b.count
        fraction = seen / total
        if seen < total:
            lines.append(
                f"{b.value_ms:12.3f} {fraction:14.12f} {seen:10d} {1 / (1 - fraction):14.2f}"
            )
        else:
            lines.append(f"{b.value_ms:12.3f} {fraction:14.12f} {seen:10d}")
    mean = sum(b.value_ms * b.count for b in ordered) / total
    variance = sum(b.count * (b.value_ms - mean) ** 2 for b in ordered) / total
    lines += [
        f"#[Mean    = {mean:12.3f}, StdDeviation   = {math.sqrt(variance):12.3f}]",
        f"#[Max     = {ordered[-1].value_ms:12.3f}, Total count    = {total:12d}]",
    ]
    return "\n".join(lines) + "\n"
