"""The contract between the workload runner and one broker system (docs/measurement.md §2).

A broker folder under ``brokers/`` exports one :class:`BrokerSystem` named ``SYSTEM``. It
bundles everything the rest of brokerbench may know about that system:

* a typed parameter model (``[broker.params]`` of a scenario, unknown keys rejected),
* a client adapter per worker, used in one of two roles: a :class:`Sender` (``send``,
  and ``submit`` where batches may be in flight) or a :class:`Receiver` (``receive`` /
  ``ack``, with receipts of the adapter's own type), on the batches of :mod:`brokers.batches`;
  blocking (:class:`Adapter`, workers run in threads) or asyncio (:class:`AsyncAdapter`,
  workers run as tasks), as the adapter classes the system declares are,
* ``prepare`` (create the queue/topic/table a sweep point uses) and ``describe`` (version
  and replication settings read back from the servers, for the run context), and
  ``durability``, what those settings mean for a confirmed message,
* how to start it on this machine (:class:`LocalDeployment`), its reference topology on
  AWS (:class:`Topology`) and how AWS runs it (:class:`~brokers.cloud.CloudRecipe`, in
  :mod:`brokers.cloud`: broker machines, or a managed service the stack creates);
  start-up and recipe take its parameter model.
"""

from __future__ import annotations

import abc
import importlib.metadata
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, Generic

from brokers.batches import R, Received, ReceivedBatch
from brokers.connection import Destination, Endpoints, P, P_contra
from brokers.durability import Durability
from brokers.errors import BrokerError
from brokers.netns import NodeHosts

if TYPE_CHECKING:
    from brokers.cloud import CloudRecipe


@dataclass(frozen=True, slots=True)
class KeySupport:
    """How a system sends a message's key, and whether it promises per-key order: that a
    receiver gets one sender's messages of one key in the order they were sent, apart from
    messages delivered again (docs/measurement.md §5, reordered)."""

    #: What the key becomes, in the system's words ("record key", "subject suffix").
    sent_as: str
    #: Whether the order check applies (``reordered`` counts violations; else it is empty).
    ordered: bool

    def record(self) -> dict[str, Any]:
        """As the run context records it (``broker.keys``)."""
        return {"sent_as": self.sent_as, "ordered": self.ordered}


class Confirmation(abc.ABC):
    """A batch handed to the broker by :meth:`Adapter.submit`, not yet known to be confirmed."""

    @abc.abstractmethod
    def wait(self, timeout: float) -> int | None:
        """Wait at most ``timeout`` seconds for the broker's confirmation of the whole batch.

        Returns the wall-clock time (``time.time_ns()``) at which the confirmation arrived,
        ``None`` while it is still pending; raises when the batch failed.
        """


class Confirmed(Confirmation):
    """A batch whose confirmation is already in hand."""

    __slots__ = ("done_ns",)

    def __init__(self, done_ns: int) -> None:
        self.done_ns = done_ns

    def wait(self, timeout: float) -> int | None:
        return self.done_ns


class Sender(abc.ABC):
    """The sending role of a blocking client, for one worker (run in a thread).

    ``send`` is docs/measurement.md §2's synchronous call. Senders whose client can keep several batches
    awaiting confirmation set ``pipelined = True`` and override :meth:`submit`; the worker
    then keeps up to ``max_in_flight`` batches submitted (a message still counts as sent
    only once its batch is confirmed).
    """

    #: True when :meth:`submit` returns before the broker confirms (``max_in_flight`` > 1).
    pipelined: ClassVar[bool] = False

    @abc.abstractmethod
    def send(self, batch: Sequence[bytes]) -> None:
        """Return only when the broker accepted the whole batch with the configured guarantee."""

    def submit(self, batch: Sequence[bytes]) -> Confirmation:
        """Hand a batch to the broker; its confirmation is awaited through the result.

        The default sends synchronously (one batch in flight).
        """
        self.send(batch)
        return Confirmed(time.time_ns())

    def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections."""


class Receiver(abc.ABC, Generic[R]):
    """The receiving role of a blocking client, for one worker; ``R`` is its receipt."""

    @abc.abstractmethod
    def receive(self, max_n: int) -> list[Received[R]]:
        """Up to ``max_n`` messages; may wait briefly (≤ ~1 s) and return an empty list."""

    def receive_batch(self, max_n: int) -> ReceivedBatch[R]:
        """:meth:`receive` as columns (what the worker calls); a client that hands out many
        messages at once overrides it to build no object per message."""
        return ReceivedBatch.of(self.receive(max_n))

    @abc.abstractmethod
    def ack(self, receipts: Sequence[R]) -> None:
        """Confirm processing of the messages these receipts came with."""

    def joined(self) -> bool:
        """Whether this receiver takes its part of the destination: at once for most
        systems; a consumer-group member once the group gave it its first assignment
        (possibly empty), which its receive calls bring about. The senders of a local
        point wait for every receiver's (:mod:`workload.engine.start_gate`)."""
        return True

    def close(self) -> None:
        """Release connections."""


