"""What set the pace of a sweep point: one rule over its resource telemetry.

The analysis (``summary.csv``'s ``limited_by``), the live view's closing line, the report,
``compare``, the knee and the capacity search all take the verdict from :func:`verdict`,
whose rules :data:`RULES` states for the report. Its input, :class:`Usage`, is what the
telemetry of a point's measurement period says of its nodes (:func:`usage` builds it from
per-node means); the figures are in % of one core, as ``top`` shows them (150 % = one and
a half cores busy).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

#: A resource is saturated at this share of what it can give.
SATURATED = 0.90
#: Open-loop senders that reach less than this share of their target rate were held back.
TARGET_RATIO = 0.95
#: On a shared machine, broker nodes that together used at least this share of it (most of
#: it) while the clients used less than they did set the pace (they needed more cores).
BROKER_SHARE = 0.6
#: Processes outside the run that used more than this share of the machine disturbed it.
DISTURBED_SHARE = 0.10

CLIENT_CPU = "client CPU"
BROKER_CPU = "broker CPU"
BACK_PRESSURE = "broker back-pressure"
BROKER_DISK = "broker disk"
NETWORK = "network"
SHARED_HOST = "shared host"
NONE = "none saturated"
UNKNOWN = "unknown"

RULES = (
    "What set the pace of a point is judged from the resource telemetry of its measurement "
    f"period (means over the period), a resource counting as saturated at {SATURATED:.0%} of "
    f"what it can give. The rules, tried in order: <b>{BROKER_CPU}</b> — the busiest broker "
    f"node used ≥ {SATURATED:.0%} of its cores, or one thread of a broker node ≥ "
    f"{SATURATED:.0%} of a core (a part of the broker that runs on one thread, as Redis "
    f"executes every command on one, goes no faster); <b>{BROKER_DISK}</b> — the broker's data "
    f"device was busy ≥ {SATURATED:.0%} of the time; <b>{NETWORK}</b> — a node's interface "
    f"carried ≥ {SATURATED:.0%} of its known capacity; <b>{CLIENT_CPU}</b> — a client node "
    f"used ≥ {SATURATED:.0%} of the cores its processes can use, or one client process ≥ "
    f"{SATURATED:.0%} of a core (a Python process runs on about one core), or open-loop "
    f"senders reached less than {TARGET_RATIO:.0%} of their target rate while a client node "
    f"was busy; <b>{BACK_PRESSURE}</b> — open-loop senders fell short of their target with "
    "no client busy: they waited on the broker; where broker and clients share one machine "
    f"(a local run) and it was ≥ {SATURATED:.0%} busy: <b>{BROKER_CPU} (shared host)</b> if "
    f"the broker nodes together used ≥ {BROKER_SHARE:.0%} of the machine and more than the "
    f"clients (the broker needs more cores), else <b>{SHARED_HOST}</b>; else <b>{NONE}</b> "
    "(with one batch in flight per worker the round trip sets the pace). On a shared machine "
    "every reason splits its use three ways — the broker nodes summed, the clients summed, "
    "everything else — and a point where everything else took more than "
    f"{DISTURBED_SHARE:.0%} of the machine is <b>disturbed</b>: its figures are not the "
    "benchmark's alone. With <code>[broker] cpus = N</code> (a local run pinned: the broker "
    "on N cores, the clients on the rest) each side is judged against its own cores: "
    f"<b>{BROKER_CPU}</b> when the broker nodes together used ≥ {SATURATED:.0%} of N, "
    f"<b>{CLIENT_CPU}</b> when the clients together used ≥ {SATURATED:.0%} of the rest, and "
    "the shared machine's rule does not apply. A point without telemetry is <b>unknown</b>."
)


@dataclass(frozen=True)
class NodeUsage:
    """One node's means (and peaks) over a point's measurement period."""

    role: str
    node: str
    cores: float
    processes: float
    cpu_pct: float
    cpu_max_pct: float = 0.0
    process_max_pct: float = 0.0
    #: A broker node's busiest thread, % of one core (None where not read).
    thread_max_pct: float | None = None
    rss_bytes: float = 0.0
    device_write_bytes_s: float | None = None
    device_write_ops_s: float | None = None
    device_busy_pct: float | None = None
    device_flushes_s: float | None = None
    net_bytes_s: float | None = None
    gc_pause_ms_s: float | None = None
    #: The machine's CPU the hypervisor took for other guests (the host's row; else None).
    steal_pct: float | None = None
    #: Link capacity in bytes/s where known (never for loopback).
    link_bytes_s: float | None = None

    @classmethod
    def of_row(cls, r: Mapping[str, Any]) -> NodeUsage:
        """A node's usage from its means over the period (a row of
        :func:`workload.engine.telemetry.node_means`, or of the Spark job's)."""
        net_in, net_out = r.get("net_in_bytes_s"), r.get("net_out_bytes_s")
        net = None if net_in is None and net_out is None else (net_in or 0.0) + (net_out or 0.0)
        if r["role"] == "host" and net_in is not None:
            net = net_in  # the machine's loopback counts every byte in both directions
        return cls(
            role=str(r["role"]),
            node=str(r["node"]),
            cores=float(r.get("cores") or 1.0),
            processes=float(r.get("processes") or 1.0),
            cpu_pct=float(r.get("cpu_pct") or 0.0),
            cpu_max_pct=float(r.get("cpu_max_pct") or 0.0),
            process_max_pct=float(r.get("cpu_process_max_pct") or 0.0),
            thread_max_pct=r.get("cpu_thread_max_pct"),
            rss_bytes=float(r.get("rss_bytes") or 0.0),
            device_write_bytes_s=r.get("device_write_bytes_s"),
            device_write_ops_s=r.get("device_write_ops_s"),
            device_busy_pct=r.get("device_busy_pct"),
            device_flushes_s=r.get("device_flushes_s"),
            net_bytes_s=net,
            gc_pause_ms_s=r.get("gc_pause_ms_s"),
            steal_pct=r.get("cpu_steal_pct"),
        )

    @property
    def usable_cores(self) -> float:
        """The cores the node's processes can use: a client process about one (Python),
        a broker node the machine's."""
        if self.role in ("sender", "receiver"):
            return max(1.0, min(self.processes, self.cores))
        return self.cores


