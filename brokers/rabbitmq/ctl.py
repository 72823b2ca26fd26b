"""``rabbitmqctl`` against RabbitMQ nodes reachable over Erlang distribution.

Locally started clusters publish in their :class:`~brokers.base.Endpoints` what the CLI
needs to reach them (the private Erlang cookie's home, the private epmd port, the node
names); :class:`Ctl` uses that to join nodes and to read back cluster membership and the
members of a quorum queue, which AMQP cannot report.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

from brokers.base import Endpoints
from brokers.errors import BrokerError
from brokers.local import run_checked

#: Erlang distribution of servers and CLI tools listens on loopback only.
LOOPBACK_DIST = "-kernel inet_dist_use_interface {127,0,0,1}"

_KEYS = ("rabbitmqctl", "erlang_home", "epmd_port", "nodes")


@dataclass(frozen=True)
class Ctl:
    """How to run ``rabbitmqctl`` against one cluster's nodes."""

    binary: str
    home: str  # holds .erlang.cookie and an empty rabbitmq-env.conf
    epmd_port: int
    nodes: tuple[str, ...]

    def extra(self) -> tuple[tuple[str, str], ...]:
        """The entries this adds to the cluster's ``Endpoints.extra``."""
        values = (self.binary, self.home, str(self.epmd_port), ",".join(self.nodes))
        return tuple(zip(_KEYS, values, strict=True))

    @classmethod
    def from_endpoints(cls, endpoints: Endpoints) -> Ctl | None:
        """The CLI access a local cluster published, or None (e.g. remote endpoints)."""
        values = [endpoints.get(key) for key in _KEYS]
        if not all(values):
            return None
        binary, home, port, nodes = values
        return cls(binary, home, int(port), tuple(nodes.split(",")))

    def env(self) -> dict[str, str]:
        return {
            **os.environ,
            "HOME": self.home,
            "ERL_EPMD_PORT": str(self.epmd_port),
            "RABBITMQ_CONF_ENV_FILE": os.path.join(self.home, "rabbitmq-env.conf"),
            "RABBITMQ_CTL_ERL_ARGS": LOOPBACK_DIST,
        }

    def run(self, node: str, *args: str, timeout: float = 120) -> str:
        """Run one command against ``node``; a failure raises naming the node."""
        return run_checked(
            [self.binary, "-n", node, "-q", *args],
            f"rabbitmqctl {args[0]} on {node}",
            timeout=timeout,
            env=self.env(),
        )

    def json(self, node: str, *args: str, timeout: float = 120) -> Any:
        return json.loads(self.run(node, *args, "--formatter", "json", timeout=timeout))

    def cluster_status(self) -> dict[str, Any]:
        """``cluster_status`` from the first node that answers."""
        errors = []
        for node in self.nodes:
            try:
                status: dict[str, Any] = self.json(node, "cluster_status")
                return status
            except BrokerError as exc:
                errors.append(str(exc))
        raise BrokerError("; ".join(errors))

    def queue(self, name: str, node: str = "") -> dict[str, Any] | None:
        """Type, members, leader and durability of one queue, or None if it does not exist;
        asked of ``node`` (default: the first)."""
        rows = self.json(
            node or self.nodes[0],
            "list_queues",
            "name",
            "type",
            "members",
            "online",
            "leader",
            "durable",
        )
        for row in rows:
            if row.get("name") == name:
                return dict(row)
        return None