class Adapter(Sender, Receiver[R]):
    """A blocking client for one worker (one instance per worker thread), in either role:
    a worker uses it as a :class:`Sender` or as a :class:`Receiver`."""


class AsyncSender(abc.ABC):
    """The sending role of an asyncio client, for one worker (run as a task).

    With ``max_in_flight`` > 1 the worker awaits up to that many ``send`` calls at once, so
    ``send`` must allow concurrent calls on one client.
    """

    @abc.abstractmethod
    async def send(self, batch: Sequence[bytes]) -> None:
        """Return only when the broker accepted the whole batch with the configured guarantee."""

    async def close(self) -> None:  # noqa: B027 - optional hook
        """Release connections."""


class AsyncReceiver(abc.ABC, Generic[R]):
    """The receiving role of an asyncio client, for one worker; ``R`` is its receipt."""

    @abc.abstractmethod
    async def receive(self, max_n: int) -> list[Received[R]]:
        """Up to ``max_n`` messages; may wait briefly (≤ ~1 s) and return an empty list."""

    async def receive_batch(self, max_n: int) -> ReceivedBatch[R]:
        """:meth:`receive` as columns (what the worker awaits); see
        :meth:`Receiver.receive_batch`."""
        return ReceivedBatch.of(await self.receive(max_n))

    @abc.abstractmethod
    async def ack(self, receipts: Sequence[R]) -> None:
        """Confirm processing of the messages these receipts came with."""

    def joined(self) -> bool:
        """See :meth:`Receiver.joined`."""
        return True

    async def close(self) -> None:
        """Release connections."""


class AsyncAdapter(AsyncSender, AsyncReceiver[R]):
    """An asyncio client for one worker (one instance per worker task), in either role."""


@dataclass(frozen=True, slots=True)
class Topology:
    """Nodes by role, e.g. ``{"broker": 3}`` or ``{"zookeeper": 3, "bookie": 3, "broker": 2}``."""

    roles: dict[str, int]
    replication: str = ""


#: The node selectors a fault may name besides a node index.
FAULT_ROLES = ("leader", "follower")


@dataclass(frozen=True, slots=True)
class ParamProblem:
    """A broker parameter the topology cannot honour: its key in ``[broker.params]`` and
    one line saying why and what would fit."""

    key: str
    message: str


def more_than_nodes(
    key: str, value: int | None, nodes: int, topology: str, what: str
) -> list[ParamProblem]:
    """``value`` (of ``key``, counting ``what``) above the ``nodes`` a topology has."""
    if value is None or value <= nodes:
        return []
    return [
        ParamProblem(
            key,
            f"{value} {what} on topology {topology!r}, which has {nodes} "
            f"{'node' if nodes == 1 else 'nodes'}: at most {nodes}",
        )
    ]


@dataclass(frozen=True, slots=True)
class FaultSupport:
    """What faults one local topology of a system can take; checked before anything starts.

    ``nodes`` are the broker nodes a fault may act on (``node = 0`` … ``nodes - 1``);
    ``leader`` and ``follower`` say, for the scenario's reader, what those selectors mean.
    """

    nodes: int
    leader: str
    follower: str
    #: The system elects a new leader by itself: data of a node that stays down is still
    #: reachable through the others (else it is unavailable until that node returns).
    fails_over: bool
    #: A killed or stopped node starts again from its data directory (``until`` with kill/stop).
    restarts: bool = True
    #: Its nodes can run each in a network namespace of its own (:mod:`brokers.netns`), so a
    #: node can be cut off from its peers and clients (``isolate``).
    isolates: bool = False
    #: Its nodes' data directories can be lazy filesystems (:mod:`brokers.lazyfs`), so that
    #: every node can lose power at once and keep only what it synced (``power-loss``).
    power_loss: bool = False


#: The selector of a ``power-loss`` that cuts every broker node at the same instant.
ALL_NODES = "all"


@dataclass(frozen=True, slots=True)
class FaultTarget:
    """The node a fault's selector named when the fault began."""

    name: str
    #: It was the leader (of what, the system's :class:`FaultSupport` says) at that moment.
    leader: bool


