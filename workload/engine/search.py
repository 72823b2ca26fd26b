"""Capacity search (``[search]``): the highest open-loop rate a broker holds within a
processing-latency SLO ("capacity at SLO", docs/measurement.md §4).

A search is a run of successive sweep points ("probes"), each an open-loop point at one
**total** rate (msgs/s over every sender worker; each worker's ``load.rate`` is the total
divided by ``threads × sender_nodes``). It probes ``low`` first (if that fails, the capacity
is below it and the search stops), then ``high`` (if that holds, the capacity is at least
it), then bisects the bracket between the highest rate that held and the lowest that failed
until ``(failing − holding) / holding ≤ precision`` or ``max_probes`` probes ran. Bisection
takes the **geometric** mean of the bracket (rounded to a few significant digits): rates
may span orders of magnitude, and the geometric mean halves the bracket's ratio, so every
probe gains the same relative precision wherever the capacity lies — an arithmetic mean of
1,000 and 100,000 would probe 50,500 first and take several probes to come down to a
capacity near 10,000.

Whether a probe holds is one rule, :func:`workload.model.slo.verdict`, which the analysis applies to its
summary rows too: receivers kept up, the senders reached the target rate, no call failed,
and the whole-run processing-latency p99 is within the SLO. The runner evaluates each probe
right after its point ends from the point's raw per-second records (:func:`measure_point`,
with pyarrow — no Spark), measured over the same periods as the analysis
(``analysis.transforms.measurement_periods``).

The search's record (:class:`~workload.model.record.SearchRecord`, with its probes'
:class:`~workload.model.record.ProbeRecord`) is the run context's ``search``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from workload.engine.histogram import percentile_of
from workload.model.record import Outcome, ProbeRecord, SearchRecord
from workload.model.results import read_point
from workload.model.slo import SLO_QUANTILE, format_ms, format_rate, format_share, verdict
from workload.model.sweep import SweepPoint
from workload.model.sweep import estimated_seconds as sweep_seconds

if TYPE_CHECKING:
    from workload.model.scenario import Scenario
    from workload.model.sections import SearchSection


@dataclass(frozen=True)
class Measures:
    """A point's figures from its raw per-second records, as the analysis computes them."""

    #: Confirmed sends and acknowledged receives per second over the measurement period
    #: (the whole seconds every sender worker sent in, after the warm-up); None: no send.
    send_msgs_per_s: float | None
    receive_msgs_per_s: float | None
    measured_seconds: int
    #: Failed calls over the whole point.
    errors: int
    #: Whole-run processing-latency p99 after the warm-up (ms); None: none recorded.
    processing_latency_p99_ms: float | None


def measure_point(run_dir: Path, point: int, warmup_s: int) -> Measures:
    """:func:`measure` of one point of a run directory."""
    return measure(read_point(run_dir, "seconds", point), warmup_s)


_ENTRIES = pa.list_(
    pa.struct([pa.field("key", pa.int32(), nullable=False), pa.field("value", pa.int64())])
)


def measure(seconds: pa.Table, warmup_s: int) -> Measures:
    """Rates, errors and processing p99 of one point's raw ``seconds`` rows.

    The periods are ``analysis.transforms.measurement_periods``: per sender worker (node,
    worker) its first and last second with a confirmed send; latencies count from the
    warm-up's end (``warmup_s`` after the first such second, at most the last) onwards —
    draining receivers included; rates over the whole seconds in which every worker sent
    (from the second after the latest first second, and the warm-up's end, to the second
    before the earliest last second), or the latency span when there is no such second.
    Histograms merge by adding bucket counts.
    """
    errors = int(pc.sum(seconds["errors"]).as_py() or 0)
    sending = seconds.filter(pc.greater(seconds["sent"], 0))
    workers = sending.group_by(["node", "worker"]).aggregate([("second", "min"), ("second", "max")])
    if workers.num_rows == 0:
        return Measures(None, None, 0, errors, None)
    firsts = workers["second_min"].to_pylist()
    lasts = workers["second_max"].to_pylist()
    latency_start = min(min(firsts) + warmup_s, max(lasts))
    whole_start = max(latency_start, max(firsts) + 1)
    none_stopped = min(lasts) - 1
    start, end = (
        (whole_start, none_stopped) if whole_start <= none_stopped else (latency_start, max(lasts))
    )
    period = end - start + 1
    second = seconds["second"]
    inside = seconds.filter(pc.and_(pc.greater_equal(second, start), pc.less_equal(second, end)))
    sent = int(pc.sum(inside["sent"]).as_py() or 0)
    acked = int(pc.sum(inside["acked"]).as_py() or 0)
    latencies = seconds.filter(pc.greater_equal(second, latency_start))
    buckets = merged_histogram(latencies["processing_latency"])
    p99_us = percentile_of(buckets.items(), SLO_QUANTILE)
    return Measures(
        send_msgs_per_s=sent / period,
        receive_msgs_per_s=acked / period,
        measured_seconds=period,
        errors=errors,
        processing_latency_p99_ms=None if p99_us is None else p99_us / 1000.0,
    )


