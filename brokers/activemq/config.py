"""ActiveMQ Classic's broker configuration and command line, shared by local and AWS nodes.

The Debian package ``activemq`` provides the broker (``/usr/share/activemq``); its
instance configuration is adapted in ``templates/activemq.xml.j2``. brokerbench never uses
the package's service or instance directories: each broker gets its own base directory
(``conf/``, ``data/``, ``tmp/``) and is started directly with an explicit heap.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from brokers import templating
from brokers.cloud import machine_java_command
from brokers.jvm import java_command

PACKAGE = "activemq"
HOME = Path("/usr/share/activemq")
RUN_JAR = HOME / "bin" / "activemq.jar"
#: Libraries the STOMP map-message translator needs (the ``libactivemq-java`` dependencies
#: libxstream-java and libjettison-java), added as the start script's ``activemq.classpath``.
EXTRA_JARS = (Path("/usr/share/java/xstream.jar"), Path("/usr/share/java/jettison.jar"))
MAIN_CLASS = "org.apache.activemq.console.Main"
USER = "brokerbench"
PASSWORD = "brokerbench"

#: What the broker start script of the package passes to Java 9+.
JVM_OPENS = (
    "--add-reads=java.xml=java.logging",
    "--add-opens=java.base/java.security=ALL-UNNAMED",
    "--add-opens=java.base/java.net=ALL-UNNAMED",
    "--add-opens=java.base/java.lang=ALL-UNNAMED",
    "--add-opens=java.base/java.util=ALL-UNNAMED",
    "--add-opens=java.naming/javax.naming.spi=ALL-UNNAMED",
    "--add-opens=java.rmi/sun.rmi.transport.tcp=ALL-UNNAMED",
    "--add-opens=java.base/java.util.concurrent=ALL-UNNAMED",
    "--add-opens=java.base/java.util.concurrent.atomic=ALL-UNNAMED",
    "--add-exports=java.base/sun.net.www.protocol.http=ALL-UNNAMED",
    "--add-exports=java.base/sun.net.www.protocol.https=ALL-UNNAMED",
    "--add-exports=java.base/sun.net.www.protocol.jar=ALL-UNNAMED",
    "--add-exports=jdk.xml.dom/org.w3c.dom.html=ALL-UNNAMED",
    "--add-exports=jdk.naming.rmi/com.sun.jndi.url.rmi=ALL-UNNAMED",
)


@dataclass(frozen=True)
class NodeConfig:
    """The one ActiveMQ Classic broker: identity, address, directories and sizes."""

    name: str
    host: str
    port: int  # STOMP
    base_dir: str
    heap: str = "512m"
    store_limit: str = "10 gb"
    temp_limit: str = "2 gb"
    queue_memory_limit: str = "64 mb"

    @property
    def conf_dir(self) -> str:
        return f"{self.base_dir}/conf"

    @property
    def data_dir(self) -> str:
        return f"{self.base_dir}/data"

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


def render_activemq_xml(node: NodeConfig, password: str = PASSWORD) -> str:
    return templating.render(__file__, "activemq.xml.j2", node=node, user=USER, password=password)


def write_configuration(node: NodeConfig) -> Path:
    """Create the broker's base directory with its rendered configuration."""
    conf = Path(node.conf_dir)
    conf.mkdir(parents=True, exist_ok=True)
    for sub in ("data", "tmp"):
        (Path(node.base_dir) / sub).mkdir(exist_ok=True)
    for name, text in configuration_files(node).items():
        Path(name).write_text(text)
    return conf / "activemq.xml"


def configuration_files(node: NodeConfig, password: str = PASSWORD) -> dict[str, str]:
    """Absolute path → content of the broker's configuration files (``USER`` gets ``password``)."""
    return {
        f"{node.conf_dir}/activemq.xml": render_activemq_xml(node, password),
        f"{node.conf_dir}/log4j.properties": templating.render(__file__, "log4j.properties.j2"),
    }


def broker_command(node: NodeConfig, java: str | None = None) -> list[str]:
    """The broker's Java command line, as the package's start script builds it.

    ``java`` names the Java binary on another machine (AWS); by default the local one.
    """
    extra_jars = [str(j) for j in EXTRA_JARS if java is not None or j.is_file()]
    jvm = [
        *JVM_OPENS,
        f"-Dactivemq.classpath={':'.join([node.conf_dir, *extra_jars])}",
        f"-Dactivemq.home={HOME}",
        f"-Dactivemq.base={node.base_dir}",
        f"-Dactivemq.conf={node.conf_dir}",
        f"-Dactivemq.data={node.data_dir}",
        f"-Djava.io.tmpdir={node.base_dir}/tmp",
        "-Dorg.apache.activemq.UseDedicatedTaskRunner=false",
    ]
    args = ["start", f"xbean:file:{node.conf_dir}/activemq.xml"]
    if java is None:
        return java_command(MAIN_CLASS, [RUN_JAR], node.heap, args=args, jvm=jvm)
    return machine_java_command(MAIN_CLASS, str(RUN_JAR), node.heap, args, jvm, java=java)