@dataclass(frozen=True, slots=True)
class NodeProcesses:
    """Where one running broker node of a local cluster is, for the resource telemetry."""

    name: str
    #: The process group of the node's processes (None while the node is down).
    group: int | None
    #: The node's data directory (its disk is the one it writes to).
    data_dir: Path | None = None
    #: The host end of the node's network interface where it has one of its own (a
    #: namespace's veth); None on the shared loopback.
    interface: str | None = None


class LocalCluster(abc.ABC):
    """Broker processes started on this machine; stopped (and data removed) by ``stop``.

    Systems whose topologies take faults (:meth:`LocalDeployment.fault_support`) implement
    :meth:`fault_target`, :meth:`fault` and :meth:`recover`.
    """

    endpoints: Endpoints
    topology: str

    @abc.abstractmethod
    def stop(self) -> None: ...

    @abc.abstractmethod
    def dead_nodes(self) -> list[str]:
        """Names of nodes whose process has exited (empty while all run)."""

    def death(self, name: str) -> str:
        """What is known of how the dead node ``name`` ended (its exit code, the last lines
        of its log), for the one-line error; empty when nothing is."""
        return ""

    def processes(self) -> list[NodeProcesses]:
        """Each broker node's processes now, for the resource telemetry (empty: none known)."""
        return []

    def fault_target(self, selector: str | int, destination: Destination) -> FaultTarget:
        """The node ``"leader"``, ``"follower"`` or a node index names now, asked of the
        running cluster (``destination`` is the sweep point's queue/topic/stream)."""
        raise BrokerError(f"faults are not supported by this {self.topology} cluster")

    def fault(self, name: str, action: str) -> None:
        """Kill, stop, pause or isolate the node ``name``: ``action`` is a scenario's fault
        action (``isolate`` only where :attr:`FaultSupport.isolates`)."""
        raise BrokerError(f"faults are not supported by this {self.topology} cluster")

    def recover(self, name: str, action: str, wait: float = 0.0) -> None:
        """Undo ``action`` on ``name``: resume a paused node, reconnect an isolated one,
        restart a killed or stopped one from its data directory; wait up to ``wait`` seconds
        for it to be ready."""
        raise BrokerError(f"faults are not supported by this {self.topology} cluster")

    def __enter__(self) -> LocalCluster:
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class LocalDeployment(abc.ABC, Generic[P_contra]):
    """How to run a system on this machine, configured by its parameters (``P_contra``)."""

    #: Local topologies this system supports, e.g. ("single", "cluster").
    topologies: tuple[str, ...] = ("single",)
    #: Debian packages ``brokerbench setup`` installs for it.
    debian_packages: tuple[str, ...] = ()
    #: What the local stand-in is, where it is not the real server (shown by ``brokers``).
    stand_in: str = ""

    @abc.abstractmethod
    def missing(self) -> str | None:
        """Why it cannot start here (one line naming what to install), or None."""

    def install(self, log: Callable[[str], None]) -> None:
        """Fetch what ``missing`` reports (artifacts beyond Debian packages)."""

    @abc.abstractmethod
    def start(
        self, topology: str, params: P_contra, workdir: Path, hosts: NodeHosts | None = None
    ) -> LocalCluster:
        """Start the topology under ``workdir`` and wait until it is ready; its nodes on
        ``hosts`` (loopback when None; other hosts only where :meth:`fault_support` says
        the topology ``isolates``)."""

    def fault_support(self, topology: str) -> FaultSupport | None:
        """The faults ``topology`` can take here; None when the system takes none yet."""
        return None

    def param_problems(self, topology: str, params: P_contra) -> list[ParamProblem]:
        """What ``params`` ask that ``topology`` cannot give (more replicas than nodes, a
        quorum larger than the cluster…); checked with the scenario, before anything
        starts. None by default."""
        return []


#: ``connect`` of a system whose workers run in threads: a connected :class:`Adapter`.
BlockingConnect = Callable[[Endpoints, P, Destination], Adapter[Any]]
#: ``connect`` of a system whose workers run as asyncio tasks: a coroutine function.
AsyncConnect = Callable[[Endpoints, P, Destination], Awaitable[AsyncAdapter[Any]]]