@dataclass(frozen=True)
class Usage:
    """What a point's telemetry says of its nodes, for :func:`verdict`."""

    nodes: tuple[NodeUsage, ...]
    #: Broker and clients share one machine (a local run).
    shared_host: bool = True
    #: Open loop: the share of the target rate the senders reached (None: closed loop).
    target_ratio: float | None = None
    #: Batches a sender worker may keep in flight.
    max_in_flight: int = 1
    #: The senders were sending (a phase after they stopped: a drain, what they left).
    sending: bool = True
    #: ``[broker] cpus``: the cores the broker's processes and the clients' were pinned to
    #: (None: they shared every core).
    pinned: tuple[int, int] | None = None

    def of(self, *roles: str) -> list[NodeUsage]:
        return [n for n in self.nodes if n.role in roles]

    def busiest(self, *roles: str) -> NodeUsage | None:
        return max(self.of(*roles), key=lambda n: n.cpu_pct / n.usable_cores, default=None)


def point_usage(
    nodes: Iterable[NodeUsage],
    *,
    rate: float | None,
    workers: int,
    max_in_flight: int | None,
    send_msgs_per_s: float | None,
    pinned: tuple[int, int] | None = None,
) -> Usage:
    """A point's :class:`Usage`: its nodes, whether they shared one machine (the sampler of
    a local run names its machine ``host``), in open loop (``rate`` per sender worker) the
    share of the target rate its ``workers`` reached, and the cores the broker and the
    clients were ``pinned`` to (``[broker] cpus``)."""
    nodes = tuple(nodes)
    target = (rate or 0.0) * workers
    ratio = (send_msgs_per_s or 0.0) / target if target else None
    shared = any(n.role == "host" and n.node == "host" for n in nodes)
    in_flight = max_in_flight or 1
    return Usage(nodes, shared, ratio, in_flight, pinned=pinned if shared else None)


