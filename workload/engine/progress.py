"""Live progress on the terminal while a sweep point runs.

Every interval the view shows the send and receive rates, the processing-latency p50 and
p99 of the messages received in that interval (the nodes' histogram counts merged, read
with the rule of :func:`workload.engine.histogram.percentile_of`), the totals with redeliveries
named as such, the errors, the time elapsed against the point's sending duration and an
estimate of the time left for the whole sweep.

On a terminal a small live display (``rich``) is redrawn in place every second and stays
when the point ends; otherwise (CI, logs) a plain line with the same figures is printed
every ``log_every`` seconds, and once more at the end. Progress is a courtesy: a closed
terminal or pipe never stops the run.
"""

from __future__ import annotations

import io
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import TextIO, cast

from rich.console import Console, Group
from rich.live import Live
from rich.padding import Padding
from rich.progress_bar import ProgressBar
from rich.table import Table
from rich.text import Text

from workload.engine.histogram import percentile_of
from workload.engine.node_progress import Progress
from workload.model.sweep import SweepPoint, estimated_seconds

#: With no report from any node for this long, an interval's figures are shown as zero.
STALE_AFTER = 3.0
#: How often nodes report (:mod:`workload.engine.node_progress`): a first report covers up to
#: this much.
REPORT_EVERY = 1.0


@dataclass(frozen=True)
class Figures:
    """What the view shows at one moment: of the last interval, or (``final``) of the
    whole point."""

    elapsed: float
    sent: int
    received: int
    redelivered: int
    errors: int
    send_rate: float
    receive_rate: float
    #: Processing latency of the interval's (the point's) messages, µs; None without any.
    p50_us: float | None
    p99_us: float | None
    #: Estimated seconds until the whole sweep ends.
    eta: float
    final: bool = False
    #: What set the pace (the closing line only; "" when not judged).
    limit: str = ""
    #: The closing line: the seconds over which sends and receives flowed, which its
    #: average rates divide by (receives flow on while receivers drain: equal totals can
    #: show different averages).
    send_span_s: float = 0.0
    receive_span_s: float = 0.0


