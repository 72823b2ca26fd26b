"""The verdict over a point's time: what its means hide.

:func:`workload.model.verdict.verdict` judges a point's measurement period from the means of
its telemetry. A mean hides what changes inside the period — a broker whose cost per
message grows as it runs (PostgreSQL's dead rows) — and whatever comes after it: a backlog
built and drained, receivers still receiving after the senders stopped, a stretch with
messages outstanding and none received. From a point's :class:`Timeline` (every second's
messages and every node's telemetry of that second) :func:`judge_time` finds

* **trends** (:func:`trend`): the CPU per confirmed message of the broker nodes (and of the
  clients) in the last third of the measurement period over the first third; from
  :data:`TREND_RATIO` the verdict's reason notes it;
* **each phase judged** by the rules of :func:`~workload.model.verdict.verdict` over its
  own seconds: the backlog's build, its drain, and the time after the senders stopped (from
  :data:`TAIL_S`);
* **stalls** (:func:`stalls`): :data:`STALL_S` seconds or more in a row in which no new
  message was received while messages were outstanding (confirmed, not yet received), the
  backlog's build left out (its receivers stay away on purpose), each with what was busy.

Its rules in words are :data:`TIME_RULES`, which the report prints after
:data:`~workload.model.verdict.RULES`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from workload.model.verdict import NodeUsage, Usage, Verdict, mean, verdict

#: A cost per message in the last third of the period this many times the first's is noted.
TREND_RATIO = 1.5
#: The fewest seconds of a third: a measurement period shorter than three times this has
#: no trend.
MIN_THIRD_S = 3
#: Seconds in a row with messages outstanding and none received that make a stall.
STALL_S = 5
#: The time after the senders stopped is judged when receivers received for this long.
TAIL_S = 3

BUILD, DRAIN, TAIL = "backlog build", "drain", "after the senders stopped"
#: How a point's lines (its phases and stalls) are joined in one cell of ``summary.csv``.
SEPARATOR = " | "
BROKER_ROLES, CLIENT_ROLES = ("broker",), ("sender", "receiver")

TIME_RULES = (
    "Over time, from every second's telemetry and messages: a <b>trend</b> — the CPU per "
    "confirmed message of the broker nodes (and of the clients) in the last third of the "
    "measurement period over the first third (a period of at least "
    f"{3 * MIN_THIRD_S} s) — is noted in the reason from {TREND_RATIO:g}×; the backlog's "
    f"build, its drain and the time after the senders stopped (when it lasts {TAIL_S} s or "
    "more) are each judged by the rules above over their own seconds; a <b>stall</b> — "
    f"{STALL_S} s or more in a row with messages outstanding (confirmed, not yet received) "
    "and no new message received, the backlog's build left out — is named with what was "
    "busy during it."
)


@dataclass(frozen=True)
class Tick:
    """One second of a point: messages confirmed, first received (redeliveries left out)
    and received again in it."""

    second: int
    confirmed: int = 0
    received: int = 0
    redelivered: int = 0


@dataclass(frozen=True)
class Span:
    """Whole seconds, ``first`` to ``last`` inclusive."""

    first: int
    last: int

    @property
    def seconds(self) -> int:
        return self.last - self.first + 1

    def __contains__(self, second: object) -> bool:
        return isinstance(second, int) and self.first <= second <= self.last

    def at(self, origin: int) -> str:
        """Where the span lies on the point's charts, whose time 0 is ``origin``."""
        return f"{self.first - origin} to {self.last - origin + 1} s on the charts"


