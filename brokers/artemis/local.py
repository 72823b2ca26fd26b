"""Artemis on this machine: the distribution in the cache, instances made by ``artemis create``.

``install`` fetches ``org.apache.activemq:apache-artemis:<version>:bin:tar.gz`` with Maven
(``pom.xml`` next to this file) and unpacks it into ``cache_dir("artemis")``. ``start``
creates one instance per node under the work directory, renders its ``broker.xml``,
starts ``bin/artemis run`` for every node and waits until the live brokers accept
connections and every backup has synchronised its replica.

Faults (``cluster``) act on the first live–backup pair: the leader is whichever of the two
is active (serves clients) at that moment, asked of each node's Jolokia API; a fault waits
until the pair is settled (:data:`SETTLE_TIMEOUT`). The backup takes over when its live
dies (a single pair votes alone: the backup activates as soon as it loses the live). A
restarted live finds the backup active, synchronises from it as its backup and takes over
again (the backup's ``allow-failback``); a restarted backup synchronises again.
"""

from __future__ import annotations

import functools
import os
import shutil
import tarfile
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

from brokers.artemis import config
from brokers.artemis.jolokia import Jolokia
from brokers.base import Destination, FaultSupport, LocalDeployment
from brokers.errors import BrokerError, BrokerUnavailable
from brokers.jvm import cache_dir, jvm_missing, maven_fetch
from brokers.local import (
    LOOPBACK,
    ManagedProcess,
    NodeHosts,
    ProcessCluster,
    free_ports,
    log_contains,
    port_open,
    run_checked,
    start_cluster,
    wait_until,
)

if TYPE_CHECKING:
    from brokers.artemis.params import ArtemisParams

POM = Path(__file__).parent / "pom.xml"
#: Heap of the short-lived ``artemis create`` JVM.
CREATE_JAVA_ARGS = "-Xmx256m -Xms64m -XX:+UseSerialGC"
START_TIMEOUT = 180.0
#: Logged by a backup once its replica of the live journal is complete.
BACKUP_SYNCHRONIZED = "AMQ221024"
#: How long a fault waits for the first pair to settle: one node active, the other down or a
#: synchronised backup. Artemis cannot take a fault meaningfully before: a backup that is
#: not synchronised cannot take over, and one killed while it synchronises stalls its live
#: (``initial-replication-sync-timeout``, 30 s) until the live shuts itself down.
SETTLE_TIMEOUT = 60.0


def distribution_home() -> Path:
    return cache_dir("artemis") / config.DISTRIBUTION


class ArtemisCluster(ProcessCluster):
    """Artemis nodes; faults act on the first live–backup pair (see the module docstring)."""

    def __init__(self, topology: str, workdir: Path, nodes: list[config.NodeConfig]) -> None:
        super().__init__(topology, workdir)
        self.configs = {f"artemis {n.name}": n for n in nodes}

    def fault_nodes(self) -> list[str]:
        return [name for name, node in self.configs.items() if node.group == "pair0"]

    def leader(self, destination: Destination) -> str:
        """The node of the first pair that is active now (a live, or a backup that took over),
        once the pair is settled: waits while the other node, if it runs, is not yet a
        synchronised backup (see :data:`SETTLE_TIMEOUT`)."""
        deadline = time.monotonic() + SETTLE_TIMEOUT
        while True:
            active = self._settled()
            if active is not None:
                return active
            if time.monotonic() >= deadline:
                raise BrokerError(
                    f"the first Artemis live–backup pair did not settle (one node active, the "
                    f"other a synchronised backup or down) within {SETTLE_TIMEOUT:.0f} s"
                )
            time.sleep(0.5)

    def _settled(self) -> str | None:
        """The active node if the other one is down or a synchronised backup, else None."""
        states = {}
        for name in self.fault_nodes():
            if not self.node(name).alive():
                continue
            node = self.configs[name]
            try:
                states[name] = Jolokia(node.http_address, config.USER, config.PASSWORD, 5).broker()
            except BrokerError:
                return None  # starting or stopping
        active = [n for n, a in states.items() if a.get("Active") and not a.get("Backup")]
        others = [a for n, a in states.items() if n not in active]
        if len(active) != 1 or not all(a.get("Backup") and a.get("ReplicaSync") for a in others):
            return None
        return active[0]


