"""ActiveMQ Classic on this machine: the Debian package's broker, our own base directory.

The package's service and ``/var/lib/activemq`` are never touched: ``start`` renders the
configuration into the work directory and runs the broker's Java main class with an
explicit heap, then waits for its STOMP port.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from brokers.activemq import config
from brokers.base import Endpoints, LocalDeployment
from brokers.errors import BrokerUnavailable
from brokers.local import (
    LOOPBACK,
    ManagedProcess,
    NodeHosts,
    ProcessCluster,
    free_ports,
    start_cluster,
    wait_for_port,
)

if TYPE_CHECKING:
    from brokers.activemq.params import ActiveMQParams

START_TIMEOUT = 120.0


class ActiveMQLocal(LocalDeployment["ActiveMQParams"]):
    topologies = ("single",)
    debian_packages = (
        "activemq",
        "libxstream-java",
        "libjettison-java",
        "openjdk-17-jre-headless",
    )

    def missing(self) -> str | None:
        if shutil.which("java") is None:
            return "java not found: install the Debian package openjdk-17-jre-headless"
        if not config.RUN_JAR.exists():
            return f"{config.RUN_JAR} not found: install the Debian package activemq"
        return None

    def start(
        self, topology: str, params: ActiveMQParams, workdir: Path, hosts: NodeHosts | None = None
    ) -> ProcessCluster:
        problem = self.missing()
        if problem:
            raise BrokerUnavailable(problem)
        (port,) = free_ports(1)
        node = config.NodeConfig(
            name="brokerbench",
            host=LOOPBACK,
            port=port,
            base_dir=str(workdir / "broker"),
            heap=params.heap,
        )
        cluster = ProcessCluster(topology, workdir)

        def build(c: ProcessCluster) -> None:
            config.write_configuration(node)
            process = c.add(
                ManagedProcess(
                    name="ActiveMQ broker",
                    cmd=config.broker_command(node),
                    log_path=workdir / "activemq.log",
                    cwd=Path(node.base_dir),
                )
            )
            wait_for_port(process, node.host, node.port, timeout=START_TIMEOUT)
            c.endpoints = Endpoints(
                hosts=(node.address,),
                extra=(("password", config.PASSWORD), ("user", config.USER)),
            )

        return start_cluster(cluster, build)
