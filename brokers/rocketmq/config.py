"""RocketMQ configuration shared by the local deployment and the AWS recipe.

Both render the same templates (``templates/*.j2``) and start the same main classes with
the same JVM options; only addresses, paths and sizes (:class:`Sizes`) differ. The pinned
release is the one in ``pom.xml`` (name server, broker, proxy and tools, one version).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from dataclasses import asdict, dataclass
from functools import cache
from pathlib import Path

from brokers import templating

POM = Path(__file__).resolve().parent / "pom.xml"
_NS = {"m": "http://maven.apache.org/POM/4.0.0"}
CLUSTER = "brokerbench"

MAIN = {
    "namesrv": "org.apache.rocketmq.namesrv.NamesrvStartup",
    "broker": "org.apache.rocketmq.broker.BrokerStartup",
    "proxy": "org.apache.rocketmq.proxy.ProxyStartup",
}


@cache
def version() -> str:
    """The RocketMQ release pinned in ``pom.xml``."""
    root = ET.parse(POM).getroot()
    value = root.findtext("m:properties/m:rocketmq.version", namespaces=_NS)
    assert value, f"{POM} has no rocketmq.version property"
    return value


@dataclass(frozen=True)
class Sizes:
    """Heaps and file sizes: small on a laptop, production-like on AWS."""

    namesrv_heap: str = "256m"
    broker_heap: str = "512m"
    broker_direct: str = "256m"
    proxy_heap: str = "512m"
    proxy_direct: str = "256m"
    commitlog_file_mb: int = 128
    retention_hours: int = 4
    send_threads: int = 4


@dataclass(frozen=True)
class BrokerNode:
    """One broker process: a master (id 0) or its slave (id 1) of ``broker_name``."""

    broker_name: str
    broker_id: int
    role: str  # SYNC_MASTER, ASYNC_MASTER or SLAVE
    ip: str
    bind: str
    port: int
    ha_port: int
    store: str


def render_namesrv(port: int, bind: str) -> str:
    return templating.render(__file__, "namesrv.conf.j2", version=version(), port=port, bind=bind)


def render_broker(node: BrokerNode, flush: str, namesrv: list[str], sizes: Sizes) -> str:
    return templating.render(
        __file__,
        "broker.conf.j2",
        version=version(),
        cluster=CLUSTER,
        flush=flush,
        namesrv=namesrv,
        sizes=sizes,
        **asdict(node),
    )


def render_proxy(namesrv: list[str], grpc_port: int, remoting_port: int) -> str:
    return templating.render(
        __file__,
        "proxy.json.j2",
        cluster=CLUSTER,
        namesrv=namesrv,
        grpc_port=grpc_port,
        remoting_port=remoting_port,
    )


def render_unit(role: str, home: str, command: str) -> str:
    return templating.render(
        __file__, "rocketmq.service.j2", version=version(), role=role, home=home, command=command
    )


def jvm_options(node_home: Path | str, direct: str | None = None) -> list[str]:
    """Options of every RocketMQ JVM; its logs go under ``node_home``/logs."""
    options = [
        f"-Duser.home={node_home}",
        f"-Drocketmq.home.dir={node_home}",
        "-Djava.net.preferIPv4Stack=true",
        "-XX:-OmitStackTraceInFastThrow",
        # Unmapping commit-log files reaches into NIO internals.
        "--add-opens=java.base/java.nio=ALL-UNNAMED",
        "--add-opens=java.base/sun.nio.ch=ALL-UNNAMED",
        "--add-exports=java.base/jdk.internal.ref=ALL-UNNAMED",
        "-XX:+ExitOnOutOfMemoryError",
    ]
    if direct:
        options.append(f"-XX:MaxDirectMemorySize={direct}")
    return options


def main_args(role: str, conf: Path | str) -> list[str]:
    """Command-line arguments of a role's main class for its configuration file."""
    if role == "proxy":
        return ["-pc", str(conf), "-pm", "cluster"]
    return ["-c", str(conf)]