class ArtemisLocal(LocalDeployment["ArtemisParams"]):
    topologies = ("single", "cluster")
    debian_packages = ("openjdk-17-jre-headless", "maven")

    def missing(self) -> str | None:
        return jvm_missing(
            f"ActiveMQ Artemis {config.ARTEMIS_VERSION}",
            (distribution_home() / "bin" / "artemis").is_file(),
            "stomp",
            "stomp.py",
        )

    def install(self, log: Callable[[str], None]) -> None:
        home = distribution_home()
        if (home / "bin" / "artemis").is_file():
            return
        downloads = maven_fetch(POM, cache_dir("artemis", "maven"), log)
        archive = downloads / f"{config.DISTRIBUTION}-bin.tar.gz"
        if not archive.is_file():
            raise BrokerUnavailable(f"Maven did not deliver {archive.name} into {downloads}")
        log(f"unpacking {archive.name} into {home.parent}…")
        partial = home.parent / f".{home.name}.partial"
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        with tarfile.open(archive) as tar:
            tar.extractall(partial, filter="tar")
        (partial / config.DISTRIBUTION).rename(home)
        shutil.rmtree(partial, ignore_errors=True)

    def fault_support(self, topology: str) -> FaultSupport | None:
        return FaultSupport(
            nodes=2 if topology == "cluster" else 1,
            leader="the active broker of the first live–backup pair (the live, or its backup "
            "after a failover); a fault waits (up to 60 s) until the other broker is down or "
            "a synchronised backup",
            follower="the other broker of that pair (its backup)",
            fails_over=True,
            # The brokers' data directories (journal, bindings, paging, large messages) are
            # on the lazy filesystem (measured on one broker).
            power_loss=topology == "single",
        )

    def start(
        self, topology: str, params: ArtemisParams, workdir: Path, hosts: NodeHosts | None = None
    ) -> ProcessCluster:
        problem = self.missing()
        if problem:
            raise BrokerUnavailable(problem)
        single = topology == "single"
        count = 1 if single else 2 * params.pairs
        ports = free_ports(2 * count)
        nodes = config.pair_nodes(
            [(LOOPBACK, ports[2 * i], ports[2 * i + 1]) for i in range(count)],
            single=single,
            heap=params.heap,
            journal_type=params.journal_type,
            stomp_consumer_credit=max(params.consumer_window_size, 1024),
        )
        workdir.mkdir(parents=True, exist_ok=True)
        cluster = ArtemisCluster(topology, workdir, nodes)

        def build(c: ProcessCluster) -> None:
            with ThreadPoolExecutor(max_workers=2) as pool:
                list(pool.map(lambda n: self._create_instance(workdir, n), nodes))
            processes = [
                c.add(
                    ManagedProcess(
                        name=f"artemis {node.name}",
                        cmd=[str(workdir / node.name / "bin" / "artemis"), "run"],
                        log_path=workdir / f"{node.name}.log",
                        # Empty JAVA_ARGS: artemis.profile's own (with its -Xmx) applies.
                        env={"JAVA_ARGS": "", "ARTEMIS_INSTANCE": str(workdir / node.name)},
                        ready=lambda node=node: port_open(node.host, node.http_port),  # type: ignore[misc]
                        data_dir=workdir / node.name / node.data_dir,
                    )
                )
                for node in nodes
            ]
            for node, process in zip(nodes, processes, strict=True):
                self._wait_ready(node, process)
            c.endpoints = config.endpoints_for(nodes)

        return start_cluster(cluster, build)

    @staticmethod
    def _create_instance(workdir: Path, node: config.NodeConfig) -> None:
        instance = workdir / node.name
        artemis = str(distribution_home() / "bin" / "artemis")
        run_checked(
            config.create_command(artemis, str(instance), node),
            f"artemis create for {node.name}",
            timeout=180,
            env={**os.environ, "JAVA_ARGS": CREATE_JAVA_ARGS},
        )
        (instance / "etc" / "broker.xml").write_text(config.render_broker_xml(node))

    @staticmethod
    def _wait_ready(node: config.NodeConfig, process: ManagedProcess) -> None:
        if node.role == "backup":
            what = f"Artemis backup {node.name} (replica of {node.group})"
            ready = functools.partial(log_contains, process.log_path, BACKUP_SYNCHRONIZED)
        else:
            what = f"Artemis broker {node.name} ({node.address})"
            ready = functools.partial(port_open, node.host, node.port)
        wait_until(ready, what, START_TIMEOUT, process)
        wait_until(
            lambda: port_open(node.host, node.http_port),
            f"Artemis management of {node.name} ({node.http_address})",
            START_TIMEOUT,
            process=process,
        )
