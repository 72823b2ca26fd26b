"""The sections of a scenario file: ``[broker]``, ``[load]``, ``[measurement]`` and
``[search]``, each a strict model that checks its own keys (the bounds are
:mod:`workload.model.bounds`'); ``[sweep]`` is :mod:`workload.model.sweep`'s, ``[[faults]]``
:mod:`workload.model.faults`'."""

from __future__ import annotations

import os
from typing import Annotated, Any, Literal

from pydantic import BeforeValidator, Field, field_validator, model_validator

from brokers import registry
from brokers.base import Endpoints
from workload.model.bounds import (
    GIB,
    MAX_ENDPOINTS,
    MAX_FAULT_NODE,
    MAX_IN_FLIGHT,
    MAX_KEY_ZIPF,
    MAX_KEYS,
    MAX_MESSAGES,
    MAX_OPTION_VALUE,
    MAX_OPTIONS,
    MAX_POOL_BYTES,
    MAX_POOL_SIZE,
    MAX_PROBES,
    MAX_PROCESSES,
    MAX_RATE,
    MIN_FAILURE_TIMEOUT,
    MIN_LATENCY,
    MIN_PRECISION,
    MIN_PROBES,
    MIN_RATE,
    MIN_TELEMETRY_INTERVAL,
    BatchSize,
    Duration,
    Endpoint,
    PositiveDuration,
    ReceiverNodes,
    SenderNodes,
    Strict,
    Threads,
    WholeSeconds,
    Word,
    at_least,
)
from workload.model.errors import conflict
from workload.model.sizes import SizeDistribution, size_schema

