"""Whether a point holds a rate within a processing-latency SLO: the rule of the capacity
search (:mod:`workload.engine.search`), which the analysis applies to its summary rows too, and
how its figures are written.
"""

from __future__ import annotations

import math
from typing import NamedTuple

#: Receivers kept up when they acknowledged at least this share of the send rate (the
#: analysis's ``analysis.transforms.KEEP_UP_RATIO``).
KEEP_UP_RATIO = 0.95
#: The senders produced the rate when they sent at least this share of the target rate.
TARGET_RATIO = 0.95
#: The quantile the SLO bounds.
SLO_QUANTILE = 0.99


class Verdict(NamedTuple):
    """Whether a probe held its rate and the SLO, and why (a short line)."""

    holds: bool
    reason: str


def verdict(
    *,
    target_msgs_per_s: float,
    send_msgs_per_s: float | None,
    receive_msgs_per_s: float | None,
    errors: int | None,
    processing_latency_p99_ms: float | None,
    slo_p99_ms: float,
) -> Verdict:
    """Whether a point at ``target_msgs_per_s`` (in total) holds: receivers kept up
    (acknowledged ≥ 95 % of the send rate over the measurement period), the senders sent ≥
    95 % of the target rate (else the clients, or a broker too slow to confirm, set the
    pace: the target was not offered), no call failed, and the whole-run processing-latency
    p99 after the warm-up is at most the SLO.

    The arguments are named as the analysis's summary columns. The reason lists every
    condition that failed ("p99 73.1 ms > SLO 50 ms; receivers did not keep up (…)"), or
    says by how much the p99 was within the SLO.
    """
    failed: list[str] = []
    if not send_msgs_per_s:
        failed.append("no message was confirmed sent")
    else:
        reached = send_msgs_per_s / target_msgs_per_s
        if reached < TARGET_RATIO:
            failed.append(f"senders reached only {_percent(reached)} % of the target rate")
        if receive_msgs_per_s is None or receive_msgs_per_s < send_msgs_per_s * KEEP_UP_RATIO:
            share = (receive_msgs_per_s or 0.0) / send_msgs_per_s
            failed.append(
                f"receivers did not keep up ({_percent(share)} % of the send rate acknowledged)"
            )
    if errors:
        failed.append(f"{errors:,} failed call(s)")
    slo = f"SLO {format_ms(slo_p99_ms)} ms"
    if processing_latency_p99_ms is None:
        failed.append("no processing latency was recorded")
    elif processing_latency_p99_ms > slo_p99_ms:
        failed.append(f"p99 {format_ms(processing_latency_p99_ms)} ms > {slo}")
    if failed:
        return Verdict(False, "; ".join(failed))
    assert processing_latency_p99_ms is not None
    return Verdict(True, f"p99 {format_ms(processing_latency_p99_ms)} ms ≤ {slo}")


def _percent(share: float) -> int:
    """A share as whole percent, rounded down (94.9 % is not read as 95 %)."""
    return math.floor(share * 100 + 1e-9)


def format_ms(ms: float) -> str:
    """``73.1``, ``12.3``, ``0.847``, ``1,234``: three significant digits below a second."""
    return f"{ms:,.0f}" if ms >= 1000 else f"{ms:.3g}"


def format_share(share: float) -> str:
    """``0.05`` → ``5 %``, ``0.125`` → ``12.5 %``."""
    return f"{share * 100:.3g} %"


def format_rate(rate: float) -> str:
    """``25,000``, ``31,623``; a rate below 100 msgs/s with its fraction (``0.5``)."""
    return f"{rate:,.0f}" if rate >= 100 else f"{rate:.3g}"