def pinned_cores(recorded: object) -> tuple[int, int] | None:
    """The cores of the broker and of the clients as the run context records them (the
    broker's ``cpus``: ``{"broker": [...], "clients": [...]}``), None where not pinned."""
    if not isinstance(recorded, dict):
        return None
    broker, clients = recorded.get("broker"), recorded.get("clients")
    if not isinstance(broker, list) or not isinstance(clients, list) or not broker or not clients:
        return None
    return len(broker), len(clients)


@dataclass(frozen=True)
class Split:
    """A shared machine's CPU three ways, in % of one core: the broker nodes summed, the
    client nodes summed, and everything else (other processes: the machine's use less the
    run's), of ``machine`` (100 % per core)."""

    broker: float
    clients: float
    others: float
    machine: float
    brokers: int
    #: The whole machine's use (what its own sampler saw).
    busy: float
    #: Of ``others``: what the hypervisor took for other guests (steal).
    steal: float = 0.0

    @classmethod
    def of(cls, usage: Usage, host: NodeUsage) -> Split:
        broker = sum(n.cpu_pct for n in usage.of("broker"))
        clients = sum(n.cpu_pct for n in usage.of("sender", "receiver"))
        others = max(0.0, host.cpu_pct - broker - clients)
        return cls(
            broker,
            clients,
            others,
            100 * host.cores,
            len(usage.of("broker")),
            host.cpu_pct,
            min(others, host.steal_pct or 0.0),
        )

    @property
    def disturbed(self) -> bool:
        return self.others > DISTURBED_SHARE * self.machine

    def words(self) -> str:
        nodes = "the broker node" if self.brokers == 1 else f"the {self.brokers} broker nodes"
        text = (
            f"{nodes} used {_pct(self.broker)} of {_pct(self.machine)}, the clients "
            f"{_pct(self.clients)}, others {_pct(self.others)}"
            + (f" (steal {_pct(self.steal)})" if self.steal >= 0.5 else "")
        )
        return text + (" (disturbed: others took over a tenth)" if self.disturbed else "")


@dataclass(frozen=True)
class Verdict:
    limit: str
    reason: str
    #: Processes outside the run took more than :data:`DISTURBED_SHARE` of the machine.
    disturbed: bool = False

    def label(self) -> str:
        """How a knee or a capacity bracket caused by this is labelled."""
        if self.limit == CLIENT_CPU:
            return "client-bound: add sender nodes or batches in flight"
        if self.limit == SHARED_HOST:
            return "host-bound: broker and clients share this machine; run them apart"
        if self.limit == BACK_PRESSURE:
            return "broker-bound: the senders waited on the broker"
        return ""


def _pct(value: float) -> str:
    return f"{value:.0f} %"


def _cores(n: int) -> str:
    return "1 core" if n == 1 else f"{n} cores"


def verdict(usage: Usage) -> Verdict:
    """Which resource set the pace (see :data:`RULES`); on a shared machine, whether others
    disturbed the point."""
    if not usage.nodes:
        return Verdict(UNKNOWN, "no telemetry was recorded")
    host = next(iter(usage.of("host")), None)
    split = Split.of(usage, host) if usage.shared_host and host is not None else None
    found = _judge(usage, split)
    return found if split is None else Verdict(found.limit, found.reason, split.disturbed)