#: Environment variable that supplies the broker's password with deployment = 'endpoints'.
PASSWORD_ENV = "BROKERBENCH_BROKER_PASSWORD"


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
    cpus: int | None = Field(
        None,
        ge=1,
        le=MAX_PROCESSES,
        description="With deployment = 'local': pin the broker's processes to this many cores "
        "of this machine and the client nodes to the rest (fewer than its cores; "
        "docs/verdict.md); unset: they share every core.",
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
        if self.deployment == "local" and self.options:
            raise conflict(
                ("options",),
                "options are connection extras for deployment = 'endpoints': a broker "
                "started here takes none; leave them out",
            )
        if self.deployment == "endpoints" and self.cpus is not None:
            raise conflict(
                ("cpus",),
                "cpus pins a broker started here to its cores: with deployment = 'endpoints' "
                "the broker runs elsewhere; leave it out",
            )
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
    message_size: Annotated[SizeDistribution, BeforeValidator(SizeDistribution.of)] = Field(
        100,
        validate_default=True,
        description="Bytes of every message, or a table: how message sizes are distributed "
        '(kind = "fixed", "uniform", "weighted" or "lognormal"; see docs/scenarios.md).',
        json_schema_extra=size_schema,
    )
    max_send_batch: BatchSize = Field(
        10, description="Send batch size is uniform in [min_send_batch, this]."
    )
    min_send_batch: BatchSize = Field(
        1,
        description="The smallest send batch (default 1); equal to max_send_batch, every batch "
        "has that size, as a pipelining load tool sends (redis-benchmark -P).",
    )
    receive_batch: BatchSize | None = Field(
        None,
        description="max_n of each receive call; default the system's own: 500 for Kafka, "
        "Redpanda and Redis Streams, 10 for the others (SQS's limit, mqperf's setting).",
    )
    pool_size: int = Field(
        10_000,
        gt=0,
        le=MAX_POOL_SIZE,
        description="Random payloads generated at start-up, in every client process; "
        "pool_size × the largest message size is at most 1 GiB.",
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
        60.0,
        description="A receiver stops when nothing arrived for this long since the later of its "
        "last message and the senders' end (where it is told of it: locally); at a point without "
        "faults or errors, 2 s after every confirmed message was received (by identity).",
    )
    failure_timeout: Annotated[
        PositiveDuration,
        at_least(MIN_FAILURE_TIMEOUT, "1 s", "a worker would give up at its first failed call"),
    ] = Field(
        20.0,
        description="A worker gives up after failing continuously for this long; at least 1 s.",
        json_schema_extra={"minimum": MIN_FAILURE_TIMEOUT},
    )
    # Message keys and the order check (docs/measurement.md §2, §5).
    keys: int | None = Field(
        None,
        ge=1,
        le=MAX_KEYS,
        description="Every message carries one of this many keys, sent as the system's key "
        "(Kafka record key, NATS subject suffix, …; see `brokerbench brokers`), and the "
        "analysis counts per-key order violations (`reordered`) where the system promises "
        "per-key order; unset = keyless.",
    )
    key_zipf: float | None = Field(
        None,
        gt=0,
        le=MAX_KEY_ZIPF,
        allow_inf_nan=False,
        description="Keys Zipf-distributed with this exponent (key k has weight "
        "1/(k+1)^s; key 0 the most frequent); unset = uniform. Needs `keys`.",
    )

    # Producers and consumers counted separately: workers per node of each role.
    sender_threads: Threads | None = Field(
        None, description="Sender workers per sender node; default `threads`."
    )
    receiver_threads: Threads | None = Field(
        None, description="Receiver workers per receiver node; default `threads`."
    )

    def threads_of(self, role: str) -> int:
        """Workers per node of ``role`` ("sender" or "receiver"): its own count, else
        ``threads``."""
        own = self.sender_threads if role == "sender" else self.receiver_threads
        return own or self.threads

    @property
    def sender_workers(self) -> int:
        """Sender workers over every sender node (sender threads × ``sender_nodes``)."""
        return self.threads_of("sender") * self.sender_nodes

    @property
    def receivers(self) -> int:
        """Receiver nodes: as given, else twice the sender nodes."""
        return self.receiver_nodes or 2 * self.sender_nodes

    @model_validator(mode="after")
    def _batch_range(self) -> LoadSection:
        if self.min_send_batch > self.max_send_batch:
            raise conflict(
                ("min_send_batch", "max_send_batch"),
                f"min_send_batch ({self.min_send_batch}) is larger than max_send_batch "
                f"({self.max_send_batch}): batch sizes are uniform between the two",
            )
        return self

    @model_validator(mode="after")
    def _zipf_has_keys(self) -> LoadSection:
        if self.key_zipf is not None and self.keys is None:
            raise conflict(
                ("key_zipf", "keys"),
                "key_zipf shapes the distribution of keys, but keys is not set: "
                "set keys = N (the number of keys) or remove key_zipf",
            )
        return self

    @model_validator(mode="after")
    def _pool_fits(self) -> LoadSection:
        largest = self.message_size.upper
        size = self.pool_size * largest
        if size > MAX_POOL_BYTES:
            what = "message_size" if self.message_size.fixed else "the largest message size"
            raise conflict(
                ("pool_size", "message_size"),
                f"the payload pool (pool_size × {what} = {self.pool_size} × "
                f"{largest} bytes = {size / GIB:.2f} GiB) exceeds the limit of 1 GiB "
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
    window: WholeSeconds = Field(
        60.0,
        description="Latency window length, whole seconds; when given, at most load.duration "
        "(a run shorter than the default 60 s is measured as one window of its own length).",
    )
    step: WholeSeconds = Field(
        10.0, description="Window slide step, whole seconds; at most the window."
    )
    telemetry_interval: Annotated[
        PositiveDuration,
        at_least(
            MIN_TELEMETRY_INTERVAL,
            "1 s",
            "the analysis reads each telemetry row as one second",
        ),
    ] = Field(
        1.0,
        le=60.0,
        description="How often every node's resources (CPU, memory, disk, network, GC) are "
        "sampled; 1 s to 60 s.",
        json_schema_extra={"minimum": MIN_TELEMETRY_INTERVAL},
    )
    flush_interval: WholeSeconds = Field(
        60.0,
        le=3600.0,
        description="How often every client node process writes what its workers recorded "
        "(and the run its telemetry) and drops it from memory, so that a run killed midway "
        "keeps all but its last seconds; whole seconds, 1 s to 1 h.",
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


class SearchSection(Strict):
    """A capacity search (``[search]``): the highest open-loop rate the broker holds within
    a processing-latency SLO, by bisection between ``low`` and ``high``
    (:mod:`workload.engine.search`). Rates are msgs/s in total, over every sender worker."""

    slo_p99: Annotated[
        PositiveDuration,
        at_least(MIN_LATENCY, "1 µs", "the latency histograms resolve nothing finer"),
    ] = Field(
        description="The SLO: whole-run processing-latency p99 (after the warm-up) a rate "
        'must hold, e.g. "50ms" or 0.05; at least 1 µs.',
        json_schema_extra={"minimum": MIN_LATENCY},
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
