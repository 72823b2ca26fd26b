"""NATS JetStream servers on AWS: the Debian/Ubuntu package, the same configuration
template as the local cluster (private addresses, standard ports, larger limits), run by
the package's systemd unit as the ``nats`` user. Clients and routes log in as ``brokerbench``
with the stack's broker password (read from the parameter store at boot)."""

from __future__ import annotations

import shlex
from typing import TYPE_CHECKING

from brokers.base import Destination, Endpoints
from brokers.cloud import BROKER_PASSWORD, CloudFaults, CloudRecipe
from brokers.errors import BrokerError
from brokers.nats.local import jetstream_leader, render_config

if TYPE_CHECKING:
    from brokers.nats.params import NatsParams

ROLE = "server"
CLIENT_PORT = 4222
CLUSTER_PORT = 6222
MONITOR_PORT = 8222
CONFIG = "/etc/nats-server.conf"
STORE = "/var/lib/nats/jetstream"
USER = "brokerbench"


class NatsCloud(CloudRecipe["NatsParams"]):
    """Three ``server`` nodes routing to each other; JetStream elects its own leaders. For
    faults the leader is the point's stream leader, read from a server's ``/jsz``."""

    faults = CloudFaults("nats-server.service", (ROLE,))

    #: Where the node's data volume is mounted (the JetStream store lives below it).
    data_dir = "/var/lib/nats"
    service_user = "nats"

    def __init__(self, version: str = "", max_file_store: str = "500GB") -> None:
        #: apt version string to pin (e.g. "2.9.10-1+b3"); empty = the image's.
        self.version = version
        self.max_file_store = max_file_store

    def install_commands(self) -> list[str]:
        package = f"nats-server={self.version}" if self.version else "nats-server"
        return [
            "export DEBIAN_FRONTEND=noninteractive",
            "apt-get update -q",
            f"apt-get install -y -q {shlex.quote(package)} curl",
            "systemctl stop nats-server || true",
        ]

    def node_files(
        self, role: str, index: int, cluster: dict[str, list[str]], params: NatsParams
    ) -> dict[str, str]:
        addresses = cluster[ROLE]
        routes = (
            [f"{a}:{CLUSTER_PORT}" for j, a in enumerate(addresses) if j != index]
            if len(addresses) > 1
            else []
        )
        config = render_config(
            f"nats-{index + 1}",
            "0.0.0.0",
            CLIENT_PORT,
            CLUSTER_PORT,
            MONITOR_PORT,
            STORE,
            routes,
            max_memory_store="4GB",
            max_file_store=self.max_file_store,
            user=USER,
            password=BROKER_PASSWORD.placeholder,
        )
        return {CONFIG: config}

    def start_commands(self, role: str, index: int, cluster: dict[str, list[str]]) -> list[str]:
        return [
            f"mkdir -p {STORE} && chown -R nats:nats /var/lib/nats",
            "systemctl enable nats-server",
            "systemctl restart nats-server",
            # Ready when JetStream is healthy (in a cluster: the meta leader is known).
            f"for i in $(seq 120); do curl -sf http://127.0.0.1:{MONITOR_PORT}/healthz "
            "&& break; sleep 2; done",
        ]

    def ports(self) -> list[int]:
        return [CLIENT_PORT, CLUSTER_PORT, MONITOR_PORT]

    def fault_leader(
        self, endpoints: Endpoints, params: NatsParams, destination: Destination
    ) -> int:
        from brokers.nats.adapter import stream_name

        errors = []
        for host, _ in endpoints.addresses():
            try:
                leader = jetstream_leader(host, MONITOR_PORT, stream_name(destination))
            except (OSError, ValueError) as exc:  # a server that is down: ask the next
                errors.append(f"{host}: {exc}")
                continue
            if leader.startswith("nats-") and leader[5:].isdigit():
                return int(leader[5:]) - 1
        raise BrokerError(f"no NATS server names a leader of {destination.name}: {errors[:1]}")

    def endpoints(self, cluster: dict[str, list[str]]) -> Endpoints:
        return Endpoints(
            hosts=tuple(f"{address}:{CLIENT_PORT}" for address in cluster[ROLE]),
            extra=(("user", USER),),
        )
