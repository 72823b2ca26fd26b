"""The scenario file format: TOML parsed once into strict pydantic models.

Unknown or misspelt keys are rejected, numbers and booleans are never coerced from other
types (``threads = true`` or ``message_size = "100"`` are errors; durations take a number of
seconds or a string such as ``"30s"``), and every number has an upper bound. Each problem
becomes one line naming the file, the key path and, where it can be found, the line. Broker
parameters are validated against the chosen system's own model from the registry, and
every sweep point is validated whole — its load section and its broker parameters — before
anything runs. Everything past :func:`load_scenario` works on these models, never on raw
dicts.

Limits (``brokerbench schema`` shows the per-key ones too):

- the file: a regular file (not a pipe, device or directory) of at most 1 MiB, UTF-8;
- ``name``: at most 64 characters; ``description``: at most 2,000;
- ``broker.endpoints``: at most 100, each ``host:port``; the host is a DNS name, an IPv4
  address or an IPv6 address in brackets (``[::1]:9092``), the port 1–65535 in ASCII digits;
- ``load.threads``: at most 10,000 workers per node; ``sender_nodes``: at most 1,000;
  ``receiver_nodes``: at most 2,000 (so the default, twice the sender nodes, always fits);
- ``message_size``: from the 72-byte header to 16 MiB; ``max_send_batch`` and
  ``receive_batch``: at most 100,000; ``pool_size``: at most 1,000,000 payloads, and the
  pool (pool_size × message_size) at most 1 GiB per process;
- ``messages``: at most 10¹² per worker; ``rate``: 0.001 to 10⁸ msgs/s per worker;
  ``max_in_flight``: at most 1,000; ``processes``: at most 1,024;
- every duration finite and at most 7 days; the warm-up shorter than ``load.duration``;
  ``measurement.step`` ≤ ``measurement.window``; a window given in the file at most
  ``load.duration`` (the default 60 s may exceed a short run, measured as one window);
- a sweep of at most 10,000 points (the product of the list lengths, computed before
  anything is expanded), repeats included: ``repeat`` (1–100) times the points is at most
  10,000 too;
- ``[search]`` (a capacity search, :class:`SearchSection`): rates of 0.001 to 10⁸ msgs/s in
  total, ``low`` below ``high``, each at least 0.001 msgs/s per sender worker; ``precision``
  0.001–1; ``max_probes`` 2–50; open loop and one point only: no ``load.rate``, no
  ``[sweep]``, no ``[[faults]]``, no ``repeat`` (:func:`search_problems`);
- at most 100 ``[[faults]]``, one at a time, each within ``load.duration``, on a local
  multi-node topology of a system whose local deployment takes faults, or on an AWS
  stack's brokers (``aws_topology``, with several nodes) whose cloud recipe names the
  broker's systemd unit (:func:`fault_problems`).
"""

from __future__ import annotations

import ipaddress
import itertools
import math
import os
import re
import stat
import tomllib
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Annotated, Any, Literal, NamedTuple

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    WithJsonSchema,
    field_validator,
    model_validator,
)

from brokers import registry
from brokers.base import FAULT_ROLES, BrokerParams, Endpoints, FaultSupport
from workload.message import HEADER_MAX
from workload.model.errors import Loc, Problem, ScenarioError, conflict, one_line, problems_of
from workload.model.sweep import point_problems

#: Environment variable that supplies the broker's password with deployment = 'endpoints'.
PASSWORD_ENV = "BROKERBENCH_BROKER_PASSWORD"
MIB = 1024 * 1024
GIB = 1024 * MIB
MAX_FILE_BYTES = MIB
MAX_NAME = 64
MAX_DESCRIPTION = 2_000
MAX_WORD = 64  # system, topology, option names
MAX_ENDPOINTS = 100
MAX_OPTIONS = 32
MAX_OPTION_VALUE = 1_024
MAX_THREADS = 10_000
MAX_SENDER_NODES = 1_000
MAX_RECEIVER_NODES = 2 * MAX_SENDER_NODES
MAX_MESSAGE_SIZE = 16 * MIB
MAX_BATCH = 100_000
MAX_POOL_SIZE = 1_000_000
MAX_POOL_BYTES = GIB
MAX_MESSAGES = 10**12
MIN_RATE = 0.001
MAX_RATE = 1e8
MAX_IN_FLIGHT = 1_000
MAX_PROCESSES = 1_024
MAX_SECONDS = 7 * 24 * 3600.0
MAX_SWEEP_POINTS = 10_000
MAX_REPEAT = 100
MIN_PROBES = 2
MAX_PROBES = 50
MIN_PRECISION = 0.001
MAX_FAULTS = 100
MAX_FAULT_NODE = 1_000

