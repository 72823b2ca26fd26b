"""Pulsar configuration shared by the local deployment and the AWS recipe.

Both render the same templates (``templates/*.j2``) and build the same JVM command lines;
only addresses, paths and sizes (:class:`Sizes`) differ. The pinned release is the one in
``pom.xml``, which unpacks the official server distribution from Maven Central.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import dataclass, field, fields
from functools import cache
from pathlib import Path
from typing import Any

from brokers import templating

POM = Path(__file__).resolve().parent / "pom.xml"
_NS = {"m": "http://maven.apache.org/POM/4.0.0"}

#: Main classes of the processes of a Pulsar cluster (as ``bin/pulsar`` starts them).
MAIN = {
    "zookeeper": "org.apache.zookeeper.server.quorum.QuorumPeerMain",
    "bookie": "org.apache.bookkeeper.server.Main",
    "broker": "org.apache.pulsar.PulsarBrokerStarter",
    "standalone": "org.apache.pulsar.PulsarStandaloneStarter",
    "init": "org.apache.pulsar.PulsarClusterMetadataSetup",
}

#: JVM options ``bin/pulsar`` passes on Java 17 (Netty and BookKeeper need the opens).
_OPENS = (
    "java.base/java.io",
    "java.base/java.util.zip",
    "java.base/java.nio",
    "java.base/jdk.internal.misc",
    "java.base/sun.net",
    "java.management/sun.management",
    "jdk.management/com.sun.management.internal",
    "java.base/jdk.internal.platform",
)


@cache
def version() -> str:
    """The Pulsar release pinned in ``pom.xml``."""
    root = ET.parse(POM).getroot()
    value = root.findtext("m:properties/m:pulsar.version", namespaces=_NS)
    assert value, f"{POM} has no pulsar.version property"
    return value


def distribution_name() -> str:
    return f"apache-pulsar-{version()}"


@dataclass(frozen=True)
class Sizes:
    """Heaps, caches and thread counts: small on a laptop, production-like on AWS."""

    zookeeper_heap: str = "128m"
    bookie_heap: str = "256m"
    bookie_direct: str = "256m"
    broker_heap: str = "512m"
    broker_direct: str = "256m"
    standalone_heap: str = "768m"
    standalone_direct: str = "512m"
    write_cache_mb: int = 16
    read_cache_mb: int = 16
    rocksdb_block_cache_mb: int = 16
    journal_prealloc_mb: int = 16
    ledger_cache_mb: int = 64
    bookie_threads: int = 2
    #: Broker IO/worker/BookKeeper-client threads; None keeps Pulsar's defaults (per core).
    broker_threads: int | None = 2
    auto_recovery: bool = False
    shutdown_timeout_ms: int = 10_000


@dataclass(frozen=True)
class ZooKeeperServer:
    id: int
    host: str
    peer_port: int = 2888
    election_port: int = 3888


@dataclass(frozen=True)
class Quorum:
    """Ensemble size, write quorum and ack quorum of new ledgers."""

    ensemble: int
    write: int
    ack: int

    def __str__(self) -> str:
        return f"{self.ensemble}/{self.write}/{self.ack}"


#: The safe default of docs/measurement.md §6 (three bookies), and the only one a single bookie allows.
REPLICATED = Quorum(3, 3, 2)
UNREPLICATED = Quorum(1, 1, 1)


@dataclass(frozen=True)
class BrokerConf:
    cluster_name: str
    metadata_store: str
    broker_port: int
    web_port: int
    bind: str
    advertised: str
    quorum: Quorum
    load_balancer: bool
    sizes: Sizes = field(default_factory=Sizes)


def _broker_values(conf: BrokerConf) -> dict[str, Any]:
    """Every field of ``conf`` (its sizes as they are), the version and the quorum's parts."""
    return {
        **{f.name: getattr(conf, f.name) for f in fields(conf)},
        "version": version(),
        "ensemble": conf.quorum.ensemble,
        "write_quorum": conf.quorum.write,
        "ack_quorum": conf.quorum.ack,
    }


def render_broker(conf: BrokerConf) -> str:
    return templating.render(__file__, "broker.conf.j2", **_broker_values(conf))


def render_standalone(conf: BrokerConf) -> str:
    """The standalone's file: broker settings plus the storage settings of its bookies."""
    return templating.render(__file__, "standalone.conf.j2", **_broker_values(conf))


def render_bookie(
    index: int,
    port: int,
    advertised: str,
    zookeeper: list[str],
    data_dir: str,
    sizes: Sizes,
    listening_interface: str = "",
) -> str:
    return templating.render(
        __file__,
        "bookkeeper.conf.j2",
        version=version(),
        index=index,
        port=port,
        advertised=advertised,
        listening_interface=listening_interface,
        zookeeper=zookeeper,
        journal_dir=f"{data_dir}/journal",
        ledger_dir=f"{data_dir}/ledgers",
        sizes=sizes,
    )


def render_zookeeper(
    data_dir: str, client_port: int, bind: str, servers: list[ZooKeeperServer]
) -> str:
    return templating.render(
        __file__,
        "zookeeper.conf.j2",
        version=version(),
        data_dir=data_dir,
        client_port=client_port,
        bind=bind,
        servers=servers,
    )


def render_unit(role: str, home: str, command: str) -> str:
    return templating.render(
        __file__, "pulsar.service.j2", version=version(), role=role, home=home, command=command
    )


def jvm_options(
    home: Path | str, direct: str | None = None, log_dir: Path | str = "/var/log/pulsar"
) -> list[str]:
    """System properties and opens of every Pulsar JVM (logging to stdout)."""
    options = [
        f"-Dlog4j.configurationFile={home}/conf/log4j2.yaml",
        f"-Dpulsar.log.dir={log_dir}",
        "-Dlog4j.shutdownHookEnabled=false",
        "-Dpulsar.log.root.level=info",
        "-Djute.maxbuffer=10485760",
        "-Djava.net.preferIPv4Stack=true",
        "-Dzookeeper.clientTcpKeepAlive=true",
        "-Dio.netty.tryReflectionSetAccessible=true",
        "-Dbookkeeper.metadata.bookie.drivers="
        "org.apache.pulsar.metadata.bookkeeper.PulsarMetadataBookieDriver",
        "-Dbookkeeper.metadata.client.drivers="
        "org.apache.pulsar.metadata.bookkeeper.PulsarMetadataClientDriver",
        "-XX:+ExitOnOutOfMemoryError",
    ]
    options += [f"--add-opens={module}=ALL-UNNAMED" for module in _OPENS]
    if direct:
        options.append(f"-XX:MaxDirectMemorySize={direct}")
    return options


def metadata_setup_args(
    cluster_name: str, zookeeper: list[str], web_url: str, broker_url: str
) -> list[str]:
    """Arguments of ``PulsarClusterMetadataSetup`` (cluster, tenants, BookKeeper layout)."""
    store = "zk:" + ",".join(zookeeper)
    return [
        "--cluster",
        cluster_name,
        "--metadata-store",
        store,
        "--configuration-metadata-store",
        store,
        "--web-service-url",
        web_url,
        "--broker-service-url",
        broker_url,
    ]
