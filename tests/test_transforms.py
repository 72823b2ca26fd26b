"""The Spark analysis on small inputs with answers worked out by hand."""

from __future__ import annotations

import math

import pytest

from analysis import transforms as tf
from analysis.raw_tables import spark_schema
from tests.buckets import bucket_of
from workload.engine.histogram import bucket_value
from workload.model.buckets import CLIPPED, MAX_US, NEGATIVE
from workload.model.results import RECEIVED_SCHEMA, SECONDS_SCHEMA, SENT_RANGES_SCHEMA

pytestmark = [pytest.mark.spark, pytest.mark.slow]

B1MS, B100MS = bucket_of(1_000), bucket_of(100_000)


def second_row(point, worker, second, sent=0, acked=0, proc=None, send=None, role="sender"):
    return (
        "r",
        point,
        role,
        0,
        worker,
        second,
        sent,
        acked,
        acked,
        0,
        0,
        0,
        0,  # active_tenths: the analysis of rates does not read them
        send or {},
        proc or {},
        {},
        100 * sent,  # sent_bytes: 100-byte messages
        100 * acked,
        100 * acked,
    )


@pytest.fixture
def seconds(spark):
    rows = []
    for s in range(100, 110):  # point 0: 2 workers × 10 msgs/s, receivers ack 19/s
        rows.append(second_row(0, 0, s, sent=10, send={B1MS: 1}))
        rows.append(second_row(0, 1, s, sent=10, send={B1MS: 1}))
        rows.append(second_row(0, 0, s, acked=19, role="receiver", proc={B1MS: 18, B100MS: 1}))
    for s in range(200, 203):  # point 1: receivers fall behind (10 of 20 per second)
        rows.append(second_row(1, 0, s, sent=20))
        rows.append(second_row(1, 0, s, acked=10, role="receiver"))
    return spark.createDataFrame(rows, spark_schema(SECONDS_SCHEMA))


def test_throughput_and_keep_up_flag(seconds):
    counters = tf.counters_per_second(seconds)
    periods = tf.measurement_periods(seconds, warmup_s=0)
    got = {r["point"]: r for r in tf.throughput(counters, periods).collect()}
    assert got[0]["send_msgs_per_s"] == 20.0 and got[0]["receive_msgs_per_s"] == 19.0
    # 100 bytes each: 2,000 and 1,900 bytes/s, in MB/s; the totals are every second's.
    assert got[0]["send_mb_per_s"] == 0.002 and got[0]["receive_mb_per_s"] == 0.0019
    assert got[0]["sent_bytes"] == 100 * got[0]["sent"] == 20_000
    # Seconds 101..108: the first and last sending seconds are partial, left out.
    assert got[0]["receivers_kept_up"] is True and got[0]["measured_seconds"] == 8
    assert got[1]["sent"] == 60 and got[1]["receivers_kept_up"] is False


def test_warmup_shortens_the_period(seconds):
    periods = tf.measurement_periods(seconds, warmup_s=4)
    got = {
        r["point"]: (r["start"], r["end"], r["seconds"], r["latency_start"], r["latency_end"])
        for r in periods.collect()
    }
    assert got[0] == (104, 108, 5, 104, 109)


def open_loop_worker(worker, start_s, duration_s, rate, latency_s=0.002):
    """Per-second rows of a sender worker confirming one message per slot of an exact rate
    from ``start_s`` (a fraction of a second in) for ``duration_s``."""
    counts: dict[int, int] = {}
    for k in range(int(duration_s * rate)):
        second = math.floor(start_s + k / rate + latency_s)
        counts[second] = counts.get(second, 0) + 1
    return [second_row(0, worker, s, sent=n, acked=n) for s, n in sorted(counts.items())]


@pytest.mark.parametrize(("duration_s", "warmup_s"), [(40, 8), (20, 4), (20, 0)])
def test_an_open_loop_run_at_an_exact_rate_reads_that_rate(spark, duration_s, warmup_s):
    # Two workers at 1,000 msgs/s each, started 0.44 s apart, mid-second.
    rows = open_loop_worker(0, 100.37, duration_s, 1000) + open_loop_worker(
        1, 100.81, duration_s, 1000
    )
    seconds = spark.createDataFrame(rows, spark_schema(SECONDS_SCHEMA))
    counters = tf.counters_per_second(seconds)
    periods = tf.measurement_periods(seconds, warmup_s)
    (got,) = tf.throughput(counters, periods).collect()
    assert got["send_msgs_per_s"] == pytest.approx(2000, rel=0.005)
    assert got["receive_msgs_per_s"] == pytest.approx(2000, rel=0.005)