@dataclass(frozen=True)
class Timeline:
    """A point over time: its seconds' messages (ascending; a missing second had none) and
    telemetry (per second, every node's sample), its measurement period (the rate period)
    and backlog phases (the second receivers began holding; the drain's seconds)."""

    ticks: tuple[Tick, ...]
    samples: Mapping[int, tuple[NodeUsage, ...]]
    period: Span | None = None
    hold: int | None = None
    drain: Span | None = None
    #: Broker and clients share one machine (a local run).
    shared_host: bool = True
    #: Batches a sender worker may keep in flight.
    max_in_flight: int = 1
    #: The broker as the reasons name it ("PostgreSQL").
    broker: str = "the broker"
    #: Time 0 of the point's charts (the end of its warm-up), else its first second.
    zero: int | None = None
    #: ``[broker] cpus``: the cores of the broker and of the clients.
    pinned: tuple[int, int] | None = None

    @property
    def origin(self) -> int:
        if self.zero is not None:
            return self.zero
        return self.ticks[0].second if self.ticks else 0

    def seconds(self) -> list[Tick]:
        """Every second from the first to the last, those without records as empty."""
        if not self.ticks:
            return []
        known = {t.second: t for t in self.ticks}
        span = range(self.ticks[0].second, self.ticks[-1].second + 1)
        return [known.get(s, Tick(s)) for s in span]

    def usage(self, span: Span, roles: Sequence[str] = ()) -> list[NodeUsage]:
        """Each node's means over the span's sampled seconds (only ``roles``' if given)."""
        by_node: dict[tuple[str, str], list[NodeUsage]] = {}
        for second in range(span.first, span.last + 1):
            for sample in self.samples.get(second, ()):
                if not roles or sample.role in roles:
                    by_node.setdefault((sample.role, sample.node), []).append(sample)
        return [mean_usage(samples) for samples in by_node.values()]


def mean_usage(samples: Sequence[NodeUsage]) -> NodeUsage:
    """One node's seconds as its means (a counter not read in a second is skipped; the
    busiest second's CPU as ``cpu_max_pct``)."""
    first = samples[0]

    def known(name: str) -> float | None:
        return mean(getattr(s, name) for s in samples)

    return NodeUsage(
        role=first.role,
        node=first.node,
        cores=known("cores") or 1.0,
        processes=known("processes") or 1.0,
        cpu_pct=known("cpu_pct") or 0.0,
        cpu_max_pct=max(s.cpu_pct for s in samples),
        process_max_pct=known("process_max_pct") or 0.0,
        thread_max_pct=known("thread_max_pct"),
        rss_bytes=known("rss_bytes") or 0.0,
        device_write_bytes_s=known("device_write_bytes_s"),
        device_write_ops_s=known("device_write_ops_s"),
        device_busy_pct=known("device_busy_pct"),
        device_flushes_s=known("device_flushes_s"),
        net_bytes_s=known("net_bytes_s"),
        gc_pause_ms_s=known("gc_pause_ms_s"),
        link_bytes_s=first.link_bytes_s,
    )


@dataclass(frozen=True)
class Trend:
    """CPU per confirmed message of some nodes in the first and the last third of the
    measurement period (µs), and the send rates then."""

    what: str
    first_us: float
    last_us: float
    first_rate: float
    last_rate: float

    @property
    def ratio(self) -> float:
        return self.last_us / self.first_us

    @property
    def rising(self) -> bool:
        return self.ratio >= TREND_RATIO

    def words(self) -> str:
        return (
            f"{self.what} per message rose {self.ratio:.1f}× during the point: "
            f"{self.first_us:,.0f} µs in the first third of the measurement period, "
            f"{self.last_us:,.0f} µs in the last ({self.first_rate:,.0f} → "
            f"{self.last_rate:,.0f} msgs/s)"
        )


def trend(timeline: Timeline, what: str, roles: Sequence[str]) -> Trend | None:
    """The CPU per message of the nodes of ``roles`` in the last third of the measurement
    period against the first (None: a period under ``3 × MIN_THIRD_S``, no such node, or
    nothing confirmed or no CPU in a third)."""
    period = timeline.period
    if period is None or period.seconds < 3 * MIN_THIRD_S:
        return None
    third = period.seconds // 3
    first = Span(period.first, period.first + third - 1)
    last = Span(period.last - third + 1, period.last)
    costs = [_cost(timeline, span, roles) for span in (first, last)]
    if costs[0] is None or costs[1] is None or costs[0][0] <= 0:
        return None
    (first_us, first_rate), (last_us, last_rate) = costs[0], costs[1]
    return Trend(what, first_us, last_us, first_rate, last_rate)