class ProgressView:
    """The progress of one sweep point, fed :class:`Progress` reports by the coordinator.

    ``point`` gives the sending duration (the progress bar) and, with ``remaining_s`` (the
    estimated time of the sweep's points after this one), the sweep's ETA. The last line
    (:meth:`close`) sums up the point: average rates over the seconds sends and receives
    flowed (each named), and the processing-latency percentiles of all its messages, the
    warm-up included (the analysis leaves it out).
    """

    def __init__(
        self,
        label: str,
        stream: TextIO = sys.stderr,
        log_every: float = 5.0,
        *,
        point: SweepPoint | None = None,
        remaining_s: float = 0.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.label = label
        self.out = _Courtesy(stream)
        self.tty = self.out.isatty()
        self.log_every = log_every
        self.clock = clock
        self.duration = point.load.duration if point is not None else 0.0
        #: This point's estimated time, as the sweep's estimate counts it.
        self.estimate = estimated_seconds([point]) if point is not None else 0.0
        self.remaining_s = remaining_s
        self.start = clock()
        self.latest: dict[tuple[str, int, int], Progress] = {}
        #: Processing-latency counts reported since the figures were last worked out, and
        #: over the whole point.
        self.pending: dict[int, int] = {}
        self.whole: dict[int, int] = {}
        self.updated = self.start  # when the latest report arrived
        self.fresh = False  # a report arrived since the figures were last worked out
        #: When the sent and received totals first became non-zero, and last grew.
        self.flowing: list[tuple[int, float, float]] = [(0, 0.0, 0.0), (0, 0.0, 0.0)]
        self.last_print = float("-inf")
        self.last_totals = (0, 0, self.start)
        self.rates = (0.0, 0.0)
        self.latency: tuple[float | None, float | None] = (None, None)
        self.live: Live | None = None
        #: Receiver workers settled and awaited while the senders wait for them (a local
        #: point's start gate, :mod:`workload.engine.start_gate`); None once it opened.
        self.joining: tuple[int, int] | None = None

    def receivers_joining(self, count: tuple[int, int] | None) -> None:
        """How many receivers have joined while the senders wait (None: they do not). When
        the wait ends the point's time starts again, as the senders' duration does: the
        bar and "draining" follow the senders."""
        if count is None and self.joining is not None:
            self.start = self.clock()
            sent, received, _ = self.totals()
            self.last_totals = (sent, received, self.start)
        self.joining = count

    def update(self, item: Progress) -> None:
        self.latest[(item.role, item.node, item.part)] = item
        pending, whole = self.pending, self.whole
        for bucket, n in item.processing_latency.items():
            pending[bucket] = pending.get(bucket, 0) + n
            whole[bucket] = whole.get(bucket, 0) + n
        now = self.updated = self.clock()
        self.fresh = True
        sent, received, _ = self.totals()
        for i, total in enumerate((sent, received)):
            before, first, _ = self.flowing[i]
            if total > before:
                self.flowing[i] = (total, first if before else now, now)

    def totals(self) -> tuple[int, int, int]:
        values = self.latest.values()
        return (
            sum(p.sent for p in values),
            sum(p.received for p in values),
            sum(p.errors for p in values),
        )

    @property
    def redelivered(self) -> int:
        return sum(p.redelivered for p in self.latest.values())

    def tick(self) -> None:
        now = self.clock()
        if now - self.last_print < (1.0 if self.tty else self.log_every):
            return
        self.last_print = now
        self._show(self.figures(now))

    def close(self, limit: str = "") -> None:
        """Show the point's summary — with ``limit``, what set its pace — which stays (on a
        terminal, as the live display's last state)."""
        self.last_print = self.clock()
        self._show(replace(self.summary(self.last_print), limit=limit))
        if self.live is not None:
            self.live.stop()
            self.live = None

    def figures(self, now: float) -> Figures:
        """The figures at ``now``; the interval ones are worked out afresh when reports came
        in since they last were (a tick between two reports keeps them), or when none came
        for :data:`STALE_AFTER` seconds."""
        totals = self.totals()
        sent, received, _ = totals
        last_sent, last_received, last_t = self.last_totals
        if self.fresh or now - last_t >= STALE_AFTER:
            # Rates over the time between the reports' arrivals: a report says how far its
            # node was when it arrived.
            as_of = self.updated if self.fresh else now
            dt = max(1e-6, as_of - last_t)
            self.rates = ((sent - last_sent) / dt, (received - last_received) / dt)
            self.latency = _percentiles(self.pending)
            self.pending = {}
            self.last_totals = (sent, received, as_of)
            self.fresh = False
        elapsed = now - self.start
        eta = max(0.0, self.estimate - elapsed) + self.remaining_s
        return self._figures(totals, elapsed, self.rates, self.latency, eta)

    def summary(self, now: float) -> Figures:
        """The whole point at ``now``: rates averaged over the time messages flowed (from
        the report before the first that counted any to the last that counted more)."""
        spans = [max(REPORT_EVERY, last - first + REPORT_EVERY) for _, first, last in self.flowing]
        rates = [
            total / span if total else 0.0
            for (total, _, _), span in zip(self.flowing, spans, strict=True)
        ]
        whole = self._figures(
            self.totals(), now - self.start, rates, _percentiles(self.whole), self.remaining_s
        )
        return replace(whole, final=True, send_span_s=spans[0], receive_span_s=spans[1])

    def _figures(
        self,
        totals: tuple[int, int, int],
        elapsed: float,
        rates: Sequence[float],
        latency: tuple[float | None, float | None],
        eta: float,
    ) -> Figures:
        """The figures of these totals (sent, received, errors), rates and latencies."""
        sent, received, errors = totals
        return Figures(
            elapsed=elapsed,
            sent=sent,
            received=received,
            redelivered=self.redelivered,
            errors=errors,
            send_rate=rates[0],
            receive_rate=rates[1],
            p50_us=latency[0],
            p99_us=latency[1],
            eta=eta,
        )

    def line(self, f: Figures) -> str:
        """The plain line (logs, CI): the same figures as the live display."""
        line = (
            f"  {self.label}  {self._time(f)}  {traffic_text(f)}  {latency_errors_text(f)}"
            f"  sweep ETA {clock_text(f.eta)}"
        )
        return line + (f"\n    limited by: {f.limit}" if f.limit else "")

    def sending_span(self) -> tuple[float, float]:
        """Wall-clock times of the first and the last report that counted more sent
        messages (0, 0 before any)."""
        _, first, last = self.flowing[0]
        if not first:
            return 0.0, 0.0
        offset = time.time() - self.clock()
        return first + offset, last + offset

    def send_rate(self) -> float:
        """The point's average send rate so far (msgs/s)."""
        return self.summary(self.clock()).send_rate

    def _time(self, f: Figures) -> str:
        shown = clock_text(f.elapsed)
        if self.duration:
            shown += f" / {clock_text(self.duration)}"
        if f.final:
            return shown + " ended"
        if self.joining is not None:
            settled, awaited = self.joining
            return shown + f" receivers joining {settled}/{awaited}"
        return shown + " draining" if self.duration and f.elapsed > self.duration else shown

    def _show(self, f: Figures) -> None:
        if not self.tty:
            self._write(self.line(f) + "\n")
            return
        if self.live is None:
            console = Console(file=cast(TextIO, self.out), force_terminal=True, force_jupyter=False)
            # Lines the coordinator prints meanwhile (faults, Ctrl-C) go above the display —
            # unless standard output is not this terminal.
            self.live = Live(
                console=console,
                auto_refresh=False,
                redirect_stdout=_isatty(sys.stdout),
                redirect_stderr=False,
            )
            self.live.start()
        self.live.update(self._renderable(f), refresh=True)

    def _renderable(self, f: Figures) -> Group:
        """The point; its progress and the sweep's ETA; the traffic; latency and errors."""
        progress = Table.grid(padding=(0, 2))
        for _ in range(3):
            progress.add_column(no_wrap=True)
        progress.add_row(
            ProgressBar(
                total=self.duration or 1.0,
                completed=min(f.elapsed, self.duration) if self.duration else 0.0,
                width=30,
            )
            if self.duration
            else Text(""),
            Text(self._time(f)),
            Text(f"sweep ETA {clock_text(f.eta)}", style="cyan"),
        )
        traffic = Text("  " + traffic_text(f))
        traffic.highlight_regex(r"incl\. [\d,]+ redelivered", "yellow")
        latency = Text("  " + latency_errors_text(f))
        if f.errors:
            latency.highlight_regex(r"errors [\d,]+", "bold red")
        parts: list[Text | Padding] = [
            Text(self.label, style="bold"),
            Padding(progress, (0, 0, 0, 2)),
            traffic,
            latency,
        ]
        if f.limit:
            limit = Text(f"  limited by: {f.limit}")
            limit.highlight_regex(r"(client CPU|shared host)", "yellow")
            parts.append(limit)
        return Group(*parts)

    def _write(self, text: str) -> None:
        """Progress is a courtesy: a closed terminal or pipe must not stop the run."""
        self.out.write(text)
        self.out.flush()


def _percentiles(buckets: dict[int, int]) -> tuple[float | None, float | None]:
    return percentile_of(buckets.items(), 0.50), percentile_of(buckets.items(), 0.99)


def traffic_text(f: Figures) -> str:
    """Totals and rates, redeliveries named; in a summary, averages over the seconds each
    flowed (sends while senders sent, receives until receivers drained), named."""
    again = f", incl. {f.redelivered:,} redelivered" if f.redelivered else ""
    if f.final:
        send = f"avg {f.send_rate:,.0f}/s over {f.send_span_s:,.0f} s"
        receive = f"avg {f.receive_rate:,.0f}/s over {f.receive_span_s:,.0f} s"
    else:
        send, receive = f"{f.send_rate:,.0f}/s", f"{f.receive_rate:,.0f}/s"
    return f"sent {f.sent:,} ({send})  received {f.received:,} ({receive}{again})"


def latency_errors_text(f: Figures) -> str:
    """The processing-latency percentiles (of the interval, or the whole point — its
    warm-up included, unlike the table's whole-run figures) and errors."""
    whole = " (whole point, incl. warm-up)" if f.final else ""
    return (
        f"proc p50 {latency_text(f.p50_us)}  p99 {latency_text(f.p99_us)}{whole}"
        f"  errors {f.errors:,}"
    )


def latency_text(us: float | None) -> str:
    """A latency in ms with three significant digits (seconds from 10 s); – for none."""
    if us is None:
        return "–"
    ms = us / 1000.0
    if ms >= 10_000:
        return f"{ms / 1000:,.1f} s"
    if ms >= 100:
        return f"{ms:,.0f} ms"
    if ms >= 10:
        return f"{ms:.1f} ms"
    return f"{ms:.2f} ms"


def clock_text(seconds: float) -> str:
    """Seconds as m:ss, or h:mm:ss from an hour."""
    whole = max(0, round(seconds))
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def _isatty(stream: object) -> bool:
    try:
        return bool(stream.isatty())  # type: ignore[attr-defined]
    except (AttributeError, OSError, ValueError):
        return False


class _Courtesy(io.TextIOBase):
    """A stream whose write errors are swallowed: a closed terminal or pipe (EIO, EPIPE, a
    closed file) loses the progress display, never the run. Also what ``rich`` writes to,
    so that it never sees such an error either (it would end the process)."""

    def __init__(self, stream: TextIO) -> None:
        super().__init__()
        self.stream = stream

    def write(self, text: str) -> int:
        try:
            self.stream.write(text)
        except (OSError, ValueError):
            pass
        return len(text)

    def flush(self) -> None:
        try:
            self.stream.flush()
        except (OSError, ValueError):
            pass

    def isatty(self) -> bool:
        return _isatty(self.stream)

    def fileno(self) -> int:
        return self.stream.fileno()
