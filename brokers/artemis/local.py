"""Artemis on this machine: the distribution in the cache, instances made by ``artemis create``.

``install`` fetches ``org.apache.activemq:apache-artemis:<version>:bin:tar.gz`` with Maven
(``pom.xml`` next to this file) and unpacks it into ``cache_dir("artemis")``. ``start``
creates one instance per node under the work directory, renders its ``broker.xml``,
starts ``bin/artemis run`` for every node and waits until the live brokers accept
connections and every backup has synchronised its replica.
"""

from __future__ import annotations

import os
import shutil
import tarfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from brokers.artemis import config
from brokers.base import LocalDeployment
from brokers.errors import BrokerUnavailable
from brokers.jvm import cache_dir, jvm_missing, maven_fetch
from brokers.local import (
    LOOPBACK,
    ManagedProcess,
    NodeHosts,
    ProcessCluster,
    free_ports,
    port_open,
    run_checked,
    start_cluster,
    wait_until,
)

POM = Path(__file__).parent / "pom.xml"
#: Heap of the short-lived ``artemis create`` JVM.
CREATE_JAVA_ARGS = "-Xmx256m -Xms64m -XX:+UseSerialGC"
START_TIMEOUT = 180.0
#: Logged by a backup once its replica of the live journal is complete.
BACKUP_SYNCHRONIZED = "AMQ221024"


def distribution_home() -> Path:
    return cache_dir("artemis") / config.DISTRIBUTION


def _log_contains(path: Path, marker: str) -> bool:
    try:
        return marker in path.read_text(errors="replace")
    except OSError:
        return False


class ArtemisLocal(LocalDeployment):
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

    def start(
        self, topology: str, params: Any, workdir: Path, hosts: NodeHosts | None = None
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
        cluster = ProcessCluster(topology, workdir)

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
            ready: Callable[[], bool] = lambda: _log_contains(  # noqa: E731
                process.log_path, BACKUP_SYNCHRONIZED
            )
        else:
            what = f"Artemis broker {node.name} ({node.address})"
            ready = lambda: port_open(node.host, node.port)  # noqa: E731
        wait_until(ready, what, START_TIMEOUT, log_path=process.log_path, process=process)
        wait_until(
            lambda: port_open(node.host, node.http_port),
            f"Artemis management of {node.name} ({node.http_address})",
            START_TIMEOUT,
            log_path=process.log_path,
            process=process,
        )
