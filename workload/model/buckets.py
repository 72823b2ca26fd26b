"""The buckets of the latency histograms (:mod:`workload.engine.histogram`): what a bucket number
in the raw tables' histogram columns means, for the workers that fill them and the analysis
that reads them back.

Bucket ``i`` holds values in ``(γ^(i-1), γ^i]`` microseconds with ``γ = (1+α)/(1-α)`` and
``α = 1 %``; bucket 0 everything from 0 up to 1 µs; :data:`MAX_BUCKET` is the one holding
10 minutes; :data:`NEGATIVE` and :data:`CLIPPED` count what lies outside that range.
"""

from __future__ import annotations

import math

ALPHA = 0.01
GAMMA = (1 + ALPHA) / (1 - ALPHA)
MAX_US = 600e6  # 10 minutes
MAX_BUCKET = math.ceil(math.log(MAX_US) / math.log(GAMMA))
#: The bucket of negative latencies.
NEGATIVE = -1
#: The bucket of latencies beyond the range (above :data:`MAX_BUCKET`'s upper bound).
CLIPPED = MAX_BUCKET + 1
