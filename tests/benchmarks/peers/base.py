"""What the peer benchmark passes between its parts: the load both tools are given, what a
tool run measured, and the contract of one system's own load tool (:class:`PeerTool`).

A peer tool runs against a broker brokerbench already started; it never starts or stops
brokers itself.
"""

from __future__ import annotations

import abc
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from brokers.base import BrokerSystem, Destination, Endpoints

from .cpu import CpuSample, usage_between

Log = Callable[[str], None]


@dataclass(frozen=True)
class LoadSettings:
    """The load of one row: the same for brokerbench and the peer tool."""

    threads: int
    duration: float
    message_size: int = 100
    max_send_batch: int = 10
    receive_batch: int = 10
    #: Send batches are uniform in [min_send_batch, max_send_batch].
    min_send_batch: int = 1
    #: ``[load] max_in_flight`` given to brokerbench; None = its default (one batch).
    max_in_flight: int | None = None

    @property
    def receivers(self) -> int:
        """Receiver workers: brokerbench's default is two receiver nodes of ``threads`` each."""
        return 2 * self.threads

    @property
    def batches(self) -> str:
        """The send batch sizes in words."""
        if self.min_send_batch == self.max_send_batch:
            return f"send batches of {self.max_send_batch}"
        return f"send batches uniform in [{self.min_send_batch}, {self.max_send_batch}]"

    @property
    def window(self) -> int:
        """Messages a sender may have unconfirmed: a batch, times the batches in flight."""
        return self.max_send_batch * (self.max_in_flight or 1)


@dataclass(frozen=True)
class Measurement:
    """What one tool reported; None where the tool does not measure it."""

    send_per_s: float | None
    receive_per_s: float | None = None
    publish_p50_ms: float | None = None
    publish_p99_ms: float | None = None
    #: Said under the table (e.g. what the latency is of).
    notes: tuple[str, ...] = ()
    #: Messages sent in the whole run, where the tool says: CPU per message over a whole
    #: run divides by it (the rate's own period may be shorter than the run).
    messages: float | None = None


@dataclass(frozen=True)
class CpuUsage:
    """CPU of the client processes and of the broker over one tool's run (or part of it)."""

    client_seconds: float
    broker_seconds: float
    wall_seconds: float
    #: What the figures cover, e.g. "whole run" or "sending period".
    scope: str = "whole run"
    #: Readings taken during the run, to narrow the figures down with :meth:`within`.
    samples: tuple[CpuSample, ...] = ()
    #: CPU seconds of the whole machine (every process) over the same time; None unknown.
    machine_seconds: float | None = None
    #: The client's CPU seconds split by role — sending and receiving processes — where the
    #: tool runs them apart (None: not known apart).
    sender_seconds: float | None = None
    receiver_seconds: float | None = None
    #: Messages sent and received within what the figures cover, where the tool's own
    #: records count them (brokerbench's per-second records): CPU per message divides by
    #: them.
    sent_in_scope: int | None = None
    received_in_scope: int | None = None

    def _pct(self, seconds: float | None) -> float | None:
        if seconds is None or not self.wall_seconds:
            return None
        return 100.0 * seconds / self.wall_seconds

    @property
    def client_pct(self) -> float:
        return self._pct(self.client_seconds) or 0.0

    @property
    def broker_pct(self) -> float:
        return self._pct(self.broker_seconds) or 0.0

    @property
    def sender_pct(self) -> float | None:
        return self._pct(self.sender_seconds)

    @property
    def receiver_pct(self) -> float | None:
        return self._pct(self.receiver_seconds)

    @property
    def other_pct(self) -> float | None:
        """CPU of everything else on the machine (% of one core): a busy machine disturbs
        the tool's figures."""
        if self.machine_seconds is None:
            return None
        other = self.machine_seconds - self.client_seconds - self.broker_seconds
        return self._pct(max(0.0, other))

    def within(self, start: float, end: float, scope: str) -> CpuUsage:
        """The CPU between two wall-clock times (``time.time()``), or self when the
        readings do not cover them."""
        found = usage_between(self.samples, start, end)
        if found is None:
            return self
        client, broker, wall, machine = found
        return CpuUsage(client, broker, wall, scope, machine_seconds=machine)

    def with_roles(self, sender: float | None, receiver: float | None) -> CpuUsage:
        return replace(self, sender_seconds=sender, receiver_seconds=receiver)


