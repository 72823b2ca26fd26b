"""Where the nodes of a local cluster listen: all on loopback, or each on a host of its own.

A fault that isolates a node (cuts it off from its peers and from the clients while it
keeps running) needs a network the node can be cut from, which the shared loopback
interface is not. :class:`Namespaces` gives each broker node a network namespace of its
own — a host with one address — joined to the others and to this machine by a bridge:

* a bridge ``bb<id>`` in this machine's namespace, address ``10.213.<n>.1/24``, where
  ``<n>`` is a /24 no interface here uses yet (clients connect from this machine through it);
* per node a namespace ``bb<id>-<slot>`` with loopback up and one end of a veth pair,
  ``eth0``, address ``10.213.<n>.<10 + slot>/24``; the other end, ``bb<id>h<slot>``, is a
  port of the bridge.

Nothing is routed beyond the /24: the namespaces reach only each other and this machine.
:meth:`Namespaces.cut` sets a node's bridge port down — its packets are dropped both ways,
as on a failed switch port, and connections to it stall rather than close — and
:meth:`Namespaces.mend` sets it up again. A node's command runs in its namespace through
``ip netns exec`` (which execs the command: the process is the node's, its group the
same). Namespaces and bridge are registered with the :mod:`~brokers.watchdog`, so they are
removed even if the coordinator dies; :meth:`Namespaces.close` removes them otherwise.

Creating namespaces needs root (``CAP_NET_ADMIN``) and ``ip`` from iproute2:
:func:`namespaces_missing` says what is missing, in one line, before anything starts.
:class:`NodeHosts` — every node on 127.0.0.1, nothing to cut — is what clusters use unless
a scenario isolates a node.
"""

from __future__ import annotations

import ipaddress
import os
import secrets
import shutil
import subprocess
import threading
from collections.abc import Sequence

from brokers.errors import BrokerError, BrokerStartError
from brokers.watchdog import WATCHDOG

LOOPBACK = "127.0.0.1"
#: The /16 the namespaces' /24s are taken from (private; routed nowhere from here).
NETWORK = ipaddress.IPv4Network("10.213.0.0/16")
#: A node's address in its /24 is this plus its slot.
FIRST_HOST = 10
MAX_SLOTS = 200


class NodeHosts:
    """Every node on loopback: the default, which no fault can cut."""

    #: Nodes can be cut off from their peers and clients (:meth:`cut`).
    isolates = False

    def address(self, slot: int) -> str:
        """The address node ``slot`` listens on and is reached at."""
        return LOOPBACK

    def interface(self, slot: int) -> str | None:
        """The interface on this machine that carries node ``slot``'s traffic alone (None:
        it shares loopback with every other node)."""
        return None

    def command(self, slot: int, cmd: Sequence[str]) -> list[str]:
        """``cmd`` as it runs for node ``slot``."""
        return list(cmd)

    def network(self) -> str:
        """The addresses nodes and clients reach each other from, as a CIDR (for a node's
        access rules)."""
        return f"{LOOPBACK}/32"

    def cut(self, slot: int) -> None:
        raise BrokerError("nodes on loopback cannot be isolated")

    def mend(self, slot: int) -> None:
        raise BrokerError("nodes on loopback cannot be isolated")

    def close(self) -> None:
        """Remove what was built for the nodes (nothing here)."""


def namespaces_missing() -> str | None:
    """Why :class:`Namespaces` cannot be built here (one line), or None."""
    if shutil.which("ip") is None:
        return "isolating a node needs the ip command: apt-get install iproute2"
    if os.geteuid() != 0:
        return "isolating a node needs network namespaces, which only root can create: run as root"
    return None


