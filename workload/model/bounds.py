"""The bounds of every scenario key: the limits, durations, typed fields and endpoints the
sections (:mod:`workload.model.sections`) are built from.

Limits (``brokerbench schema`` shows the per-key ones too):

- the file: a regular file (not a pipe, device or directory) of at most 1 MiB, UTF-8;
  its tables and arrays nested at most 16 deep (the shipped scenarios need 4), none with
  more than 10,000 entries and at most 100,000 values in all — checked on the parsed data
  before anything walks it recursively (:func:`~workload.model.shape.shape_problem`);
- ``name``: at most 64 characters, letters and digits with single ``.``, ``-`` or ``_``
  between them (it becomes part of run ids, file names and S3 keys); ``description``: at
  most 2,000;
- ``broker.options``: only with ``deployment = "endpoints"`` (a broker started here takes
  none);
- ``broker.endpoints``: at most 100, each ``host:port``; the host is a DNS name, an IPv4
  address or an IPv6 address in brackets (``[::1]:9092``), the port 1–65535 in ASCII digits;
- ``load.threads``, ``sender_threads`` and ``receiver_threads``: at most 10,000 workers per
  node; ``sender_nodes``: at most 1,000;
  ``receiver_nodes``: at most 2,000 (so the default, twice the sender nodes, always fits);
- ``message_size``: from the 72-byte header to 16 MiB — every size a distribution may draw
  too (:mod:`workload.model.sizes`: at most 100 weighted sizes, weights up to 10⁹, a
  log-normal p99 above the mean and at most 14.97 × it); ``min_send_batch``,
  ``max_send_batch`` and ``receive_batch``: at most 100,000 (the smallest send batch at
  most the largest); ``pool_size``: at most 1,000,000 payloads, and the
  pool (pool_size × the largest message size) at most 1 GiB per process;
- ``messages``: at most 10¹² per worker; ``rate``: 0.001 to 10⁸ msgs/s per worker;
  ``max_in_flight``: at most 1,000; ``processes``: at most 1,024;
- every duration finite and at most 7 days; the warm-up shorter than ``load.duration``;
  ``measurement.window`` and ``measurement.step`` whole seconds, at least 1 s (records are
  per second), the step ≤ the window; a window given in the file at most
  ``load.duration`` (the default 60 s may exceed a short run, measured as one window);
  ``load.failure_timeout`` at least 1 s; ``search.slo_p99`` at least 1 µs (the
  histograms' resolution); ``backlog.drain_limit`` at least 100 ms (the coordinator
  looks at the drain every 0.25 s); ``measurement.telemetry_interval`` at least 1 s (the
  analysis reads a telemetry row as a second);
- a swept list without repeated values, and ``[[sweep.points]]`` without the same point
  twice (``repeat`` runs points more than once) (:func:`~workload.model.checks.sweep_problems`);
- a sweep of at most 10,000 points (the product of the list lengths, computed before
  anything is expanded), repeats included: ``repeat`` (1–100) times the points is at most
  10,000 too; ``brokerbench run`` and ``validate`` refuse more than 1,000 of them without
  ``--yes``, unless ``[sweep] max_points`` allows them (it refuses a sweep larger than
  itself) (:func:`~workload.model.host_limits.length_problems`);
- a local run (``brokerbench run``, ``validate``): at most 4,096 workers at once at any
  point (sender threads × sender nodes + receiver threads × receiver nodes), unless
  ``--max-workers N`` allows more (:func:`~workload.model.host_limits.host_problems`);
- ``[search]`` (a capacity search, :class:`~workload.model.sections.SearchSection`): rates of 0.001 to 10⁸ msgs/s in
  total, ``low`` below ``high``, each at least 0.001 msgs/s per sender worker; ``precision``
  0.001–1; ``max_probes`` 2–50; open loop and one point only: no ``load.rate``, no
  ``[sweep]``, no ``[[faults]]``, no ``repeat`` (:func:`~workload.model.checks.search_problems`);
- at most 100 ``[[faults]]``, one at a time, each within ``load.duration``, on a local
  multi-node topology of a system whose local deployment takes faults, or on an AWS
  stack's brokers (``aws_topology``, with several nodes) whose cloud recipe names the
  broker's systemd unit (:func:`~workload.model.checks.fault_problems`).
"""

