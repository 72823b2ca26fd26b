"""The analysis as pure DataFrame → DataFrame functions (docs/measurement.md §3, §5).

Inputs are the raw tables every client node writes (``workload.model.results``): per-second
counters and histograms, confirmed sequence ranges and received identities. Histograms
are merged by adding bucket counts — across workers, nodes and seconds — never by
averaging percentiles. Nothing here collects per-message data to the driver.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from analysis.column_model import METRICS, window_column
from workload.model.buckets import CLIPPED, GAMMA, MAX_US, NEGATIVE
from workload.model.telemetry import USAGE_MEANS

KEY = ["run_id", "point"]
COUNTERS = (
    "sent",
    "received",
    "acked",
    "errors",
    "redelivered",
    "foreign",
    "sent_bytes",
    "received_bytes",
    "acked_bytes",
)
#: Bytes in a megabyte (the MB/s columns).
MB = 1_000_000
QUANTILES = {"p50": 0.50, "p95": 0.95, "p99": 0.99, "p999": 0.999, "max": 1.0}
#: A point is flagged when receivers acked less than this share of the send rate.
KEEP_UP_RATIO = 0.95


def bucket_ms(bucket: Column) -> Column:
    """Representative latency of a histogram bucket, in milliseconds (0 for the bucket of
    negative latencies and 10 minutes for the bucket of latencies beyond the range, as
    :func:`workload.engine.histogram.bucket_value`)."""
    value = F.lit(2.0 / (GAMMA + 1.0) / 1000.0) * F.pow(F.lit(GAMMA), bucket.cast("double"))
    return (
        F.when(bucket == NEGATIVE, F.lit(0.0))
        .when(bucket == CLIPPED, F.lit(MAX_US / 1000.0))
        .otherwise(value)
    )


def counters_per_second(seconds: DataFrame) -> DataFrame:
    """Counters summed over all workers and nodes: one row per (run, point, second)."""
    return seconds.groupBy(*KEY, "second").agg(*(F.sum(c).alias(c) for c in COUNTERS))


def histogram_per_second(seconds: DataFrame) -> DataFrame:
    """Histograms merged over workers and nodes, long format: (run, point, metric, second,
    bucket, count)."""
    parts = [
        seconds.select(
            *KEY,
            "second",
            F.lit(metric).alias("metric"),
            F.explode(metric).alias("bucket", "count"),
        )
        for metric in METRICS
    ]
    long = parts[0]
    for part in parts[1:]:
        long = long.unionByName(part)
    return long.groupBy(*KEY, "metric", "second", "bucket").agg(F.sum("count").alias("count"))


def measurement_periods(seconds: DataFrame, warmup_s: int) -> DataFrame:
    """Per point, from the raw per-worker ``seconds`` rows: the measurement period of its
    rates and the span of its latencies, both after the warm-up (``warmup_s`` from the first
    second with a confirmed send).

    Rates need whole seconds: a worker's first and last seconds with a confirmed send are
    partial (it started and stopped within them), so the rate period runs from the second
    after the latest first second to the second before the earliest last second — counts
    and period cover the same whole seconds in which every sender worker was sending. A
    point without such a second (a run of a second or two, a worker that stopped early)
    falls back to its latency span. Latencies are samples, valid in a partial second too:
    their span runs from the warm-up's end to the last second with a sample — a confirmed
    send or a received message, so that receivers draining a backlog after the senders
    stopped are in it. The windows and the whole-run figures cover that same span.

    Columns: run_id, point, start, end (inclusive), seconds (the rate period),
    latency_start, latency_end (inclusive).
    """
    workers = (
        seconds.where(F.col("sent") > 0)
        .groupBy(*KEY, "node", "worker")
        .agg(F.min("second").alias("first"), F.max("second").alias("last"))
    )
    received = (
        seconds.where(F.col("received") > 0)
        .groupBy(*KEY)
        .agg(F.max("second").alias("last_received"))
    )
    sending = (
        workers.groupBy(*KEY)
        .agg(
            F.least(F.min("first") + F.lit(warmup_s), F.max("last")).alias("latency_start"),
            F.max("last").alias("last_sent"),
            (F.max("first") + 1).alias("all_started"),
            (F.min("last") - 1).alias("none_stopped"),
        )
        .join(received, on=KEY, how="left")
        .withColumn(
            "latency_end",
            F.greatest(F.col("last_sent"), F.coalesce(F.col("last_received"), F.col("last_sent"))),
        )
    )
    whole_start = F.greatest(F.col("latency_start"), F.col("all_started"))
    whole = whole_start <= F.col("none_stopped")
    start = F.when(whole, whole_start).otherwise(F.col("latency_start"))
    end = F.when(whole, F.col("none_stopped")).otherwise(F.col("last_sent"))
    return sending.select(
        *KEY,
        start.alias("start"),
        end.alias("end"),
        (end - start + 1).alias("seconds"),
        "latency_start",
        "latency_end",
    )


def window_starts(periods: DataFrame, window_s: int, step_s: int) -> DataFrame:
    """Window starts per point: windows of ``window_s`` sliding by ``step_s`` that lie wholly
    inside the latency span, and a last one ending with the span when the steps do not land
    there (so that the span's last seconds are in a window too); a span shorter than one
    window is one window of its own length."""
    first, last = F.col("latency_start"), F.col("latency_end")
    last_start = last - F.lit(window_s) + 1
    fits = last_start >= first
    stepped = F.sequence(first, last_start, F.lit(step_s))
    starts = F.when(fits, F.array_distinct(F.concat(stepped, F.array(last_start)))).otherwise(
        F.array(first)
    )
    length = F.when(fits, F.lit(window_s)).otherwise(last - first + 1)
    return periods.select(
        *KEY,
        F.explode(starts).alias("window_start"),
        length.alias("window_seconds"),
        "start",
        "end",
    )


def _in_window(df: DataFrame, windows: DataFrame) -> DataFrame:
    return df.join(windows, on=KEY).where(
        (F.col("second") >= F.col("window_start"))
        & (F.col("second") < F.col("window_start") + F.col("window_seconds"))
    )


def percentiles(hist: DataFrame, group: list[str]) -> DataFrame:
    """Percentiles (ms) of merged (bucket, count) rows within each ``group``.

    The q-th percentile is the bucket holding the sample of rank ⌈q·n⌉ — the same rule as
    :func:`workload.engine.histogram.percentile_of`.
    """
    merged = hist.groupBy(*group, "bucket").agg(F.sum("count").alias("count"))
    ordered = (
        Window.partitionBy(*group)
        .orderBy("bucket")
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    whole = Window.partitionBy(*group)
    ranked = merged.withColumn("cum", F.sum("count").over(ordered)).withColumn(
        "total", F.sum("count").over(whole)
    )
    picks = [
        F.min(
            F.when(
                F.col("cum") >= F.greatest(F.lit(1), F.ceil(F.col("total") * q)), F.col("bucket")
            )
        ).alias(name)
        for name, q in QUANTILES.items()
    ]
    out = ranked.groupBy(*group).agg(F.first("total").alias("samples"), *picks)
    return out.select(
        *group, "samples", *(bucket_ms(F.col(name)).alias(f"{name}_ms") for name in QUANTILES)
    )


def window_series(counters: DataFrame, hist: DataFrame, windows: DataFrame) -> DataFrame:
    """Per window: throughput and latency percentiles of every metric (the time series).

    A window's rates count, as the summary's do, only the whole seconds of the rate period
    (:func:`measurement_periods`) that lie in it, and divide by their number: the partial
    first and last seconds of the senders, which a window at either end of the latency
    span holds, would read as a dip that never happened. A window with no such second has
    no rates. Its latencies are every sample of its seconds.
    """
    group = [*KEY, "window_start", "window_seconds"]
    bounds = windows.select(
        *group,
        F.greatest(F.col("window_start"), F.col("start")).alias("rate_start"),
        F.least(F.col("window_start") + F.col("window_seconds") - 1, F.col("end")).alias(
            "rate_end"
        ),
    )
    whole = (F.col("rate_end") - F.col("rate_start") + 1).cast("double")
    rates = (
        counters.join(bounds, on=KEY)
        .where((F.col("second") >= F.col("rate_start")) & (F.col("second") <= F.col("rate_end")))
        .groupBy(*group)
        .agg(
            (F.sum("sent") / F.first(whole)).alias("send_msgs_per_s"),
            (F.sum("acked") / F.first(whole)).alias("receive_msgs_per_s"),
            F.first(whole).cast("int").alias("rate_seconds"),
        )
    )
    lat = percentiles(_in_window(hist, windows.select(*group)), [*group, "metric"])
    wide = (
        lat.groupBy(*group)
        .pivot("metric", list(METRICS))
        .agg(*(F.first(f"{q}_ms").alias(q) for q in QUANTILES))
    )
    return (
        windows.select(*group)
        .join(rates, on=group, how="left")
        .join(wide, on=group, how="left")
        .orderBy(*group)
    )


def headline(series: DataFrame) -> DataFrame:
    """Per point: the maximum p95 over the windows (docs/measurement.md §3's headline latency)."""
    return series.groupBy(*KEY).agg(
        *(F.max(f"{metric}_p95").alias(window_column(metric)) for metric in METRICS)
    )


def out_of_range(hist: DataFrame) -> DataFrame:
    """Per point, over the histograms given — the whole run's (:func:`run_histograms`: the
    latency span, the scope of the whole-run percentiles): how many processing latencies
    were negative — messages received before they were sent, by the receiver's clock,
    because the sender's and the receiver's clocks differ by more than the latency — and
    how many latencies of any metric lay beyond the histograms' range (10 minutes, read as
    10 minutes)."""

    def count(where: Column) -> Column:
        return F.sum(F.when(where, F.col("count")).otherwise(F.lit(0)))

    negative = (F.col("metric") == "processing_latency") & (F.col("bucket") == NEGATIVE)
    return hist.groupBy(*KEY).agg(
        count(negative).alias("negative_latencies"),
        count(F.col("bucket") == CLIPPED).alias("clipped_latencies"),
    )


def throughput(counters: DataFrame, periods: DataFrame) -> DataFrame:
    """Per point: send and receive rates over the measurement period — messages and
    megabytes (10⁶ bytes) per second — totals, keep-up flag."""
    inside = counters.join(periods, on=KEY).where(
        (F.col("second") >= F.col("start")) & (F.col("second") <= F.col("end"))
    )
    rates = inside.groupBy(*KEY).agg(
        (F.sum("sent") / F.first("seconds")).alias("send_msgs_per_s"),
        (F.sum("acked") / F.first("seconds")).alias("receive_msgs_per_s"),
        (F.sum("sent_bytes") / F.first("seconds") / F.lit(MB)).alias("send_mb_per_s"),
        (F.sum("acked_bytes") / F.first("seconds") / F.lit(MB)).alias("receive_mb_per_s"),
        F.first("seconds").alias("measured_seconds"),
    )
    totals = counters.groupBy(*KEY).agg(*(F.sum(c).alias(c) for c in COUNTERS))
    flag = F.col("receive_msgs_per_s") < F.col("send_msgs_per_s") * F.lit(KEEP_UP_RATIO)
    return totals.join(rates, on=KEY, how="left").withColumn(
        "receivers_kept_up", ~F.coalesce(flag, F.lit(False))
    )


#: Sequence numbers are counted in words of 64 (one bit per sequence number).
WORD_BITS = 64


#: Packed identity words: sender node (14 bits) | sender worker (16 bits) | word (32 bits).
_NODE_BITS, _WORKER_BITS, _WORD_BITS = 14, 16, 32


def identity_words(received: DataFrame) -> DataFrame:
    """Received identities as bit words: one row per (run, point, sender node, sender
    worker, word) with ``bits`` (bit i set when sequence number word·64 + i arrived) and
    ``rows`` (received rows, copies included).

    The per-message aggregation groups on one packed long (node, worker, word) where the
    identity fits (node < 2¹⁴, worker < 2¹⁶, 0 ≤ seq < 2³⁸), which is cheaper to hash than
    separate columns; other identities keep their columns in a second key, so every input
    is counted exactly.
    """
    node, worker, seq = F.col("sender_node"), F.col("sender_worker"), F.col("seq")
    word = F.shiftright(seq, 6)
    fits = (
        node.between(0, (1 << _NODE_BITS) - 1)
        & worker.between(0, (1 << _WORKER_BITS) - 1)
        & seq.between(0, (1 << (_WORD_BITS + 6)) - 1)
    )
    packed = (
        F.shiftleft(node.cast("long"), _WORKER_BITS + _WORD_BITS)
        + F.shiftleft(worker.cast("long"), _WORD_BITS)
        + word
    )
    words = received.groupBy(
        *KEY,
        F.when(fits, packed).alias("packed"),
        F.when(~fits, F.struct(node, worker, word.alias("word"))).alias("other"),
    ).agg(
        F.bit_or(F.expr("shiftleft(1L, int(seq & 63))")).alias("bits"),
        F.count(F.lit(1)).alias("rows"),
    )
    key = F.col("packed")
    return words.select(
        *KEY,
        F.coalesce(
            F.shiftright(key, _WORKER_BITS + _WORD_BITS).cast("int"), F.col("other.sender_node")
        ).alias("sender_node"),
        F.coalesce(
            (F.shiftright(key, _WORD_BITS).bitwiseAND((1 << _WORKER_BITS) - 1)).cast("int"),
            F.col("other.sender_worker"),
        ).alias("sender_worker"),
        F.coalesce(key.bitwiseAND((1 << _WORD_BITS) - 1), F.col("other.word")).alias("word"),
        "bits",
        "rows",
    )


def delivery(sent_ranges: DataFrame, received: DataFrame) -> DataFrame:
    """Per point: confirmed, lost (confirmed, never received), duplicated (received more
    than once), and received messages whose send was never confirmed.

    Distinct identities are counted without grouping on every identity: each received
    sequence number sets one bit of a 64-bit word of its sender worker's sequence space
    (``bit_or``, a hash aggregation that every task applies before the shuffle), so about
    one row per 64 messages crosses the shuffle and each task's memory is bounded by the
    words it sees. Duplicates are the rows beyond the distinct identities. Confirmed
    received messages are the set bits inside the (small, broadcast) confirmed ranges.
    """
    confirmed = sent_ranges.groupBy(*KEY).agg(
        F.sum(F.col("seq_hi") - F.col("seq_lo") + 1).alias("confirmed")
    )
    sender = ["sender_node", "sender_worker"]
    words = identity_words(received)
    ranges = sent_ranges.select(
        *KEY,
        F.col("node").alias("sender_node"),
        F.col("worker").alias("sender_worker"),
        "seq_lo",
        "seq_hi",
    )
    first = F.col("word") * WORD_BITS
    overlaps = (ranges["seq_lo"] <= first + (WORD_BITS - 1)) & (ranges["seq_hi"] >= first)
    matched = words.join(
        F.broadcast(ranges),
        on=[*(words[c] == ranges[c] for c in [*KEY, *sender]), overlaps],
        how="left",
    )
    low = F.greatest(ranges["seq_lo"] - first, F.lit(0)).cast("int")
    high = F.least(ranges["seq_hi"] - first, F.lit(WORD_BITS - 1)).cast("int")
    # The bits of a word that lie inside the range: lo_bit..hi_bit.
    inside = F.bit_count(
        F.col("bits").bitwiseAND(
            F.expr("shiftleft(-1L, lo_bit) & shiftrightunsigned(-1L, 63 - hi_bit)")
        )
    )
    per_word = (
        matched.select(
            *(words[c] for c in [*KEY, *sender, "word", "bits", "rows"]),
            low.alias("lo_bit"),
            high.alias("hi_bit"),
            ranges["seq_lo"].isNotNull().alias("in_range"),
        )
        .groupBy(*KEY, *sender, "word")
        .agg(
            F.first("bits").alias("bits"),
            F.first("rows").alias("rows"),
            F.sum(F.when(F.col("in_range"), inside).otherwise(0)).alias("confirmed_bits"),
        )
    )
    distinct = F.bit_count("bits")
    counts = per_word.groupBy(*KEY).agg(
        (F.sum("rows") - F.sum(distinct)).alias("duplicated"),
        F.sum(distinct).alias("distinct_received"),
        F.sum("confirmed_bits").alias("confirmed_received"),
    )
    out = confirmed.join(counts, on=KEY, how="full")
    out = out.fillna(0, ["confirmed", "duplicated", "distinct_received", "confirmed_received"])
    return out.select(
        *KEY,
        "confirmed",
        (F.col("confirmed") - F.col("confirmed_received")).alias("lost"),
        "duplicated",
        (F.col("distinct_received") - F.col("confirmed_received")).alias("unconfirmed_received"),
    )


def reordered(received: DataFrame) -> DataFrame:
    """Per point with late messages: ``reordered``, the messages that arrived late for
    their key at their receiver worker (``late``: that worker had received a higher sequence
    number of the same sender worker and key before) and were received exactly once — a
    message received more than once is a duplicate or a redelivery, never a reordering
    (docs/measurement.md §5). Points without a late message have no row (none reordered).

    Only the late identities (normally none) are matched against the received table, so a
    run without them costs one filtered scan of the ``late`` column.
    """
    identity = [*KEY, "sender_node", "sender_worker", "seq"]
    late = received.where(F.col("late")).select(*identity).distinct()
    copies = (
        received.select(*identity)
        .join(late, on=identity, how="left_semi")
        .groupBy(*identity)
        .agg(F.count(F.lit(1)).alias("copies"))
    )
    return (
        copies.where(F.col("copies") == 1).groupBy(*KEY).agg(F.count(F.lit(1)).alias("reordered"))
    )


#: How a sweep point's records stand (see :func:`accounting`): receivers drained it, the run
#: stopped early, a node's records are missing, or it never ran.
DRAINED, STOPPED, INCOMPLETE, NOT_RUN = "drained", "stopped", "incomplete", "not run"


def accounting(delivery: DataFrame, states: DataFrame) -> DataFrame:
    """Per point, :func:`delivery`'s counts in docs/measurement.md §5's words; one row per row of ``states``
    (run_id, point, state: one of :data:`DRAINED`, :data:`STOPPED`, :data:`INCOMPLETE`,
    :data:`NOT_RUN`).

    Confirmed messages never received are *lost* only at a point whose receivers drained
    it; at a point stopped early they are *not drained*, and nothing is lost. Where a
    node's records are missing, or the point never ran, neither is claimed (null) — nor
    messages received without a confirmed send, whose sender's ranges may be the ones
    missing.
    """
    counts = ["confirmed", "lost", "duplicated", "unconfirmed_received"]
    joined = states.join(delivery, on=KEY, how="left").fillna(0, counts)
    state, missing = F.col("state"), F.col("lost")
    zero = F.lit(0).cast("long")
    return joined.select(
        *KEY,
        "confirmed",
        F.when(state == DRAINED, missing).when(state == STOPPED, zero).alias("lost"),
        F.when(state == STOPPED, missing).when(state == DRAINED, zero).alias("not_drained"),
        "duplicated",
        F.when(state.isin(DRAINED, STOPPED), F.col("unconfirmed_received")).alias(
            "unconfirmed_received"
        ),
    )


def run_histograms(hist: DataFrame, periods: DataFrame) -> DataFrame:
    """Per point and metric: the histogram of the whole run, merged over its seconds — one
    row per non-empty bucket, with the bucket's representative latency (``value_ms``).

    Its seconds are the latency span's (:func:`measurement_periods`): the warm-up is left
    out, receivers draining a backlog are in — the seconds the windows cover.
    """
    after_warmup = hist.join(periods.select(*KEY, "latency_start", "latency_end"), on=KEY).where(
        F.col("second").between(F.col("latency_start"), F.col("latency_end"))
    )
    return (
        after_warmup.groupBy(*KEY, "metric", "bucket")
        .agg(F.sum("count").alias("count"))
        .where(F.col("count") > 0)
        .withColumn("value_ms", bucket_ms(F.col("bucket")))
    )


def whole_run(histograms: DataFrame) -> DataFrame:
    """Per point: whole-run percentiles of each metric (from :func:`run_histograms`), one
    row per metric."""
    return percentiles(histograms.drop("value_ms"), [*KEY, "metric"])


def node_usage(telemetry: DataFrame, periods: DataFrame) -> DataFrame:
    """Per point and node: the mean of every telemetry figure over the point's measurement
    period (its rate period: after the warm-up, whole seconds in which every sender worker
    sent), and the busiest second of each (``<figure>_max``; the CPU's also as
    ``cpu_max_pct``). A mean skips the seconds a counter was not read.
    Rows belong to a point by their second, not by the point they name: a broker machine's
    sampler on AWS runs through the whole run and names none.

    Columns: run_id, point, role, node, seconds (telemetry seconds in the period),
    one column per :data:`USAGE_MEANS` and its ``_max``, cpu_max_pct.
    """
    inside = (
        telemetry.drop("point")
        .join(periods.select(*KEY, "start", "end"), on="run_id")
        .where((F.col("second") >= F.col("start")) & (F.col("second") <= F.col("end")))
    )
    return inside.groupBy(*KEY, "role", "node").agg(
        F.count("*").alias("seconds"),
        *(F.avg(c).alias(c) for c in USAGE_MEANS),
        *(F.max(c).alias(f"{c}_max") for c in USAGE_MEANS if c not in ("cores", "processes")),
        F.max("cpu_pct").alias("cpu_max_pct"),
    )