class Namespaces(NodeHosts):
    """Each node in a network namespace of its own (see the module's description); a
    node's namespace is built when its address is first asked for."""

    isolates = True

    def __init__(self) -> None:
        self.id = secrets.token_hex(3)
        self.bridge = f"bb{self.id}"
        self._lock = threading.Lock()
        self._subnet: ipaddress.IPv4Network | None = None
        self._slots: set[int] = set()
        self._closed = False

    def namespace(self, slot: int) -> str:
        return f"{self.bridge}-{slot}"

    def port(self, slot: int) -> str:
        """The bridge port (host end of the veth pair) of node ``slot``."""
        return f"{self.bridge}h{slot}"

    def interface(self, slot: int) -> str | None:
        return self.port(slot)

    def address(self, slot: int) -> str:
        if not 0 <= slot < MAX_SLOTS:
            raise BrokerError(f"no node slot {slot} (0 to {MAX_SLOTS - 1})")
        with self._lock:
            subnet = self._subnet or self._create_bridge()
            if slot not in self._slots:
                self._create_node(slot, subnet)
                self._slots.add(slot)
        return str(subnet.network_address + FIRST_HOST + slot)

    def command(self, slot: int, cmd: Sequence[str]) -> list[str]:
        self.address(slot)
        return ["ip", "netns", "exec", self.namespace(slot), *cmd]

    def network(self) -> str:
        with self._lock:
            subnet = self._subnet or self._create_bridge()
        return str(subnet)

    def cut(self, slot: int) -> None:
        _ip("link", "set", self.port(slot), "down")

    def mend(self, slot: int) -> None:
        _ip("link", "set", self.port(slot), "up")

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._closed = True
            for slot in sorted(self._slots):
                name = self.namespace(slot)
                _ip("netns", "delete", name, check=False)
                WATCHDOG.release_namespace(name)
            if self._subnet is not None:
                _ip("link", "delete", self.bridge, check=False)
                WATCHDOG.release_link(self.bridge)

    def _create_bridge(self) -> ipaddress.IPv4Network:
        if problem := namespaces_missing():
            raise BrokerStartError(problem)
        subnet = _unused_subnet()
        WATCHDOG.watch_link(self.bridge)
        _ip("link", "add", self.bridge, "type", "bridge")
        _ip("addr", "add", f"{subnet.network_address + 1}/{subnet.prefixlen}", "dev", self.bridge)
        _ip("link", "set", self.bridge, "up")
        self._subnet = subnet
        return subnet

    def _create_node(self, slot: int, subnet: ipaddress.IPv4Network) -> None:
        name, port = self.namespace(slot), self.port(slot)
        WATCHDOG.watch_namespace(name)
        _ip("netns", "add", name)
        _ip("-n", name, "link", "set", "lo", "up")
        _ip("link", "add", port, "type", "veth", "peer", "name", "eth0", "netns", name)
        _ip("link", "set", port, "master", self.bridge)
        _ip("link", "set", port, "up")
        address = subnet.network_address + FIRST_HOST + slot
        _ip("-n", name, "addr", "add", f"{address}/{subnet.prefixlen}", "dev", "eth0")
        _ip("-n", name, "link", "set", "eth0", "up")


def _unused_subnet() -> ipaddress.IPv4Network:
    """A /24 of :data:`NETWORK` that no interface of this machine has an address in."""
    out = subprocess.run(
        ["ip", "-4", "-o", "addr", "show"], capture_output=True, text=True, check=False
    ).stdout
    used = [
        ipaddress.ip_interface(fields[fields.index("inet") + 1]).network
        for fields in (line.split() for line in out.splitlines())
        if "inet" in fields
    ]
    free = [s for s in NETWORK.subnets(new_prefix=24) if not any(s.overlaps(u) for u in used)]
    if not free:
        raise BrokerStartError(f"no /24 of {NETWORK} is free for the nodes' namespaces")
    return free[secrets.randbelow(len(free))]


def _ip(*args: str, check: bool = True) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True, check=False)
    if check and done.returncode != 0:
        message = done.stderr.strip().splitlines()
        raise BrokerError(f"ip {' '.join(args)}: {message[0] if message else done.returncode}")
