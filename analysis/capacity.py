"""A capacity search's result as the analysis reads it (``[search]`` in a scenario).

During the run each probe is judged from its raw records so the search can choose the next
rate (:mod:`workload.engine.search`). Here every probe is judged again, by the same rule
(:func:`workload.model.slo.verdict`), from the analysis's own figures of the point — the
summary row's rates, errors and whole-run processing p99 — and the capacity at the SLO is
the bracket those verdicts give: at least the highest rate that held, below the lowest
that failed.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from analysis.column_model import run_column
from analysis.summary_row import Figures, number
from workload.model.record import RunContext, SearchRecord
from workload.model.slo import format_ms, format_rate, verdict
from workload.model.verdict import Verdict


def search_record(context: RunContext | Mapping[str, Any]) -> SearchRecord | None:
    """The run's capacity search (None for a sweep)."""
    return RunContext.of(context).search


@dataclass(frozen=True, eq=False)
class Probe(Figures):
    """A capacity search's probe: its target rate and the verdict on the analysis's figures
    (``slo_holds`` empty where the run stopped during the probe)."""

    target_msgs_per_s: float
    slo_holds: bool | None
    slo_reason: str


def probe_columns(
    context: RunContext | Mapping[str, Any], rows: Mapping[int, Mapping[str, Any]]
) -> dict[int, Probe]:
    """Per probe's point: its :class:`Probe` columns (none for a sweep)."""
    record = search_record(context)
    if record is None:
        return {}
    columns: dict[int, Probe] = {}
    for probe in record.probes:
        row = rows.get(probe.point, {})
        if probe.holds is None:
            columns[probe.point] = Probe(probe.rate, None, f"not judged: {probe.reason}")
        else:
            errors = number(row.get("errors"))
            ruling = verdict(
                target_msgs_per_s=probe.rate,
                send_msgs_per_s=number(row.get("send_msgs_per_s")),
                receive_msgs_per_s=number(row.get("receive_msgs_per_s")),
                errors=None if errors is None else int(errors),
                processing_latency_p99_ms=number(row.get(run_column("processing_latency", "p99"))),
                slo_p99_ms=record.slo_p99_ms,
            )
            columns[probe.point] = Probe(probe.rate, ruling.holds, ruling.reason)
    return columns


@dataclass(frozen=True)
class Capacity:
    """The capacity at the SLO: a bracket of total msgs/s."""

    slo_p99_ms: float
    #: The highest target rate that held, and the lowest that failed (None: none did).
    holding: float | None
    failing: float | None
    probes: int
    #: The search ended by its own rule (not interrupted or failed).
    complete: bool
    #: Where the clients or the shared machine set the pace of the lowest failing probe:
    #: the bracket is theirs, not the broker's (:meth:`workload.model.verdict.Verdict.label`).
    bound: str = ""

    @property
    def bracket(self) -> str:
        low, high = self.holding, self.failing
        if low is not None and high is not None and low < high:
            return f"≥ {format_rate(low)} and < {format_rate(high)} msgs/s"
        if low is not None and high is not None:  # a rate failed below one that held
            return (
                f"unclear: {format_rate(high)} msgs/s failed but {format_rate(low)} held "
                "(the system's capacity varies more than the search's steps)"
            )
        if low is not None:
            return f"at least {format_rate(low)} msgs/s"
        if high is not None:
            return f"below {format_rate(high)} msgs/s"
        return "not known (no probe was judged)"

    def line(self) -> str:
        """``capacity at SLO p99 ≤ 50 ms: ≥ 25,000 and < 31,250 msgs/s (6 probes)``."""
        text = (
            f"capacity at SLO p99 ≤ {format_ms(self.slo_p99_ms)} ms: {self.bracket} "
            f"({self.probes} probe{'s' if self.probes != 1 else ''}"
        )
        text += ("" if self.complete else "; the search did not finish") + ")"
        return text + (f" — not the broker's limit: {self.bound}" if self.bound else "")


def capacity(
    context: RunContext | Mapping[str, Any], rows: Sequence[Mapping[str, Any]]
) -> Capacity | None:
    """The capacity bracket from the analysed probes (None for a sweep)."""
    record = search_record(context)
    if record is None:
        return None
    judged = [
        (float(rate), str(r.get("slo_holds")))
        for r in rows
        if (rate := number(r.get("target_msgs_per_s"))) is not None
        and str(r.get("slo_holds")) in ("True", "False")
    ]
    holding = [rate for rate, holds in judged if holds == "True"]
    failing = [rate for rate, holds in judged if holds == "False"]
    lowest = min(failing, default=None)
    limits = [
        str(r.get("limited_by") or "")
        for r in rows
        if lowest is not None and number(r.get("target_msgs_per_s")) == lowest
    ]
    return Capacity(
        record.slo_p99_ms,
        max(holding, default=None),
        lowest,
        len(record.probes),
        record.complete,
        next((label for limit in limits if (label := Verdict(limit, "").label())), ""),
    )