from __future__ import annotations

import ipaddress
import math
import re
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field

#: The longest message header (:mod:`workload.engine.message`); scenarios may not ask for smaller
#: messages.
HEADER_MAX = 72
MIB = 1024 * 1024
GIB = 1024 * MIB
MAX_FILE_BYTES = MIB
#: How deep tables and arrays of a scenario may nest (the top-level table is level 1;
#: ``[[sweep.points]]`` with ``params`` is level 5, the shipped scenarios need 4).
MAX_NESTING = 16
#: The most entries one table or array of a scenario may hold (a sweep has at most
#: :data:`MAX_SWEEP_POINTS` points, so no list of it needs more).
MAX_ENTRIES = 10_000
#: The most values (tables, arrays and scalars) a scenario file may hold in all.
MAX_VALUES = 100_000
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
#: Message keys (``[load] keys``): each fits 20 bits of the receiver's order check.
MAX_KEYS = 1_000_000
#: The largest Zipf exponent of ``[load] key_zipf`` (beyond it, one key takes nearly all).
MAX_KEY_ZIPF = 10.0
MAX_SECONDS = 7 * 24 * 3600.0
MAX_SWEEP_POINTS = 10_000
#: The most runs (sweep points × repeat) ``brokerbench run`` starts without being asked
#: (``--yes``) or told (``[sweep] max_points``): a sweep's product grows faster than one
#: expects (a day or more of running).
MAX_UNASKED_POINTS = 1_000
#: The most workers (sender and receiver threads over every node) a point of a local run
#: runs at once on this host unless ``--max-workers`` says more: every worker is a thread
#: with its own broker connection, and every node one or more processes.
MAX_LOCAL_WORKERS = 4_096
MAX_REPEAT = 100
MIN_PROBES = 2
MAX_PROBES = 50
MIN_PRECISION = 0.001
MAX_FAULTS = 100
MAX_FAULT_NODE = 1_000
#: A worker gives up after failing this long at the least (seconds).
MIN_FAILURE_TIMEOUT = 1.0
#: The shortest ``[backlog] drain_limit`` (seconds): the coordinator looks at the drain four
#: times a second, so a shorter limit would end it later than it says.
MIN_DRAIN_LIMIT = 0.1
#: The shortest ``[measurement] telemetry_interval`` (seconds): the analysis reads one
#: telemetry row as one second (its mean, its busiest second, its count of seconds).
MIN_TELEMETRY_INTERVAL = 1.0
#: The histograms' resolution (seconds): no latency SLO below it can be judged.
MIN_LATENCY = 1e-6
#: A scenario's name: letters and digits, single separators between them.
NAME_PATTERN = r"^[A-Za-z0-9]+(?:[._-][A-Za-z0-9]+)*$"

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


def _whole_seconds(seconds: float) -> float:
    if seconds < 1 or abs(seconds - round(seconds)) > 1e-9:
        raise ValueError(
            f"{seconds:g} s: must be whole seconds, at least 1 s (records are per second)"
        )
    return float(round(seconds))


#: A window or a step of the analysis: whole seconds, at least 1.
WholeSeconds = Annotated[
    float,
    BeforeValidator(parse_duration),
    Field(gt=0, le=MAX_SECONDS, allow_inf_nan=False, json_schema_extra={"minimum": 1}),
    AfterValidator(_whole_seconds),
]


def at_least(minimum: float, shown: str, why: str) -> Any:
    """A check that a duration is at least ``minimum`` seconds (``shown`` in messages)."""

    def check(seconds: float) -> float:
        if seconds < minimum:
            raise ValueError(f"{seconds:g} s is below the minimum of {shown}: {why}")
        return seconds

    return AfterValidator(check)


def _safe_name(value: str) -> str:
    if not re.fullmatch(NAME_PATTERN, value):
        raise ValueError(
            f"{value!r}: a name is letters and digits, with single '.', '-' or '_' between "
            "them (it becomes part of run ids, file names and S3 keys)"
        )
    return value


#: A scenario's name (part of run ids, file names and S3 keys).
Name = Annotated[
    str,
    Field(max_length=MAX_NAME, json_schema_extra={"pattern": NAME_PATTERN}),
    AfterValidator(_safe_name),
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
    """A part of a scenario file: unknown keys rejected, no value coerced, frozen once read."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)