@pytest.mark.parametrize(("duration_s", "warmup_s"), [(40, 8), (20, 0)])
def test_window_rates_of_an_exact_rate_read_that_rate_in_every_window(spark, duration_s, warmup_s):
    """The windows at either end of the latency span hold partial seconds of the senders:
    their rates count only the rate period's whole seconds, as the summary's do."""
    rows = open_loop_worker(0, 100.37, duration_s, 1000) + open_loop_worker(
        1, 100.81, duration_s, 1000
    )
    seconds = spark.createDataFrame(rows, spark_schema(SECONDS_SCHEMA))
    counters = tf.counters_per_second(seconds)
    periods = tf.measurement_periods(seconds, warmup_s)
    windows = tf.window_starts(periods, window_s=5, step_s=5)
    series = tf.window_series(counters, tf.histogram_per_second(seconds), windows).collect()
    assert len(series) >= 3
    (summary,) = tf.throughput(counters, periods).collect()
    for window in series:
        assert window["send_msgs_per_s"] == pytest.approx(summary["send_msgs_per_s"], rel=0.005)
        assert window["receive_msgs_per_s"] == pytest.approx(2000, rel=0.005)


def test_windows_inside_the_period_or_one_short_window(spark, seconds):
    periods = tf.measurement_periods(seconds, warmup_s=0)
    windows = tf.window_starts(periods, window_s=5, step_s=1)
    got = sorted(
        (r["run_id"], r["point"], r["window_start"], r["window_seconds"]) for r in windows.collect()
    )
    assert got == [("r", 0, s, 5) for s in range(100, 106)] + [("r", 1, 200, 3)]


def test_a_last_window_ends_with_the_period_so_a_stall_at_the_end_is_in_the_headline(spark):
    # Seconds 100..109, 1 ms each, but a stall of 100 ms in the last second.
    rows = [second_row(0, 0, s, sent=10, send={B1MS: 1}) for s in range(100, 110)]
    rows += [
        second_row(0, 0, s, acked=10, role="receiver", proc={B100MS if s == 109 else B1MS: 10})
        for s in range(100, 110)
    ]
    seconds = spark.createDataFrame(rows, spark_schema(SECONDS_SCHEMA))
    periods = tf.measurement_periods(seconds, warmup_s=0)
    windows = tf.window_starts(periods, window_s=5, step_s=2)
    assert sorted(r["window_start"] for r in windows.collect()) == [100, 102, 104, 105]
    series = tf.window_series(
        tf.counters_per_second(seconds), tf.histogram_per_second(seconds), windows
    )
    (head,) = tf.headline(series).collect()
    assert math.isclose(head["processing_latency_window_p95_ms"], 100, rel_tol=0.01)


def test_percentiles_of_merged_histograms(seconds):
    hist = tf.histogram_per_second(seconds)
    periods = tf.measurement_periods(seconds, warmup_s=0)
    whole = tf.whole_run(tf.run_histograms(hist, periods))
    rows = {(r["point"], r["metric"]): r for r in whole.collect() if r["point"] == 0}
    proc = rows[(0, "processing_latency")]
    assert proc["samples"] == 190  # 19 per second over 10 s, merged, not averaged
    assert math.isclose(proc["p50_ms"], bucket_value(B1MS) / 1000)
    assert math.isclose(proc["p95_ms"], bucket_value(B100MS) / 1000)  # 10 of 190 samples are slow
    assert math.isclose(proc["p95_ms"], 100, rel_tol=0.01)
    assert math.isclose(rows[(0, "send_latency")]["max_ms"], 1, rel_tol=0.01)