def _cost(timeline: Timeline, span: Span, roles: Sequence[str]) -> tuple[float, float] | None:
    """CPU µs per confirmed message over the span (the nodes' means summed over the send
    rate), and the send rate."""
    nodes = timeline.usage(span, roles)
    confirmed = sum(t.confirmed for t in timeline.ticks if t.second in span)
    if not nodes or not confirmed:
        return None
    rate = confirmed / span.seconds
    cores = sum(n.cpu_pct for n in nodes) / 100.0
    return cores * 1e6 / rate, rate


@dataclass(frozen=True)
class PhaseVerdict:
    """A phase judged over its own seconds, with what it received."""

    phase: str
    span: Span
    received: int
    verdict: Verdict

    def words(self, origin: int) -> str:
        rate = self.received / self.span.seconds
        return (
            f"{self.phase} ({self.span.at(origin)}, {self.span.seconds} s, "
            f"{self.received:,} received, {rate:,.0f} msgs/s): {self.verdict.limit} — "
            f"{self.verdict.reason}"
        )


def phases(timeline: Timeline) -> list[tuple[str, Span]]:
    """The point's phases after (or beside) its measurement period: the backlog's build
    (receivers away), its drain, and the time after the senders stopped in which receivers
    still received (outside the drain, from :data:`TAIL_S`)."""
    seconds = timeline.seconds()
    if not seconds:
        return []
    found = []
    if timeline.hold is not None:
        build = max(timeline.hold, seconds[0].second)  # receivers held from the start
        build_end = timeline.drain.first - 1 if timeline.drain else seconds[-1].second
        if build_end >= build:
            found.append((BUILD, Span(build, build_end)))
    if timeline.drain is not None and timeline.drain.seconds > 0:  # a drain ended at once has none
        found.append((DRAIN, timeline.drain))
    sent = [t.second for t in seconds if t.confirmed]
    received = [t.second for t in seconds if t.received]
    if sent and received:
        first = max(sent[-1], timeline.drain.last if timeline.drain else sent[-1]) + 1
        if received[-1] - first + 1 >= TAIL_S:
            found.append((TAIL, Span(first, received[-1])))
    return found


def judge_phase(timeline: Timeline, phase: str, span: Span) -> PhaseVerdict:
    """One phase by the rules of :func:`~workload.model.verdict.verdict`, over its seconds;
    the senders count as sending in it if they confirmed messages after its first second
    (a drain's first second holds the last sends of senders it stopped)."""
    ticks = [t for t in timeline.ticks if t.second in span]
    usage = Usage(
        tuple(timeline.usage(span)),
        shared_host=timeline.shared_host,
        max_in_flight=timeline.max_in_flight,
        sending=phase == BUILD or any(t.confirmed for t in ticks if t.second > span.first),
        pinned=timeline.pinned if timeline.shared_host else None,
    )
    return PhaseVerdict(phase, span, sum(t.received for t in ticks), verdict(usage))


@dataclass(frozen=True)
class Stall:
    """Seconds with messages outstanding and no new message received: how many were
    outstanding (at most), the redeliveries received meanwhile, and what was busy."""

    span: Span
    outstanding: int
    redelivered: int
    busy: str

    def words(self, origin: int) -> str:
        nothing = (
            "nothing received"
            if not self.redelivered
            else f"no new message received (only {self.redelivered:,} redeliveries)"
        )
        return (
            f"stall: {nothing} for {self.span.seconds} s with {self.outstanding:,} "
            f"outstanding ({self.span.at(origin)}); {self.busy}"
        )


