"""What a client connects with — ``connect(endpoints, params, destination)``: where the
broker answers (:class:`Endpoints`), the settings of its system (:class:`BrokerParams`, the
base of every system's parameter model) and the queue/topic/stream/table of a sweep point
(:class:`Destination`). The contract (:mod:`brokers.base`) and the AWS recipes
(:mod:`brokers.cloud`) both name them.
"""

from __future__ import annotations

import re
import socket
from dataclasses import dataclass
from typing import Annotated, Any, TypeVar

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from brokers.errors import BrokerConnectionError


class BrokerParams(BaseModel):
    """Base of every system's ``[broker.params]`` model: strict (``"2"``, ``2.0`` and
    ``true`` are not the integer 2; an integer is a number of seconds), finite (no ``inf``
    or ``nan``), frozen, no unknown keys. Each field's bounds are in its declaration; what a
    value asks of the topology (replicas ≤ nodes) is checked by the system's local
    deployment (:meth:`brokers.base.LocalDeployment.param_problems`)."""

    model_config = ConfigDict(extra="forbid", frozen=True, strict=True, allow_inf_nan=False)


#: The longest a parameter in seconds may be: an hour.
MAX_SECONDS = 3600


def seconds(default: float, description: str, ge: float = 0.1) -> Any:
    """A parameter's field in seconds: from ``ge`` (0.1 s unless given) up to an hour."""
    return Field(default, ge=ge, le=MAX_SECONDS, description=description)


#: The smallest and largest JVM heap a parameter may give (MiB): below, no broker starts;
#: above, no machine brokerbench runs on has the memory.
HEAP_MIB = (64, 512 * 1024)


def _heap_in_bounds(value: str) -> str:
    match = re.fullmatch(r"([0-9]+)([mg])", value)
    if match is None:
        raise ValueError("a JVM heap size such as '512m' or '2g'")
    mib = int(match[1]) * (1024 if match[2] == "g" else 1)
    low, high = HEAP_MIB
    if not low <= mib <= high:
        raise ValueError(f"between {low}m and {high // 1024}g (got {value})")
    return value


#: A JVM heap (``-Xmx``) parameter: ``<n>m`` or ``<n>g``, within :data:`HEAP_MIB`.
Heap = Annotated[str, AfterValidator(_heap_in_bounds)]


P = TypeVar("P", bound=BrokerParams)
#: A parameter model a deployment or recipe only reads (one for Kafka's params serves KMQ's).
P_contra = TypeVar("P_contra", bound=BrokerParams, contravariant=True)


#: Extras of :class:`Endpoints` whose names contain these hold secrets (never shown).
SECRET_WORDS = ("password", "secret", "token", "key")


@dataclass(frozen=True, slots=True, repr=False)
class Endpoints:
    """Where the broker answers: ``host:port`` strings plus system-specific extras.

    Picklable, so that every client node process can connect on its own.
    """

    hosts: tuple[str, ...]
    extra: tuple[tuple[str, str], ...] = ()

    def get(self, key: str, default: str = "") -> str:
        return dict(self.extra).get(key, default)

    def __repr__(self) -> str:
        """Never shows a secret: the values of ``password``-like extras are masked."""
        extra = tuple(
            (key, "***" if any(word in key.lower() for word in SECRET_WORDS) else value)
            for key, value in self.extra
        )
        return f"Endpoints(hosts={self.hosts!r}, extra={extra!r})"

    @property
    def first(self) -> tuple[str, int]:
        return split_host_port(self.hosts[0])

    def addresses(self) -> list[tuple[str, int]]:
        return [split_host_port(h) for h in self.hosts]


def require_reachable(endpoints: Endpoints, what: str, timeout: float = 10.0) -> None:
    """Raise :class:`BrokerConnectionError` naming ``what`` at the first host unless that host
    accepts a TCP connection within ``timeout`` seconds."""
    host, port = endpoints.first
    try:
        with socket.create_connection((host, port), timeout=timeout):
            pass
    except OSError as exc:
        raise BrokerConnectionError(f"{what} at {host}:{port} is unreachable: {exc}") from None


def split_host_port(address: str) -> tuple[str, int]:
    host, _, port = address.rpartition(":")
    return host.strip("[]"), int(port)


@dataclass(frozen=True, slots=True)
class Destination:
    """The queue/topic/stream/table one sweep point sends to, unique per point; ``keyed``:
    its messages carry keys (``[load] keys``), which a system may need to know when it
    creates the destination (RocketMQ: a FIFO topic)."""

    name: str
    keyed: bool = False