_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0}
_DURATION = re.compile(r"\s*([0-9]{1,15}(?:\.[0-9]{1,15})?)\s*(ms|s|min|m|h)?\s*", re.ASCII)


def parse_duration(value: Any) -> Any:
    """``"90s"``, ``"2m"``, ``"500ms"`` or a plain number of seconds → seconds (finite float)."""
    if isinstance(value, bool):
        raise ValueError('expected a duration such as 30 or "30s"')
    seconds: float | None = None
    if isinstance(value, int | float):
        try:
            seconds = float(value)
        except OverflowError:
            seconds = math.inf
    elif isinstance(value, str):
        match = _DURATION.fullmatch(value)
        if match:
            seconds = float(match.group(1)) * _UNITS[match.group(2) or "s"]
    if seconds is None:
        shown = value if not isinstance(value, str) or len(value) <= 40 else value[:40] + "…"
        raise ValueError(f'{shown!r} is not a duration (use e.g. 30, "30s", "2m", "500ms")')
    if not math.isfinite(seconds):
        raise ValueError(f"a duration must be finite, at most {MAX_SECONDS:.0f} s (7 days)")
    return seconds


def format_duration(seconds: float) -> str:
    """Seconds as a short reading: ``"45 s"``, ``"27 min"``, ``"3 h 20 min"``, ``"7 d"``."""
    if seconds < 60:
        return f"{seconds:.3g} s"
    minutes = round(seconds / 60)
    days, minutes = divmod(minutes, 24 * 60)
    hours, minutes = divmod(minutes, 60)
    parts = [f"{n} {unit}" for n, unit in ((days, "d"), (hours, "h"), (minutes, "min")) if n]
    return " ".join(parts[:2]) or "1 min"


Duration = Annotated[
    float, BeforeValidator(parse_duration), Field(ge=0, le=MAX_SECONDS, allow_inf_nan=False)
]
PositiveDuration = Annotated[
    float, BeforeValidator(parse_duration), Field(gt=0, le=MAX_SECONDS, allow_inf_nan=False)
]
Threads = Annotated[int, Field(gt=0, le=MAX_THREADS)]
SenderNodes = Annotated[int, Field(gt=0, le=MAX_SENDER_NODES)]
ReceiverNodes = Annotated[int, Field(gt=0, le=MAX_RECEIVER_NODES)]
MessageSize = Annotated[int, Field(ge=HEADER_MAX, le=MAX_MESSAGE_SIZE)]
BatchSize = Annotated[int, Field(gt=0, le=MAX_BATCH)]
Word = Annotated[str, Field(max_length=MAX_WORD)]

_HOST_LABEL = r"[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?"
_HOST_NAME = re.compile(rf"{_HOST_LABEL}(?:\.{_HOST_LABEL})*\.?")
_ENDPOINT = re.compile(r"(?:\[(?P<ipv6>[^\[\]%]+)\]|(?P<host>[^\[\]:]+)):(?P<port>[0-9]{1,5})")


def check_endpoint(value: str) -> str:
    """``host:port``: a DNS name, IPv4 address or bracketed IPv6 address, and a port 1–65535."""
    match = _ENDPOINT.fullmatch(value)
    if match is None or not 0 < int(match["port"]) < 65536:
        bare_ipv6 = value.count(":") > 1 and not value.startswith("[")
        hint = "; an IPv6 address goes in brackets, e.g. [::1]:9092" if bare_ipv6 else ""
        raise ValueError(f"{value!r} is not host:port with a port 1–65535{hint}")
    if match["ipv6"]:
        try:
            ipaddress.IPv6Address(match["ipv6"])
        except ValueError:
            raise ValueError(f"{value!r}: [{match['ipv6']}] is not an IPv6 address") from None
        return value
    host = match["host"]
    if re.fullmatch(r"[0-9.]+", host):
        try:
            ipaddress.IPv4Address(host)
        except ValueError:
            raise ValueError(f"{value!r}: {host!r} is not an IPv4 address") from None
    elif len(host) > 253 or not _HOST_NAME.fullmatch(host):
        raise ValueError(
            f"{value!r}: the host must be a DNS name (letters, digits, '-', '_' and dots, not "
            "starting with '-'), an IPv4 address or an IPv6 address in brackets"
        )
    return value