def test_headline_is_the_max_windowed_p95(seconds):
    counters = tf.counters_per_second(seconds)
    hist = tf.histogram_per_second(seconds)
    periods = tf.measurement_periods(seconds, 0)
    series = tf.window_series(counters, hist, tf.window_starts(periods, 5, 1))
    head = {r["point"]: r for r in tf.headline(series).collect()}
    assert math.isclose(head[0]["processing_latency_window_p95_ms"], 100, rel_tol=0.01)
    assert math.isclose(head[0]["send_latency_window_p95_ms"], 1, rel_tol=0.01)
    # Closed loop: nothing was due, so there is no send delay — empty, not 0.
    assert head[0]["send_delay_window_p95_ms"] is None


def test_latencies_out_of_range_are_counted_and_read_as_zero_or_ten_minutes(spark, seconds):
    # Point 2: 3 of 4 messages "received before they were sent" (receiver clock behind);
    # a negative send latency is not a processing latency and is not counted. Beyond the
    # range: two processing latencies and a send latency, all counted.
    ahead = {NEGATIVE: 3, B1MS: 1}
    rows = [
        second_row(2, 0, 300, sent=4, send={NEGATIVE: 1}),
        second_row(2, 0, 300, acked=4, role="receiver", proc=ahead),
        second_row(3, 0, 400, sent=4, send={B1MS: 3, CLIPPED: 1}),
        second_row(3, 0, 400, acked=4, role="receiver", proc={B1MS: 2, CLIPPED: 2}),
    ]
    more = spark.createDataFrame(rows, spark_schema(SECONDS_SCHEMA))
    hist = tf.histogram_per_second(seconds.unionByName(more))
    got = {
        r["point"]: (r["negative_latencies"], r["clipped_latencies"])
        for r in tf.out_of_range(hist).collect()
    }
    assert got == {0: (0, 0), 2: (3, 0), 3: (0, 3)}  # point 1 recorded no latencies at all
    periods = tf.measurement_periods(more, warmup_s=0)
    whole = tf.whole_run(tf.run_histograms(tf.histogram_per_second(more), periods)).collect()
    proc = {(r["point"], r["metric"]): r for r in whole}
    ahead_proc, late_proc = proc[2, "processing_latency"], proc[3, "processing_latency"]
    assert ahead_proc["samples"] == 4 and ahead_proc["p50_ms"] == 0.0
    assert ahead_proc["p95_ms"] == ahead_proc["max_ms"]
    assert math.isclose(ahead_proc["max_ms"], bucket_value(B1MS) / 1000)
    assert math.isclose(late_proc["p50_ms"], bucket_value(B1MS) / 1000)
    assert late_proc["p95_ms"] == late_proc["max_ms"] == MAX_US / 1000  # read as 10 minutes


def test_counts_percentiles_and_windows_cover_one_span(spark):
    """The warm-up is out of the whole-run percentiles and of the out-of-range counts
    alike; a message received after the senders stopped (draining) is in both, and in a
    window too."""
    rows = [second_row(0, 0, s, sent=10, send={B1MS: 1}) for s in range(100, 110)]
    rows += [
        second_row(0, 0, s, acked=10, role="receiver", proc={NEGATIVE if s < 102 else B1MS: 10})
        for s in range(100, 110)
    ]
    rows.append(second_row(0, 0, 112, acked=2, role="receiver", proc={CLIPPED: 2}))  # draining
    seconds = spark.createDataFrame(rows, spark_schema(SECONDS_SCHEMA))
    hist = tf.histogram_per_second(seconds)
    periods = tf.measurement_periods(seconds, warmup_s=2)
    (period,) = periods.collect()
    assert (period["latency_start"], period["latency_end"]) == (102, 112)
    histograms = tf.run_histograms(hist, periods)
    (counts,) = tf.out_of_range(histograms).collect()
    assert (counts["negative_latencies"], counts["clipped_latencies"]) == (0, 2)
    whole = {r["metric"]: r for r in tf.whole_run(histograms).collect()}
    assert whole["processing_latency"]["samples"] == 8 * 10 + 2
    windows = tf.window_starts(periods, window_s=5, step_s=5)
    assert sorted(r["window_start"] for r in windows.collect()) == [102, 107, 108]
    series = tf.window_series(tf.counters_per_second(seconds), hist, windows).collect()
    last = max(series, key=lambda w: w["window_start"])
    assert last["processing_latency_max"] == MAX_US / 1000  # the drained messages
    # Rates: the rate period's whole seconds only (103..108: one in the last window).
    assert (last["send_msgs_per_s"], last["rate_seconds"]) == (10.0, 1)


