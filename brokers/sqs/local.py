"""The local stand-in for SQS: one ElasticMQ server (from Maven Central) on a free loopback
port, configured from ``templates/elasticmq.conf.j2``.

Why ElasticMQ rather than moto's server mode: ElasticMQ is a message queue server built
to behave like SQS, while moto is a mock of the AWS API. ElasticMQ enforces the real
service's limits (``sqs-limits = strict``: at most 10 entries per batch call, 256 KiB
messages, visibility timeouts ≤ 12 h), hides received messages for the visibility
timeout and redelivers them afterwards with a growing ``ApproximateReceiveCount``,
long-polls for real (a receive on an empty queue waits up to ``WaitTimeSeconds``), serves
concurrent clients from an asynchronous HTTP server, and can write messages to disk (H2),
so a confirmed send survives a restart. moto keeps messages in the memory of one
Python process behind a global lock — fine for unit tests, not a server to measure.

It is still a stand-in: one process, no replication, and none of the service's network
path; the report says so.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING

from brokers import templating
from brokers.base import Endpoints, LocalDeployment
from brokers.errors import BrokerStartError
from brokers.jvm import cache_dir, java_command, jvm_missing, maven_fetch
from brokers.local import (
    LOOPBACK,
    ManagedProcess,
    NodeHosts,
    ProcessCluster,
    free_ports,
    port_open,
    start_cluster,
    wait_until,
)

if TYPE_CHECKING:
    from brokers.sqs.params import SqsParams

POM = Path(__file__).resolve().parent / "pom.xml"
MAIN_CLASS = "org.elasticmq.server.Main"
HEAP = "384m"
REGION = "us-east-1"
ACCOUNT_ID = "000000000000"
START_TIMEOUT = 120


@cache
def elasticmq_version() -> str:
    """The ElasticMQ version the pom pins."""
    ns = {"m": "http://maven.apache.org/POM/4.0.0"}
    root = ET.parse(POM).getroot()
    for dep in root.iterfind("m:dependencies/m:dependency", ns):
        if dep.findtext("m:artifactId", "", ns).startswith("elasticmq-server"):
            return dep.findtext("m:version", "", ns)
    raise ValueError(f"{POM}: no elasticmq-server dependency")


def jar_dir() -> Path:
    return cache_dir("sqs") / f"elasticmq-{elasticmq_version()}"


def fetched() -> bool:
    return (jar_dir() / ".complete").exists()


def render_config(host: str, port: int, data_dir: str, persist: bool = True) -> str:
    return templating.render(
        __file__,
        "elasticmq.conf.j2",
        host=host,
        port=port,
        region=REGION,
        account_id=ACCOUNT_ID,
        data_dir=data_dir,
        persist=persist,
    )


class ElasticMQLocal(LocalDeployment["SqsParams"]):
    topologies = ("single",)
    debian_packages = ("openjdk-17-jre-headless", "maven")
    stand_in = (
        f"ElasticMQ {elasticmq_version()} (SQS-compatible server; one process, no replication)"
    )

    def missing(self) -> str | None:
        return jvm_missing(f"ElasticMQ {elasticmq_version()}", fetched(), "boto3")

    def install(self, log: Callable[[str], None]) -> None:
        maven_fetch(POM, jar_dir(), log)

    def start(
        self, topology: str, params: SqsParams, workdir: Path, hosts: NodeHosts | None = None
    ) -> ProcessCluster:
        if not fetched():
            raise BrokerStartError(
                f"ElasticMQ jars are missing from {jar_dir()}: run 'brokerbench setup'"
            )
        cluster = ProcessCluster(topology, workdir)
        return start_cluster(cluster, self._build)

    def _build(self, cluster: ProcessCluster) -> None:
        workdir = cluster.workdir
        data = workdir / "data"
        data.mkdir(parents=True, exist_ok=True)
        (port,) = free_ports(1)
        config = workdir / "elasticmq.conf"
        config.write_text(render_config(LOOPBACK, port, str(data)))
        logback = workdir / "logback.xml"
        logback.write_text(templating.render(__file__, "logback.xml.j2", level="INFO"))
        cmd = java_command(
            MAIN_CLASS,
            [jar_dir() / "*"],
            HEAP,
            jvm=[f"-Dconfig.file={config}", f"-Dlogback.configurationFile={logback}"],
        )
        node = cluster.add(
            ManagedProcess(name="elasticmq", cmd=cmd, log_path=workdir / "elasticmq.log")
        )
        cluster.endpoints = Endpoints(
            hosts=(f"{LOOPBACK}:{port}",),
            extra=(
                ("credentials", "dummy"),
                ("region", REGION),
                ("scheme", "http"),
                ("server", f"ElasticMQ {elasticmq_version()} (local stand-in)"),
            ),
        )
        wait_until(
            lambda: port_open(LOOPBACK, port) and _answers(cluster.endpoints),
            f"elasticmq ({LOOPBACK}:{port})",
            START_TIMEOUT,
            process=node,
            interval=0.5,
        )


def _answers(endpoints: Endpoints) -> bool:
    """True once the server answers an SQS call."""
    from brokers.sqs.adapter import client

    try:
        client(endpoints, read_timeout=5).list_queues()
    except Exception:
        return False
    return True