@dataclass(frozen=True)
class ToolRow:
    """One row of a system's table: a tool's run at one load, or why it failed."""

    tool: str
    threads: int | None
    measurement: Measurement | None = None
    cpu: CpuUsage | None = None
    error: str | None = None
    #: A run of the peer tool on its own, first thing on the idle broker: what the tool
    #: does undisturbed, which its rows in the table are checked against.
    reference: bool = False

    def micros_per_message(
        self, seconds: float | None, rate: float | None, counted: int | None = None
    ) -> float | None:
        """Client CPU µs per message: ``seconds`` of CPU over the CPU period, divided by the
        messages ``counted`` in that period where the tool counted them, else by those of
        the whole run where the CPU covers the whole run and the tool said, else by
        ``rate`` × the period."""
        if seconds is None or not rate or self.cpu is None or not self.cpu.wall_seconds:
            return None
        if counted:
            return seconds / counted * 1e6
        m = self.measurement
        if self.cpu.scope == "whole run" and m is not None and m.messages:
            return seconds / m.messages * 1e6
        return seconds / self.cpu.wall_seconds / rate * 1e6

    @property
    def send_us(self) -> float | None:
        """CPU µs of the sending processes per message sent."""
        m = self.measurement
        return self.micros_per_message(
            self.cpu.sender_seconds if self.cpu else None,
            m.send_per_s if m else None,
            self.cpu.sent_in_scope if self.cpu else None,
        )

    @property
    def receive_us(self) -> float | None:
        """CPU µs of the receiving processes per message received."""
        m = self.measurement
        return self.micros_per_message(
            self.cpu.receiver_seconds if self.cpu else None,
            m.receive_per_s if m else None,
            self.cpu.received_in_scope if self.cpu else None,
        )

    @property
    def client_us(self) -> float | None:
        """CPU µs of all client processes per message sent (and received, where the tool
        receives)."""
        m = self.measurement
        return self.micros_per_message(
            self.cpu.client_seconds if self.cpu else None,
            m.send_per_s if m else None,
            self.cpu.sent_in_scope if self.cpu else None,
        )


class ToolFailed(Exception):
    """A tool could not run or its output could not be read (one line, shown in the table)."""


@dataclass
class PeerContext:
    """The running broker a peer tool loads, and where it may keep files."""

    system: BrokerSystem[Any]
    params: Any
    endpoints: Endpoints
    workdir: Path
    broker_pids: Callable[[], list[int]]
    log: Log = print

    def destination(self, name: str) -> Destination:
        """A fresh queue/topic/stream/table prepared by the system's own ``prepare``."""
        destination = Destination(re.sub(r"[^A-Za-z0-9_-]", "-", name))
        self.system.prepare(self.endpoints, self.params, destination)
        return destination


class PeerTool(abc.ABC):
    """One system's own load tool, run with settings equivalent to a brokerbench row."""

    #: The brokerbench system it loads.
    system: str
    #: Shown in the table's tool column.
    title: str
    #: ``[broker.params]`` both tools use (the system's safe defaults unless set here).
    broker_params: dict[str, Any] = {}
    #: False when the tool has no notion of concurrent clients: it runs once per system.
    scales_with_threads: bool = True

    @abc.abstractmethod
    def missing(self) -> str | None:
        """Why the tool cannot run here (one line), or None."""

    def install(self, log: Log) -> None:  # noqa: B027 - optional hook
        """Fetch the tool when that is cheap (jars from Maven Central, a Go build)."""

    @abc.abstractmethod
    def settings(self, load: LoadSettings) -> str:
        """The tool's settings for this load, in its own option syntax (printed)."""

    @abc.abstractmethod
    def run(self, ctx: PeerContext, load: LoadSettings) -> tuple[Measurement, CpuUsage]:
        """Run the tool against ``ctx``; raises :class:`ToolFailed` naming what went wrong."""