Endpoint = Annotated[str, Field(max_length=261), AfterValidator(check_endpoint)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


class BrokerSection(Strict):
    """Which system, how it is deployed, and its parameters."""

    system: Word = Field(description="Broker system name, see `brokerbench brokers`.")
    deployment: Literal["local", "endpoints"] = Field(
        "local",
        description="'local': brokerbench starts the broker here; 'endpoints': use a running one.",
    )
    topology: Word = Field(
        "single", description="Local topology, e.g. 'single' or 'cluster' (see the system)."
    )
    endpoints: list[Endpoint] = Field(
        default_factory=list,
        max_length=MAX_ENDPOINTS,
        description="host:port of each node, with deployment = 'endpoints'; an IPv6 host in "
        "brackets ([::1]:9092).",
    )
    options: dict[Word, Annotated[str, Field(max_length=MAX_OPTION_VALUE)]] = Field(
        default_factory=dict,
        max_length=MAX_OPTIONS,
        description="Connection extras for deployment = 'endpoints' (e.g. user, dbname).",
    )
    params: dict[str, Any] = Field(
        default_factory=dict, description="System parameters, checked against the system's model."
    )
    aws_topology: dict[Word, Annotated[int, Field(ge=0, le=MAX_FAULT_NODE + 1)]] | None = Field(
        None,
        description="Written by brokerbench into the scenario of an AWS stack's client "
        "machines (with deployment = 'endpoints'): the stack's broker nodes by role, which "
        "[[faults]] act on through the fault agent of each broker machine.",
    )

    @field_validator("system")
    @classmethod
    def _known_system(cls, value: str) -> str:
        try:
            registry.get(value)
        except registry.UnknownSystem as exc:
            raise ValueError(str(exc)) from None
        return value

    @model_validator(mode="after")
    def _deployment_fits(self) -> BrokerSection:
        if self.deployment == "endpoints" and not self.endpoints:
            raise ValueError("deployment = 'endpoints' needs endpoints = [\"host:port\", …]")
        if self.deployment == "local" and self.endpoints:
            raise ValueError("endpoints are only used with deployment = 'endpoints'")
        if self.deployment == "local" and self.aws_topology is not None:
            raise ValueError("aws_topology is only used with deployment = 'endpoints'")
        system = registry.get(self.system)
        if self.deployment == "local":
            if system.local is None:
                raise ValueError(
                    f"{self.system} cannot be started locally; use deployment = 'endpoints'"
                )
            if self.topology not in system.local.topologies:
                raise ValueError(
                    f"topology {self.topology!r} is not one of {', '.join(system.local.topologies)}"
                )
        return self

    def given_endpoints(self) -> Endpoints:
        """The endpoints and options; ``$BROKERBENCH_BROKER_PASSWORD``, when set, is the password
        (so that it need not be written into a scenario file)."""
        options = dict(self.options)
        password = os.environ.get(PASSWORD_ENV, "")
        if password:
            options["password"] = password
        return Endpoints(hosts=tuple(self.endpoints), extra=tuple(sorted(options.items())))


class LoadSection(Strict):
    """Client-side load (docs/measurement.md §2); the defaults are the reference study's."""

    threads: Threads = Field(1, description="Workers per client node.")
    sender_nodes: SenderNodes = Field(1, description="Sender node processes (machines on AWS).")
    receiver_nodes: ReceiverNodes | None = Field(
        None, description="Receiver node processes; default twice the sender nodes."
    )
    message_size: MessageSize = Field(100, description="Bytes.")
    max_send_batch: BatchSize = Field(10, description="Send batch size is uniform in [1, this].")
    receive_batch: BatchSize = Field(10, description="max_n of each receive call.")
    pool_size: int = Field(
        10_000,
        gt=0,
        le=MAX_POOL_SIZE,
        description="Random payloads generated at start-up, in every client process; "
        "pool_size × message_size is at most 1 GiB.",
    )
    duration: PositiveDuration = Field(60.0, description="How long senders send.")
    messages: int | None = Field(
        None,
        gt=0,
        le=MAX_MESSAGES,
        description="Stop a sender worker after this many messages (before duration ends).",
    )
    rate: float | None = Field(
        None,
        ge=MIN_RATE,
        le=MAX_RATE,
        allow_inf_nan=False,
        description="Target msgs/s per sender worker (open loop); unset = closed loop.",
    )
    max_in_flight: int = Field(
        1,
        ge=1,
        le=MAX_IN_FLIGHT,
        description="Batches a sender worker may have awaiting confirmation: 1 waits for each "
        "batch before the next (docs/measurement.md §2); a message counts as sent only once confirmed.",
    )
    processes: int | None = Field(
        None,
        ge=1,
        le=MAX_PROCESSES,
        description="Processes a client node spreads its workers over; default one per CPU "
        "core of the node, at most `threads`.",
    )
    idle_timeout: PositiveDuration = Field(
        60.0, description="A receiver stops when nothing arrived for this long."
    )
    failure_timeout: PositiveDuration = Field(
        20.0, description="A worker gives up after failing continuously for this long."
    )

    @model_validator(mode="after")
    def _pool_fits(self) -> LoadSection:
        size = self.pool_size * self.message_size
        if size > MAX_POOL_BYTES:
            raise conflict(
                ("pool_size", "message_size"),
                f"the payload pool (pool_size × message_size = {self.pool_size} × "
                f"{self.message_size} bytes = {size / GIB:.2f} GiB) exceeds the limit of 1 GiB "
                "per process; lower pool_size",
            )
        return self


class MeasurementSection(Strict):
    """How the per-second records become headline numbers (docs/measurement.md §3)."""

    warmup: Duration | None = Field(
        None,
        description="Seconds at the start of each point that are recorded but left out of "
        "headline figures and whole-run percentiles; default 10 s (a fifth of load.duration "
        "when that is under 50 s).",
    )
    window: PositiveDuration = Field(
        60.0,
        description="Latency window length; when given, at most load.duration (a run shorter "
        "than the default 60 s is measured as one window of its own length).",
    )
    step: PositiveDuration = Field(10.0, description="Window slide step; at most the window.")
    telemetry_interval: PositiveDuration = Field(
        1.0,
        le=60.0,
        description="How often every node's resources (CPU, memory, disk, network, GC) are "
        "sampled; at most 60 s.",
    )

    @model_validator(mode="after")
    def _step_fits(self) -> MeasurementSection:
        if self.step > self.window:
            raise conflict(
                ("step", "window"),
                f"step ({self.step:g} s) must not exceed window ({self.window:g} s): "
                "windows would leave gaps",
            )
        return self


def default_warmup(duration: float) -> float:
    """10 s, or a fifth of a run shorter than 50 s."""
    return min(10.0, duration / 5)


SWEEPABLE = ("threads", "sender_nodes", "receiver_nodes", "message_size")


class Combination(NamedTuple):
    """One sweep point's values, and where each is written (for messages)."""

    load: dict[str, Any]
    params: dict[str, Any]
    load_at: dict[str, Loc]
    params_at: dict[str, Loc]
    #: The point as a whole: ``sweep.points[i]`` or ``sweep``.
    at: Loc


class SweepPointSpec(Strict):
    """One explicit point of ``[[sweep.points]]``."""

    threads: Threads | None = None
    sender_nodes: SenderNodes | None = None
    receiver_nodes: ReceiverNodes | None = None
    message_size: MessageSize | None = None
    params: dict[str, Any] = Field(default_factory=dict)


class SweepSection(Strict):
    """Values to sweep: their cartesian product, or an explicit list of points."""

    threads: list[Threads] | None = None
    sender_nodes: list[SenderNodes] | None = None
    receiver_nodes: list[ReceiverNodes] | None = None
    message_size: list[MessageSize] | None = None
    params: dict[str, list[Any]] = Field(default_factory=dict)
    points: list[SweepPointSpec] = Field(default_factory=list)

    def _axes(self) -> list[tuple[bool, str, list[Any]]]:
        """(is a broker parameter, key, values) of every value list, in declared order."""
        axes: list[tuple[bool, str, list[Any]]] = [
            (False, k, getattr(self, k)) for k in SWEEPABLE if getattr(self, k) is not None
        ]
        return axes + [(True, k, v) for k, v in self.params.items()]

    def varies(self) -> bool:
        """Whether anything is swept (value lists or explicit points)."""
        return bool(self.points or self._axes())

    def size(self) -> int:
        """How many points the sweep has, without expanding it."""
        if self.points:
            return len(self.points)
        return math.prod(len(values) for _, _, values in self._axes())

    def combinations(self) -> Iterator[Combination]:
        """Every point's values (one empty point when nothing is swept)."""
        if self.points:
            for i, p in enumerate(self.points):
                load = {k: getattr(p, k) for k in SWEEPABLE if getattr(p, k) is not None}
                yield Combination(
                    load,
                    dict(p.params),
                    {k: ("sweep", "points", i, k) for k in load},
                    {k: ("sweep", "points", i, "params", k) for k in p.params},
                    ("sweep", "points", i),
                )
            return
        axes = self._axes()
        for picks in itertools.product(*(range(len(values)) for _, _, values in axes)):
            combo = Combination({}, {}, {}, {}, ("sweep",))
            for (is_param, key, values), i in zip(axes, picks, strict=True):
                (combo.params if is_param else combo.load)[key] = values[i]
                where = combo.params_at if is_param else combo.load_at
                where[key] = ("sweep", "params", key, i) if is_param else ("sweep", key, i)
            yield combo

    @model_validator(mode="after")
    def _one_style(self) -> SweepSection:
        lists = [key for _, key, _ in self._axes()]
        if self.points and lists:
            raise ValueError("use either value lists or [[sweep.points]], not both")
        for _, key, values in self._axes():
            if not values:
                raise ValueError(f"{key}: the list of values is empty")
        size = self.size()
        if size > MAX_SWEEP_POINTS:
            raise ValueError(
                f"{size:,} sweep points (the product of the list lengths); the limit is "
                f"{MAX_SWEEP_POINTS:,}"
            )
        return self


def isolate_unavailable(title: str) -> str:
    """Why a system's nodes cannot be isolated here."""
    return (
        f"isolate is not available for {title} here: its nodes started here all share the "
        "loopback interface, and brokerbench does not run them each in a network namespace "
        "of its own yet (the README's Faults section names the systems it does)"
    )


def check_selector(value: Any) -> Any:
    """A fault's ``node``: ``"leader"``, ``"follower"`` or a node index (one message if not)."""
    if value in FAULT_ROLES:
        return value
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_FAULT_NODE:
        return value
    raise ValueError(
        f'expected "leader", "follower" or a node index (0 to {MAX_FAULT_NODE}), got {value!r}'
    )


def describe_fault(action: str, node: str | int, at: float, until: float | None) -> str:
    """A fault in words: ``kill leader at 20 s until 40 s``, ``pause node 2 at 5 s``."""
    who = f"node {node}" if isinstance(node, int) or node.isdigit() else node
    return f"{action} {who} at {at:g} s" + (f" until {until:g} s" if until is not None else "")


class FaultSpec(Strict):
    """One fault of ``[[faults]]``: what happens to which broker node, and when."""

    at: Duration = Field(
        description="When the fault begins: seconds after the start of sending of each sweep "
        "point; within load.duration."
    )
    action: Literal["kill", "stop", "pause", "isolate"] = Field(
        description="kill (SIGKILL), stop (clean shutdown), pause (SIGSTOP until `until`), "
        "isolate (cut off from peers and clients until `until`; systems whose nodes run in "
        "network namespaces of their own)."
    )
    node: Annotated[
        str | int,
        BeforeValidator(check_selector),
        WithJsonSchema(
            {
                "anyOf": [
                    {"enum": list(FAULT_ROLES)},
                    {"type": "integer", "minimum": 0, "maximum": MAX_FAULT_NODE},
                ]
            }
        ),
    ] = Field(
        description='"leader", "follower" (what leads is the system\'s to say, see README) '
        "or a node index from 0."
    )
    until: PositiveDuration | None = Field(
        None,
        description="When the node returns (restart after kill/stop, resume after pause): "
        "seconds after the start of sending, after `at`, at most load.duration. Unset: it "
        "stays down until the point ends (and is brought back before the next point).",
    )

    @model_validator(mode="after")
    def _until_after_at(self) -> FaultSpec:
        if self.until is not None and self.until <= self.at:
            raise conflict(
                ("until", "at"),
                f"until ({self.until:g} s) must come after at ({self.at:g} s)",
            )
        return self

    def describe(self) -> str:
        """``kill leader at 20 s until 40 s``, ``pause node 2 at 5 s``."""
        return describe_fault(self.action, self.node, self.at, self.until)


class SearchSection(Strict):
    """A capacity search (``[search]``): the highest open-loop rate the broker holds within
    a processing-latency SLO, by bisection between ``low`` and ``high``
    (:mod:`workload.search`). Rates are msgs/s in total, over every sender worker."""

    slo_p99: PositiveDuration = Field(
        description="The SLO: whole-run processing-latency p99 (after the warm-up) a rate "
        'must hold, e.g. "50ms" or 0.05.'
    )
    low: float = Field(
        ge=MIN_RATE,
        le=MAX_RATE,
        allow_inf_nan=False,
        description="Total msgs/s over all sender workers known or assumed to hold; probed "
        "first (if it fails, the capacity is below it).",
    )
    high: float = Field(
        ge=MIN_RATE,
        le=MAX_RATE,
        allow_inf_nan=False,
        description="Total msgs/s, the upper bound; probed second (if it holds, the capacity "
        "is at least it).",
    )
    precision: float = Field(
        0.05,
        ge=MIN_PRECISION,
        le=1.0,
        allow_inf_nan=False,
        description="Stop when (lowest failing − highest holding) / highest holding is at "
        "most this.",
    )
    max_probes: int = Field(
        12,
        ge=MIN_PROBES,
        le=MAX_PROBES,
        description="At most this many probes (sweep points), low and high included.",
    )

    @model_validator(mode="after")
    def _low_below_high(self) -> SearchSection:
        if self.low >= self.high:
            raise conflict(
                ("low", "high"),
                f"low ({self.low:g} msgs/s) must be below high ({self.high:g} msgs/s)",
            )
        return self


class Scenario(Strict):
    """A whole scenario file."""

    name: str = Field(
        pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]*$",
        max_length=MAX_NAME,
        description="Used in run ids and file names.",
    )
    description: str = Field("", max_length=MAX_DESCRIPTION)
    broker: BrokerSection
    load: LoadSection = Field(default_factory=LoadSection)  # type: ignore[arg-type]
    measurement: MeasurementSection = Field(default_factory=MeasurementSection)  # type: ignore[arg-type]
    sweep: SweepSection = Field(default_factory=SweepSection)
    faults: list[FaultSpec] = Field(
        default_factory=list,
        max_length=MAX_FAULTS,
        description="Faults each sweep point goes through (local runs of a multi-node "
        "topology of a system that supports them), one at a time.",
    )
    repeat: int = Field(
        1,
        ge=1,
        le=MAX_REPEAT,
        description="Runs of each sweep point, interleaved: every point once, then every "
        "point again, … (each run its own sweep point, with its own destination).",
    )
    search: SearchSection | None = Field(
        None,
        description="A capacity search instead of a sweep: the highest total open-loop rate "
        "that holds the processing-latency SLO (runs locally with `brokerbench run`).",
    )

    @model_validator(mode="after")
    def _resolve(self) -> Scenario:
        duration = self.load.duration
        warmup = self.measurement.warmup
        if warmup is None:
            resolved = self.measurement.model_copy(update={"warmup": default_warmup(duration)})
            object.__setattr__(self, "measurement", resolved)  # frozen: resolved once, here
        elif warmup >= duration:
            raise conflict(
                ("measurement.warmup", "load.duration"),
                f"the warm-up ({warmup:g} s) must be shorter than load.duration ({duration:g} s)",
            )
        window = self.measurement.window
        measured = duration - (self.measurement.warmup or 0.0)
        if window > measured and "window" in self.measurement.model_fields_set:
            raise conflict(
                ("measurement.window", "load.duration", "measurement.warmup"),
                f"the latency window ({window:g} s) must not be longer than the measured "
                f"period (load.duration {duration:g} s − warm-up {duration - measured:g} s = "
                f"{measured:g} s): each point would be one window, its [window] figures "
                "its [run] figures",
            )
        runs = self.sweep.size() * self.repeat
        if runs > MAX_SWEEP_POINTS:
            raise conflict(
                ("repeat",),
                f"{self.sweep.size():,} sweep point(s) × repeat {self.repeat} = {runs:,} runs; "
                f"the limit is {MAX_SWEEP_POINTS:,}: lower repeat or sweep fewer values",
            )
        system = registry.get(self.broker.system)
        if self.load.max_in_flight > 1 and not system.can_pipeline:
            raise conflict(
                ("load.max_in_flight",),
                f"{system.title}'s adapter confirms each batch before the next; only 1 is possible",
            )
        return self

    def broker_params(self, overrides: Mapping[str, Any] | None = None) -> BrokerParams:
        """The system's typed parameters, with a sweep point's overrides applied."""
        model = registry.get(self.broker.system).params_model
        return model.model_validate({**self.broker.params, **(overrides or {})})

    def point_load(self, overrides: Mapping[str, Any] | None = None) -> LoadSection:
        """A sweep point's whole load, validated again as a load section.

        The scenario's load with the point's values; receiver nodes default to twice the
        sender nodes.
        """
        data = {**self.load.model_dump(), **(overrides or {})}
        if data["receiver_nodes"] is None:
            data["receiver_nodes"] = 2 * data["sender_nodes"]
        return LoadSection.model_validate(data)