def _judge(usage: Usage, split: Split | None) -> Verdict:
    """The rules, in order (:data:`RULES`)."""
    broker = usage.busiest("broker")
    if usage.pinned is not None:
        own = sum(n.cpu_pct for n in usage.of("broker"))
        if own >= SATURATED * 100 * usage.pinned[0]:
            return Verdict(
                BROKER_CPU,
                f"the broker nodes used {_pct(own)} of a core, of the {_cores(usage.pinned[0])} "
                "pinned to them",
            )
    elif broker is not None and broker.cpu_pct >= SATURATED * 100 * broker.usable_cores:
        return Verdict(
            BROKER_CPU,
            f"broker node {broker.node} used {_pct(broker.cpu_pct)} of a core, of "
            f"{broker.usable_cores:g} cores",
        )
    hot = max(usage.of("broker"), key=lambda n: n.thread_max_pct or 0.0, default=None)
    if hot is not None and (hot.thread_max_pct or 0.0) >= SATURATED * 100:
        return Verdict(
            BROKER_CPU,
            f"a thread of broker node {hot.node} used {_pct(hot.thread_max_pct or 0.0)} of a "
            f"core (the node used {_pct(hot.cpu_pct)}, of {hot.usable_cores:g} cores)",
        )
    disks = [n for n in usage.of("broker", "host") if n.device_busy_pct is not None]
    disk = max(disks, key=lambda n: n.device_busy_pct or 0.0, default=None)
    if disk is not None and (disk.device_busy_pct or 0.0) >= SATURATED * 100:
        return Verdict(
            BROKER_DISK, f"the data device was busy {_pct(disk.device_busy_pct or 0.0)} of the time"
        )
    for node in usage.nodes:
        if node.link_bytes_s and (node.net_bytes_s or 0.0) >= SATURATED * node.link_bytes_s:
            share = (node.net_bytes_s or 0.0) / node.link_bytes_s
            return Verdict(NETWORK, f"{node.node} carried {share:.0%} of its link")
    return _shared_or_client(usage, split)


def _shared_or_client(usage: Usage, split: Split | None) -> Verdict:
    """The rules after the broker's own resources: the clients, the senders' back-pressure,
    the shared machine (three ways), or none."""
    host_busy = None if split is None else 100 * split.busy / split.machine
    tail = "" if split is None else f"; {split.words()}"
    client = _client_limit(usage)
    if client:
        return Verdict(CLIENT_CPU, client + tail)
    if usage.target_ratio is not None and usage.target_ratio < TARGET_RATIO:
        return Verdict(
            BACK_PRESSURE,
            f"senders reached only {usage.target_ratio:.0%} of the target rate with no client "
            f"busy: they waited on the broker{tail}",
        )
    shared = usage.pinned is None  # pinned, each side was judged against its own cores
    if shared and split is not None and host_busy is not None and host_busy >= SATURATED * 100:
        if split.broker >= BROKER_SHARE * split.machine and split.broker > split.clients:
            return Verdict(
                BROKER_CPU,
                f"(shared host) the machine was {_pct(host_busy)} busy: {split.words()}; "
                "the broker needs more cores",
            )
        return Verdict(SHARED_HOST, f"the machine was {_pct(host_busy)} busy: {split.words()}")
    hint = (
        ": one batch in flight per worker, the round trip sets the pace"
        if usage.max_in_flight <= 1 and usage.target_ratio is None and usage.sending
        else ""
    )
    return Verdict(NONE, f"no resource reached {SATURATED:.0%}{hint}{tail}")


def _client_limit(usage: Usage) -> str:
    """Why the clients set the pace ("" when they did not): a client node or process was
    saturated (in open loop, short of the target too)."""
    short = usage.target_ratio is not None and usage.target_ratio < TARGET_RATIO
    prefix = f"senders reached only {usage.target_ratio:.0%} of the target rate: " if short else ""
    if usage.pinned is not None:
        own = sum(n.cpu_pct for n in usage.of("sender", "receiver"))
        if own >= SATURATED * 100 * usage.pinned[1]:
            return (
                f"{prefix}the clients used {_pct(own)} of a core, of the "
                f"{_cores(usage.pinned[1])} pinned to them"
            )
    for node in sorted(usage.of("sender", "receiver"), key=lambda n: -n.cpu_pct):
        if node.cpu_pct >= SATURATED * 100 * node.usable_cores:
            return (
                f"{prefix}{node.node} used {_pct(node.cpu_pct)} of a core, of the "
                f"{node.usable_cores:g} its processes can use"
            )
        if node.process_max_pct >= SATURATED * 100:
            return (
                f"{prefix}a process of {node.node} used {_pct(node.process_max_pct)} of one "
                "core (a Python process runs on about one)"
            )
    return ""


def mean(values: Iterable[float | None]) -> float | None:
    """The mean of the values that are known (None without any)."""
    known = [v for v in values if v is not None]
    return sum(known) / len(known) if known else None