def merged_histogram(column: pa.ChunkedArray) -> dict[int, int]:
    """A histogram column's rows merged: bucket → count summed over the rows."""
    entries = pc.list_flatten(column.cast(_ENTRIES))
    if len(entries) == 0:
        return {}
    flat = entries.combine_chunks()
    table = pa.table({"bucket": flat.field("key"), "count": flat.field("value")})
    summed = table.group_by("bucket").aggregate([("count", "sum")])
    return dict(zip(summed["bucket"].to_pylist(), summed["count_sum"].to_pylist(), strict=True))


class CapacitySearch:
    """The search's state: which rate to probe next and what the probes found.

    Drive it with :meth:`next_rate` and :meth:`add` until :meth:`next_rate` is None;
    :meth:`stop` ends it early (the run was interrupted or failed).
    """

    def __init__(self, spec: SearchSection, sender_workers: int) -> None:
        self.spec = spec
        self.record = SearchRecord(
            spec=spec.model_dump(mode="json"),
            slo_p99_ms=spec.slo_p99 * 1000.0,
            sender_workers=sender_workers,
        )
        self.record.result = self.result_line()

    @property
    def done(self) -> bool:
        return self.record.outcome != "running"

    def next_rate(self) -> float | None:
        """The total rate of the next probe; None when the search is over."""
        record = self.record
        if self.done:
            return None
        if not record.probes:
            return self.spec.low
        if record.lowest_failing is None:
            return self.spec.high
        assert record.highest_holding is not None  # low held, or the search would be over
        return between(record.highest_holding, record.lowest_failing)

    def add(self, probe: ProbeRecord) -> None:
        """A probe's result; ends the search when its rule says so."""
        record = self.record
        record.probes.append(probe)
        if probe.holds is True:
            record.highest_holding = max(record.highest_holding or probe.rate, probe.rate)
        elif probe.holds is False:
            record.lowest_failing = min(record.lowest_failing or probe.rate, probe.rate)
        low, high = record.highest_holding, record.lowest_failing
        if probe.holds is None:
            pass  # the run stops the search (stop)
        elif len(record.probes) == 1 and probe.holds is False:
            self._end("below_low")
        elif high is None and low is not None and low >= self.spec.high:
            self._end("at_least_high")
        elif low is not None and high is not None and (high - low) / low <= self.spec.precision:
            self._end("within_precision")
        elif len(record.probes) >= self.spec.max_probes:
            self._end("max_probes")
        record.result = self.result_line()

    def stop(self, note: str) -> None:
        """End the search before its rule did (the run was interrupted or failed)."""
        if self.done:
            return
        self.record.outcome = "incomplete"
        self.record.note = note
        self.record.result = self.result_line()

    def _end(self, outcome: Outcome) -> None:
        self.record.outcome = outcome
        self.record.complete = True

    def result_line(self) -> str:
        """``capacity at SLO p99 ≤ 50 ms: ≥ 25,000 and < 31,250 msgs/s`` (and why it is
        no narrower, when the search stopped early)."""
        record = self.record
        low, high = record.highest_holding, record.lowest_failing
        if low is not None and high is not None:
            bracket = f"≥ {format_rate(low)} and < {format_rate(high)} msgs/s"
        elif low is not None:
            bracket = f"at least {format_rate(low)} msgs/s"
        elif high is not None:
            bracket = f"below {format_rate(high)} msgs/s"
        else:
            bracket = "not known"
        line = f"capacity at SLO p99 ≤ {format_ms(record.slo_p99_ms)} ms: {bracket}"
        if record.outcome == "max_probes":
            line += (
                f" (stopped after {len(record.probes)} probes, before the bracket narrowed "
                f"to the precision of {format_share(self.spec.precision)})"
            )
        elif record.outcome in ("incomplete", "running"):
            line += " so far" if low is not None or high is not None else ""
            line += f" — incomplete: {record.note}" if record.outcome == "incomplete" else ""
        return line