def test_lost_duplicated_and_unconfirmed(spark):
    ranges = spark.createDataFrame(
        [("r", 0, 0, 0, 0, 9, 1), ("r", 0, 0, 0, 20, 29, 1), ("r", 0, 1, 0, 0, 4, 1)],
        spark_schema(SENT_RANGES_SCHEMA),
    )
    seqs = [(0, 0, s) for s in [*range(10), *range(20, 29), 5, 15]] + [(1, 0, s) for s in range(5)]
    received = spark.createDataFrame(
        [("r", 0, n, w, s, 0, 1, None, 100) for n, w, s in seqs], spark_schema(RECEIVED_SCHEMA)
    )
    (row,) = tf.delivery(ranges, received).collect()
    assert row["confirmed"] == 25
    assert row["lost"] == 1  # seq 29 of node 0
    assert row["duplicated"] == 1  # seq 5 twice
    assert row["unconfirmed_received"] == 1  # seq 15 arrived though its send failed


def test_delivery_counts_identities_across_words_ranges_and_partitions(spark):
    ranges = spark.createDataFrame(
        [
            ("r", 0, 0, 0, 0, 69, 1),  # ends mid-word (64..127)
            ("r", 0, 0, 0, 100, 130, 1),  # starts and ends mid-word
            ("r", 0, 0, 1, 60, 64, 1),  # straddles the word boundary at 64
            ("r", 1, 0, 0, 0, 9, 1),
        ],
        spark_schema(SENT_RANGES_SCHEMA),
    )
    seqs = {
        (0, 0, 0): [s for s in range(70) if s != 63]
        + [64, 64, 5]  # lost 63; 3 copies of 64
        + [75, 99]  # never confirmed
        + list(range(100, 130))
        + [128, 131],  # lost 130; 131 never confirmed
        (0, 0, 1): [*range(60, 65), 65, 59, 62],
        (0, 1, 0): [5],  # a sender worker without confirmed ranges
        (1, 0, 0): [*range(10), 3, -1, -65, -65],
        (2, 0, 0): [7],  # a point without confirmed ranges
    }
    rows = [("r", p, n, w, s, 0, 1, None, 100) for (p, n, w), ss in seqs.items() for s in ss]
    # Spread the copies of one identity over several partitions.
    received = spark.createDataFrame(rows, spark_schema(RECEIVED_SCHEMA)).repartition(3)
    got = {
        r["point"]: (r["confirmed"], r["lost"], r["duplicated"], r["unconfirmed_received"])
        for r in tf.delivery(ranges, received).collect()
    }
    assert got == {0: (106, 2, 5, 6), 1: (10, 0, 2, 2), 2: (0, 0, 0, 1)}


def test_identity_words_pack_what_fits_and_keep_the_rest_exact(spark):
    big_node, big_seq = 1 << 14, 1 << 38  # just outside the packed key
    seqs = [(3, 7, 0), (3, 7, 63), (3, 7, 63), (3, 7, 64), (3, 7, -1)]
    seqs += [(big_node, 0, 5), (0, 1 << 16, 5), (2, 2, big_seq), (2, 2, big_seq + 1)]
    received = spark.createDataFrame(
        [("r", 0, n, w, s, 0, 1, None, 100) for n, w, s in seqs], spark_schema(RECEIVED_SCHEMA)
    )
    got = {
        (r["sender_node"], r["sender_worker"], r["word"]): (r["bits"], r["rows"])
        for r in tf.identity_words(received).collect()
    }
    assert got == {
        (3, 7, 0): (1 | -(1 << 63), 3),  # bits 0 and 63 (the sign bit); 63 twice
        (3, 7, 1): (1, 1),
        (3, 7, -1): (-(1 << 63), 1),  # seq -1 is bit 63 of word -1
        (big_node, 0, 0): (1 << 5, 1),
        (0, 1 << 16, 0): (1 << 5, 1),
        (2, 2, 1 << 32): (3, 2),
    }


