"""Log-scale histograms: ≤ 1 % relative error from 1 µs to 10 min."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from tests.buckets import bucket_of
from workload.engine.histogram import Histogram, bucket_value, percentile_of
from workload.model.buckets import ALPHA, CLIPPED, MAX_BUCKET, MAX_US, NEGATIVE

latencies = st.floats(min_value=1.0, max_value=MAX_US, allow_nan=False)


@given(latencies)
def test_relative_error_at_most_one_percent(us: float) -> None:
    assert abs(bucket_value(bucket_of(us)) - us) / us <= ALPHA + 1e-12


def test_fifty_ms_samples_do_not_read_as_bucket_edges() -> None:
    h = Histogram()
    for us in (1_000, 2_000, 5_000):
        h.record(us)
    assert math.isclose(percentile_of(h.counts.items(), 0.0) or 0, 1_000, rel_tol=ALPHA)
    assert math.isclose(percentile_of(h.counts.items(), 0.5) or 0, 2_000, rel_tol=ALPHA)


@given(st.lists(latencies, min_size=1, max_size=500), st.sampled_from([0.5, 0.95, 0.99, 1.0]))
def test_percentile_is_the_ranked_sample_within_alpha(values: list[float], q: float) -> None:
    h = Histogram()
    for v in values:
        h.record(v)
    exact = sorted(values)[max(1, math.ceil(q * len(values))) - 1]
    got = percentile_of(h.counts.items(), q)
    assert got is not None
    assert abs(got - exact) / exact <= ALPHA + 1e-9


def test_extremes() -> None:
    assert bucket_of(0.2) == 0
    assert bucket_of(MAX_US) == MAX_BUCKET
    assert percentile_of(Histogram().counts.items(), 0.5) is None


def test_latencies_beyond_the_range_are_counted_apart_and_read_as_ten_minutes() -> None:
    one, many = Histogram(), Histogram()
    values = [1_000.0, MAX_US, MAX_US * 1.5, 3_600e6]  # 1 ms, 10 min, 15 min, 1 h
    for us in values:
        one.record(us)
    many.record_many(values)
    assert one.counts == many.counts
    assert one.counts[CLIPPED] == 2 and one.counts[MAX_BUCKET] == 1
    assert bucket_of(MAX_US * 100) == CLIPPED and bucket_value(CLIPPED) == MAX_US
    # The highest bucket: they rank above the 10-minute sample, a lower bound of their value.
    assert math.isclose(percentile_of(one.counts.items(), 0.5) or 0, MAX_US, rel_tol=ALPHA)
    assert (
        percentile_of(one.counts.items(), 0.75) == percentile_of(one.counts.items(), 1.0) == MAX_US
    )


def test_negative_latencies_are_counted_apart_and_read_as_zero() -> None:
    one, many = Histogram(), Histogram()
    values = [-250_000.0, -0.5, 0.0, 0.5, 1_000.0, 2_000.0]
    for us in values:
        one.record(us)
    many.record_many(values)
    assert one.counts == many.counts
    assert one.counts[NEGATIVE] == 2 and one.counts[0] == 2
    assert bucket_of(-0.5) == NEGATIVE and bucket_value(NEGATIVE) == 0.0
    # The lowest bucket: the other samples keep their ranks.
    assert percentile_of(one.counts.items(), 2 / 6) == 0.0
    assert math.isclose(percentile_of(one.counts.items(), 5 / 6) or 0, 1_000, rel_tol=ALPHA)