@dataclass(frozen=True)
class BrokerSystem(Generic[P]):
    """Everything brokerbench knows about one system; exported as ``SYSTEM``.

    ``connect`` builds one worker's client, an instance of one of ``adapters``: blocking
    systems return an :class:`Adapter` (workers run in threads); systems whose adapters
    are :class:`AsyncAdapter` classes connect in an ``async`` function (workers run as
    asyncio tasks). It raises :class:`~brokers.errors.BrokerConnectionError` naming the
    host when the broker cannot be reached. ``prepare`` runs once per sweep point in the
    coordinator, before any node starts.
    """

    name: str
    title: str
    params_model: type[P]
    connect: BlockingConnect[P] | AsyncConnect[P]
    #: The classes ``connect`` returns instances of (several where the parameters or the
    #: topology choose, e.g. a Kafka client library, Redis Cluster): all blocking or all
    #: asyncio.
    adapters: tuple[type[Adapter[Any]], ...] | tuple[type[AsyncAdapter[Any]], ...]
    prepare: Callable[[Endpoints, P, Destination], None]
    describe: Callable[[Endpoints, P], dict[str, Any]]
    reference_topology: Topology
    local: LocalDeployment[P] | None = None
    cloud: CloudRecipe[P] | None = None
    #: Said in the report next to this system's numbers (e.g. asynchronous replication).
    caveats: tuple[str, ...] = ()
    #: What a confirmed message survives, from what ``describe`` read back and the
    #: parameters (:mod:`brokers.durability`); None where the system derives none yet.
    durability: Callable[[Mapping[str, Any], P], Durability] | None = None
    #: The client library's distribution name, for the run context.
    client_package: str = ""
    #: Where the client library depends on the parameters (e.g. a choice of Kafka clients):
    #: the distribution name for the given parameters; overrides ``client_package``.
    client_for: Callable[[P], str] | None = None
    #: Seconds after which a message received but not acknowledged is delivered again
    #: (a visibility timeout), for the given parameters; None where redelivery is immediate
    #: or not time-based. A receiver that stops sooner would leave such messages unseen.
    redelivery_after: Callable[[P], float] | None = None
    #: False where acknowledgements are cumulative (committed offsets): a receiver that stops
    #: with a message unacknowledged may leave acknowledged ones after it to be delivered
    #: again. True where each message is acknowledged on its own.
    acks_per_message: bool = True
    #: How its messages carry keys (``[load] keys``) and whether it promises per-key order;
    #: None where it sends none (a keyed batch goes as its bodies alone, nothing is checked).
    keys: KeySupport | None = None
    #: ``[load] receive_batch`` when a scenario sets none: as many messages as one receive
    #: call of this system's client hands out cheaply (10, the smallest common limit, where
    #: a larger batch buys nothing or the API caps it, e.g. SQS).
    receive_batch: int = 10
    #: Where no adapter pipelines: why a worker keeps one batch awaiting confirmation
    #: (``brokerbench brokers`` and a scenario asking for more say it).
    one_in_flight: str = ""

    def client(self, params: P) -> str:
        """The client library (distribution name) workers use with these parameters."""
        return self.client_for(params) if self.client_for is not None else self.client_package

    def client_missing(self) -> str | None:
        """Why workers cannot connect from here: its default client library is not
        installed (one line saying what to install), else None."""
        if not self.client_package:
            return None
        try:
            importlib.metadata.version(self.client_package)
        except importlib.metadata.PackageNotFoundError:
            return (
                f"its client {self.client_package} is not installed: "
                "pip install 'brokerbench[brokers]'"
            )
        return None

    @property
    def asyncio(self) -> bool:
        """Whether its workers run as asyncio tasks (its adapters are asyncio clients)."""
        return all(issubclass(adapter, AsyncAdapter) for adapter in self.adapters)

    @property
    def can_pipeline(self) -> bool:
        """Whether a worker may keep several batches awaiting confirmation
        (``max_in_flight``): asyncio adapters always can, blocking ones that are
        ``pipelined``. Where ``connect`` chooses among several classes one such suffices
        here; a sender whose own client is not refuses (``workload.engine.worker``)."""
        return any(
            issubclass(adapter, AsyncAdapter) or adapter.pipelined for adapter in self.adapters
        )

    def connect_blocking(
        self, endpoints: Endpoints, params: P, destination: Destination
    ) -> Adapter[Any]:
        """One worker's client of a blocking system (``asyncio`` False)."""
        client = self.connect(endpoints, params, destination)
        if not isinstance(client, Adapter):
            raise TypeError(f"{self.name}: connect gave {type(client).__name__}, not an Adapter")
        return client

    async def connect_async(
        self, endpoints: Endpoints, params: P, destination: Destination
    ) -> AsyncAdapter[Any]:
        """One worker's client of an asyncio system (``asyncio`` True)."""
        client = self.connect(endpoints, params, destination)
        if isinstance(client, Adapter):
            raise TypeError(f"{self.name}: connect gave an Adapter, not an asyncio client")
        return await client