def test_accounting_claims_loss_only_where_receivers_drained(spark):
    # Every point confirmed seqs 0..9 and received 0..7 (seq 5 twice): 2 missing.
    ranges = spark.createDataFrame(
        [("r", p, 0, 0, 0, 9, 1) for p in range(3)], spark_schema(SENT_RANGES_SCHEMA)
    )
    seqs = [*range(8), 5, 42]  # 42 was never confirmed
    received = spark.createDataFrame(
        [("r", p, 0, 0, s, 0, 1, None, 100) for p in range(3) for s in seqs],
        spark_schema(RECEIVED_SCHEMA),
    )
    states = spark.createDataFrame(
        [("r", 0, tf.DRAINED), ("r", 1, tf.STOPPED), ("r", 2, tf.INCOMPLETE), ("r", 3, tf.NOT_RUN)],
        "run_id string, point int, state string",
    )
    got = {
        r["point"]: (
            r["confirmed"],
            r["lost"],
            r["not_drained"],
            r["duplicated"],
            r["unconfirmed_received"],
        )
        for r in tf.accounting(tf.delivery(ranges, received), states).collect()
    }
    assert got == {
        0: (10, 2, 0, 1, 1),  # drained: the 2 missing are lost
        1: (10, 0, 2, 1, 1),  # stopped early: the 2 missing were not drained, nothing lost
        2: (10, None, None, 1, None),  # a node's records are missing: nothing claimed
        3: (0, None, None, 0, None),  # never ran
    }


def test_accounting_of_a_stopped_point_with_nothing_received(spark):
    ranges = spark.createDataFrame([("r", 0, 0, 0, 0, 99, 1)], spark_schema(SENT_RANGES_SCHEMA))
    received = spark.createDataFrame([], spark_schema(RECEIVED_SCHEMA))
    states = spark.createDataFrame([("r", 0, tf.STOPPED)], "run_id string, point int, state string")
    (row,) = tf.accounting(tf.delivery(ranges, received), states).collect()
    assert (row["confirmed"], row["lost"], row["not_drained"]) == (100, 0, 100)


def test_whole_run_percentiles_leave_the_warmup_out(seconds):
    hist = tf.histogram_per_second(seconds)
    periods = tf.measurement_periods(seconds, warmup_s=4)
    whole = tf.whole_run(tf.run_histograms(hist, periods))
    proc = [r for r in whole.collect() if r["point"] == 0 and r["metric"] == "processing_latency"]
    assert proc[0]["samples"] == 19 * 6  # the first 4 of the 10 seconds are warm-up


def test_telemetry_belongs_to_the_point_whose_period_holds_its_second(spark) -> None:
    """A broker machine's sampler on AWS names no point (-1): its rows go to the point whose
    measurement period holds their second; the mean skips seconds a counter was not read."""
    from workload.model.results import TELEMETRY_SCHEMA

    def row(point, node, second, cpu, gc=None):
        values = dict.fromkeys(TELEMETRY_SCHEMA.names)
        values.update(
            run_id="r",
            point=point,
            role="broker",
            node=node,
            second=second,
            cpu_pct=cpu,
            cores=8.0,
            gc_pause_ms_s=gc,
        )
        return tuple(values[n] for n in TELEMETRY_SCHEMA.names)

    rows = [
        row(-1, "broker-0", 9, 999.0),  # before point 0's period
        row(-1, "broker-0", 10, 100.0, 2.0),
        row(-1, "broker-0", 11, 300.0),
        row(-1, "broker-0", 15, 50.0),  # between the periods
        row(-1, "broker-0", 20, 400.0, 6.0),
        row(1, "sender-0", 21, 80.0),
    ]
    telemetry = spark.createDataFrame(rows, spark_schema(TELEMETRY_SCHEMA))
    periods = spark.createDataFrame(
        [("r", 0, 10, 11), ("r", 1, 20, 21)], "run_id string, point int, start long, end long"
    )
    found = {
        (r["point"], r["node"]): r.asDict() for r in tf.node_usage(telemetry, periods).collect()
    }
    assert set(found) == {(0, "broker-0"), (1, "broker-0"), (1, "sender-0")}
    assert found[0, "broker-0"]["cpu_pct"] == 200.0
    assert found[0, "broker-0"]["cpu_max_pct"] == 300.0
    assert found[0, "broker-0"]["gc_pause_ms_s"] == 2.0
    assert found[0, "broker-0"]["seconds"] == 2
    assert found[1, "broker-0"]["cpu_pct"] == 400.0
