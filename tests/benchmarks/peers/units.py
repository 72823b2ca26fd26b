"""Numbers as load tools print them: thousands separators, latency units, percentiles."""

from __future__ import annotations

import math
from collections.abc import Sequence

_TO_MS = {"ns": 1e-6, "us": 1e-3, "µs": 1e-3, "μs": 1e-3, "ms": 1.0, "s": 1e3}


def number(text: str) -> float:
    """``"38,985"`` → 38985.0."""
    return float(text.replace(",", "").strip())


def to_ms(value: float, unit: str) -> float:
    """A latency in ``unit`` (ns, us/µs, ms, s) in milliseconds."""
    try:
        return value * _TO_MS[unit.strip()]
    except KeyError:
        raise ValueError(f"unknown latency unit {unit!r}") from None


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Nearest-rank percentile ``q`` (0–100) of already sorted values."""
    if not sorted_values:
        raise ValueError("no values")
    rank = max(1, math.ceil(q / 100 * len(sorted_values)))
    return sorted_values[rank - 1]