def between(low: float, high: float) -> float:
    """The geometric mean of ``low`` and ``high``, rounded to the fewest significant digits
    (at least 3) that keep it strictly between them."""
    mean = math.sqrt(low * high)
    for digits in range(3, 16):
        rounded = float(f"{mean:.{digits}g}")
        if low < rounded < high:
            return rounded
    return mean


def probe_point(scenario: Scenario, index: int, rate: float) -> SweepPoint:
    """The sweep point of a probe at ``rate`` msgs/s in total: the scenario's load with
    each sender worker's ``rate`` its share; labelled by the total (``rate=25000``)."""
    workers = scenario.load.sender_workers
    shown: float | int = int(rate) if float(rate).is_integer() else rate
    return SweepPoint(
        index=index,
        load=scenario.point_load({"rate": rate / workers}),
        params=scenario.broker_params().model_dump(),
        varied={"rate": shown},
    )


def judge(point: SweepPoint, measures: Measures, slo_p99_s: float) -> ProbeRecord:
    """A probe's record from its point and its measures."""
    rate = float(point.varied["rate"])
    ruling = verdict(
        target_msgs_per_s=rate,
        send_msgs_per_s=measures.send_msgs_per_s,
        receive_msgs_per_s=measures.receive_msgs_per_s,
        errors=measures.errors,
        processing_latency_p99_ms=measures.processing_latency_p99_ms,
        slo_p99_ms=slo_p99_s * 1000.0,
    )
    return ProbeRecord(
        point=point.index,
        rate=rate,
        rate_per_worker=point.load.rate or 0.0,
        holds=ruling.holds,
        reason=ruling.reason,
        send_msgs_per_s=measures.send_msgs_per_s,
        receive_msgs_per_s=measures.receive_msgs_per_s,
        measured_seconds=measures.measured_seconds,
        errors=measures.errors,
        processing_latency_p99_ms=measures.processing_latency_p99_ms,
    )


def unjudged(point: SweepPoint, why: str) -> ProbeRecord:
    """The record of a probe the run stopped during: ran, not judged."""
    return ProbeRecord(
        point=point.index,
        rate=float(point.varied["rate"]),
        rate_per_worker=point.load.rate or 0.0,
        holds=None,
        reason=why,
    )


def probe_line(probe: ProbeRecord) -> str:
    """``probe 3: 25,000 msgs/s → holds (p99 12.3 ms)`` or ``→ fails: <why>``."""
    head = f"probe {probe.point}: {format_rate(probe.rate)} msgs/s →"
    if probe.holds is None:
        return f"{head} not judged: {probe.reason}"
    if not probe.holds:
        return f"{head} fails: {probe.reason}"
    p99 = probe.processing_latency_p99_ms
    return f"{head} holds (p99 {format_ms(p99) if p99 is not None else '?'} ms)"


def describe_search(scenario: Scenario) -> str:
    """The search plan in words, for ``brokerbench validate``."""
    spec = scenario.search
    assert spec is not None
    workers = scenario.load.sender_workers
    return (
        f"capacity search: {format_rate(spec.low)} to {format_rate(spec.high)} msgs/s in total "
        f"over {workers} sender worker(s), SLO processing p99 ≤ "
        f"{format_ms(spec.slo_p99 * 1000.0)} ms, precision {format_share(spec.precision)}, "
        f"at most {spec.max_probes} probes"
    )


def estimated_seconds(scenario: Scenario, probes: int | None = None) -> float:
    """An upper bound of the run time of ``probes`` probes (default ``max_probes``: the
    whole search), each estimated as a sweep point is (:func:`workload.model.sweep.estimated_seconds`)."""
    assert scenario.search is not None
    count = scenario.search.max_probes if probes is None else probes
    return count * sweep_seconds([probe_point(scenario, 0, scenario.search.low)])