def stalls(timeline: Timeline) -> list[Stall]:
    """Every run of :data:`STALL_S` seconds or more in which no new message was received
    while messages were outstanding at the end of the second before, the backlog's build
    left out."""
    build = dict(phases(timeline)).get(BUILD)
    found: list[Stall] = []
    run: list[Tick] = []
    # Confirmed less received, up to the end of the second before (a run's last second: its
    # most, none received). From totals, as the backlog counts: a message received a second
    # before its sender saw the confirmation leaves none falsely outstanding.
    queued = confirmed = received = 0
    for tick in [*timeline.seconds(), None]:  # None: the end closes a run
        away = build is not None and tick is not None and tick.second in build
        if tick is not None and not tick.received and queued > 0 and not away:
            run.append(tick)
        else:
            if len(run) >= STALL_S:
                span = Span(run[0].second, run[-1].second)
                again = sum(t.redelivered for t in run)
                found.append(Stall(span, queued, again, busy(timeline, span)))
            run = []
        if tick is not None:
            confirmed, received = confirmed + tick.confirmed, received + tick.received
            queued = max(0, confirmed - received)
    return found


def busy(timeline: Timeline, span: Span) -> str:
    """What each side used each second of the span, lowest to highest: the broker nodes
    summed, the senders, the receivers, and on a shared machine everything else."""
    groups: dict[str, list[float]] = {}
    for second in range(span.first, span.last + 1):
        samples = timeline.samples.get(second, ())
        sums = {
            timeline.broker: _sum(samples, "broker"),
            "senders": _sum(samples, "sender"),
            "receivers": _sum(samples, "receiver"),
        }
        host = _sum(samples, "host") if timeline.shared_host else None
        if host is not None:
            run = sum(v for v in sums.values() if v is not None)
            sums["others"] = max(0.0, host - run)
        for name, value in sums.items():
            if value is not None:
                groups.setdefault(name, []).append(value)
    if not groups:
        return "no telemetry during it"
    parts = [f"{name} at {_range(values)}" for name, values in groups.items()]
    parts[0] += " of a core"
    return ", ".join(parts)


def _sum(samples: Iterable[NodeUsage], role: str) -> float | None:
    mine = [s.cpu_pct for s in samples if s.role == role]
    return sum(mine) if mine else None


def _range(values: Sequence[float]) -> str:
    low, high = f"{min(values):.0f}", f"{max(values):.0f}"
    return f"{low} %" if low == high else f"{low}–{high} %"


@dataclass(frozen=True)
class TimeVerdict:
    """A point over time: its trends (broker, clients; None where not measured), each
    phase judged, and its stalls."""

    broker_trend: Trend | None = None
    client_trend: Trend | None = None
    phases: tuple[PhaseVerdict, ...] = ()
    stalls: tuple[Stall, ...] = ()
    origin: int = 0
    lines: tuple[str, ...] = field(default=(), init=False)

    def __post_init__(self) -> None:
        lines = [p.words(self.origin) for p in self.phases]
        lines += [s.words(self.origin) for s in self.stalls]
        object.__setattr__(self, "lines", tuple(lines))

    @property
    def note(self) -> str:
        """The rising trends, for the verdict's reason ("" without)."""
        rising = [t for t in (self.broker_trend, self.client_trend) if t and t.rising]
        return "; ".join(t.words() for t in rising)

    @property
    def cell(self) -> str:
        """The lines as one cell (:func:`lines_of` splits it)."""
        return SEPARATOR.join(self.lines)

    @property
    def stall_s(self) -> int:
        """The longest stall's seconds (0: none)."""
        return max((s.span.seconds for s in self.stalls), default=0)


def judge_time(timeline: Timeline) -> TimeVerdict:
    """A point's trends, phases and stalls (see the module)."""
    judged = tuple(judge_phase(timeline, name, span) for name, span in phases(timeline))
    return TimeVerdict(
        trend(timeline, "broker CPU", BROKER_ROLES),
        trend(timeline, "client CPU", CLIENT_ROLES),
        judged,
        tuple(stalls(timeline)),
        timeline.origin,
    )


def lines_of(cell: object) -> list[str]:
    """A ``phase_verdicts`` cell's lines (none for an empty cell)."""
    return [line for line in str(cell or "").split(SEPARATOR) if line]