def load_scenario(path: str | Path) -> Scenario:
    """Read, parse and validate one scenario file, or raise :class:`ScenarioError`."""
    path = Path(path)
    text = _read_text(path)
    if not text.strip():
        raise ScenarioError(
            [f"{path}: the file is empty; a scenario needs at least name and [broker]"]
        )
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ScenarioError([f"{path}: not valid TOML: {one_line(str(exc))}"]) from None
    except RecursionError:
        raise ScenarioError(
            [f"{path}: not valid TOML: arrays or tables nested too deeply"]
        ) from None
    except MemoryError:
        raise ScenarioError([f"{path}: not valid TOML: too large to parse"]) from None
    return parse_scenario(data, str(path), text)


def _read_text(path: Path) -> str:
    """The file's text: only a regular file of at most :data:`MAX_FILE_BYTES` is read.

    A pipe, device or directory is refused without reading it (opening does not block).
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise ScenarioError([f"{path}: no such file"]) from None
    except OSError as exc:
        raise ScenarioError([f"{path}: cannot read: {exc.strerror or exc}"]) from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = "a directory" if stat.S_ISDIR(mode) else "a pipe, device or socket"
            raise ScenarioError([f"{path}: not a regular file ({kind}); nothing was read"])
        with os.fdopen(fd, "rb", closefd=False) as file:
            data = file.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise ScenarioError([f"{path}: cannot read: {exc.strerror or exc}"]) from None
    finally:
        os.close(fd)
    if len(data) > MAX_FILE_BYTES:
        raise ScenarioError([f"{path}: larger than the limit of 1 MiB for a scenario file"])
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ScenarioError([f"{path}: cannot read: not UTF-8 text ({exc.reason})"]) from None


def parse_scenario(data: dict[str, Any], source: str = "<scenario>", text: str = "") -> Scenario:
    """Validate already-parsed TOML data (``source`` and ``text`` only improve messages).

    Besides the models, checks ``[broker.params]`` against the system and every sweep point
    as a whole.
    """
    try:
        scenario = Scenario.model_validate(data)
    except ValidationError as exc:
        raise ScenarioError.of(problems_of(exc), source, text) from None
    try:
        scenario.broker_params()
    except ValidationError as exc:
        raise ScenarioError.of(problems_of(exc, ("broker", "params")), source, text) from None
    problems = (
        point_problems(scenario)
        + fault_problems(scenario)
        + drain_problems(scenario)
        + search_problems(scenario)
    )
    if problems:
        raise ScenarioError.of(problems, source, text)
    return scenario


def search_problems(scenario: Scenario) -> list[Problem]:
    """What a ``[search]`` cannot go with: the search sets each probe's rate and runs one
    point at a time (no ``load.rate``, ``[sweep]``, ``[[faults]]`` or ``repeat``), and each
    probe's rate per sender worker obeys ``load.rate``'s limits."""
    search = scenario.search
    if search is None:
        return []
    problems: list[Problem] = []
    if scenario.load.rate is not None:
        problems.append(
            Problem(
                ("load", "rate"),
                "a capacity search sets each probe's rate itself (search.low to search.high, "
                "msgs/s in total over all sender workers): leave out load.rate",
            )
        )
    sweep = scenario.sweep
    if sweep.varies():
        problems.append(
            Problem(
                ("sweep",),
                "a capacity search runs one point at the rates it chooses: leave out [sweep] "
                "(search one configuration per scenario file)",
            )
        )
    if scenario.faults:
        problems.append(
            Problem(
                ("faults",),
                "a capacity search runs without faults: leave out [[faults]]",
            )
        )
    if scenario.repeat > 1:
        problems.append(
            Problem(
                ("repeat",),
                "repeat is not available with [search]: each probe runs once (leave out "
                "repeat, or repeat the whole search)",
            )
        )
    workers = scenario.load.threads * scenario.load.sender_nodes
    for key in ("low", "high"):
        total = getattr(search, key)
        per_worker = total / workers
        if not MIN_RATE <= per_worker <= MAX_RATE:
            problems.append(
                Problem(
                    ("search", key),
                    f"{total:g} msgs/s over {workers} sender worker(s) (load.threads × "
                    f"load.sender_nodes) is {per_worker:g} per worker; a worker's rate is "
                    f"{MIN_RATE:g} to {MAX_RATE:g} msgs/s",
                )
            )
    return problems


def drain_problems(scenario: Scenario) -> list[Problem]:
    """With faults declared: receivers that would stop before a received but unacknowledged
    message comes back (its visibility timeout). A fault that cuts a receiver's connection
    between the broker's hiding a message and the reply leaves such a message hidden; a
    receiver that stopped sooner would count it lost although it is still queued."""
    system = registry.get(scenario.broker.system)
    if not scenario.faults or system.redelivery_after is None:
        return []
    found: dict[Problem, None] = {}
    for combo in scenario.sweep.combinations():
        idle = scenario.point_load(combo.load).idle_timeout
        delay = system.redelivery_after(scenario.broker_params(combo.params))
        if idle <= delay:
            message = (
                f"with faults, idle_timeout ({idle:g} s) must be longer than the time {system.title} takes "
                f"to deliver an unacknowledged message again ({delay:g} s, "
                "broker.params.visibility_timeout): receivers would stop before it comes back "
                "and count it lost; raise idle_timeout or lower visibility_timeout"
            )
            found[Problem(("load", "idle_timeout"), message)] = None
    return list(found)


def fault_problems(scenario: Scenario) -> list[Problem]:
    """What the faults ask that this deployment, system and topology cannot do, and faults
    outside the load duration or overlapping each other."""
    faults = scenario.faults
    if not faults:
        return []
    section = scenario.broker
    system = registry.get(section.system)
    first: Loc = ("faults", 0, "action")
    on_aws = section.deployment == "endpoints" and section.aws_topology is not None
    if section.deployment != "local" and not on_aws:
        return [
            Problem(
                first,
                "faults need deployment = 'local' or an AWS stack's brokers: brokerbench acts "
                "only on broker nodes it started itself",
            )
        ]
    if on_aws:
        assert section.aws_topology is not None
        found = aws_fault_support(scenario, section.aws_topology)
        if isinstance(found, Problem):
            return [found]
        support, topology = found, "of the stack"
    else:
        assert system.local is not None  # checked with the broker section
        local_support = system.local.fault_support(section.topology)
        if local_support is None:
            return [Problem(first, f"faults are not supported for {system.title} yet")]
        support, topology = local_support, repr(section.topology)
    if support.nodes < 2:
        return [
            Problem(
                ("faults", 0, "node"),
                f"topology {topology} has one node: a fault would take the whole "
                "broker down; use a topology with several nodes",
            )
        ]
    problems: list[Problem] = []
    duration = scenario.load.duration
    for i, fault in enumerate(faults):
        at: Loc = ("faults", i)
        ends = fault.until if fault.until is not None else duration
        if fault.action == "isolate" and not support.isolates:
            problems.append(Problem((*at, "action"), isolate_unavailable(system.title)))
        if isinstance(fault.node, int) and fault.node >= support.nodes:
            problems.append(
                Problem(
                    (*at, "node"),
                    f"node {fault.node} does not exist: topology {topology} has "
                    f"{support.nodes} nodes (0 to {support.nodes - 1})",
                )
            )
        if fault.at >= duration:
            problems.append(
                Problem(
                    (*at, "at"),
                    f"at ({fault.at:g} s) must lie within load.duration ({duration:g} s)",
                )
            )
        if fault.until is not None and fault.until > duration:
            problems.append(
                Problem(
                    (*at, "until"),
                    f"until ({fault.until:g} s) must not be after load.duration ({duration:g} s)",
                )
            )
        if fault.until is not None and fault.action in ("kill", "stop") and not support.restarts:
            problems.append(
                Problem(
                    (*at, "until"),
                    f"{system.title} nodes cannot be restarted here: a {fault.action} lasts "
                    "until the point ends (leave out until)",
                )
            )
        if fault.node == "leader" and not support.fails_over:
            # Workers keep failing while nothing leads, and give up after failure_timeout.
            limit = scenario.load.failure_timeout
            if fault.until is None or fault.until - fault.at >= limit:
                problems.append(
                    Problem(
                        (*at, "until" if fault.until is not None else "node"),
                        f"{system.title} does not fail over here, so nothing leads while "
                        f"{support.leader} is down, and workers give up after "
                        f"load.failure_timeout ({limit:g} s) of failing: give an until less "
                        "than that after at",
                    )
                )
        for j, later in enumerate(faults[i + 1 :], start=i + 1):
            if fault.at <= later.at < ends or later.at <= fault.at < (
                later.until if later.until is not None else duration
            ):
                problems.append(
                    Problem(
                        ("faults", j, "at"),
                        f"fault {j} ({later.describe()}) overlaps fault {i} "
                        f"({fault.describe()}): faults happen one at a time",
                    )
                )
    return sorted(problems, key=lambda problem: problem.loc[:2])


def aws_fault_support(scenario: Scenario, roles: dict[str, int]) -> FaultSupport | Problem:
    """What faults an AWS stack of ``roles`` takes (from the system's cloud recipe), or the
    one problem that rules them out: no systemd unit declared, or ``"leader"`` and
    ``"follower"`` where a client machine cannot tell which node leads."""
    system = registry.get(scenario.broker.system)
    recipe = system.cloud
    faults = recipe.faults_for(roles) if recipe is not None else None
    if recipe is None or faults is None:
        return Problem(
            ("faults", 0, "action"),
            f"faults on AWS are not supported for {system.title} yet (its cloud recipe names "
            "no systemd unit of the broker for the fault agent)",
        )
    for i, fault in enumerate(scenario.faults):
        if fault.node in FAULT_ROLES and not recipe.finds_leader:
            return Problem(
                ("faults", i, "node"),
                f'on AWS a {system.title} fault names a node index, not "{fault.node}": '
                "a client machine cannot tell which node leads",
            )
    nodes = sum(roles.get(role, 0) for role in faults.roles)
    leader = f"node {faults.leader}" if faults.leader is not None else "the leader"
    return FaultSupport(
        nodes=nodes,
        leader=leader,
        follower="another node",
        fails_over=faults.fails_over,
        isolates=True,  # a firewall rule on the broker machine (workload/aws/fault_agent.py)
    )
