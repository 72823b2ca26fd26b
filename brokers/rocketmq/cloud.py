"""RocketMQ nodes on AWS (docs/measurement.md §6): a name server and three master-slave pairs, with a gRPC
proxy next to each master. Configuration comes from the same templates as the local
cluster; only addresses, paths and sizes differ. The jars are fetched with the same
``pom.xml`` from Maven Central; every process is a systemd unit.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from brokers.base import Endpoints
from brokers.cloud import CloudRecipe, machine_java_command
from brokers.rocketmq.config import (
    MAIN,
    POM,
    BrokerNode,
    Sizes,
    jvm_options,
    main_args,
    render_broker,
    render_namesrv,
    render_proxy,
    render_unit,
)
from brokers.rocketmq.params import RocketMQParams

HOME = "/opt/rocketmq"
CONF_DIR = "/etc/rocketmq"
DATA_DIR = "/data"
NAMESRV_PORT = 9876
BROKER_PORT = 10911
HA_PORT = 10912
PROXY_GRPC_PORT = 8081
PROXY_REMOTING_PORT = 8080
#: r5.2xlarge (8 vCPU, 64 GiB): the rest of the memory is page cache for the commit log.
AWS_SIZES = Sizes(
    namesrv_heap="2g",
    broker_heap="8g",
    broker_direct="8g",
    proxy_heap="4g",
    proxy_direct="2g",
    commitlog_file_mb=1024,
    retention_hours=48,
    send_threads=16,
)


def broker_name(index: int) -> str:
    return f"broker-{chr(ord('a') + index)}"


def java_line(role: str, heap: str, direct: str | None, conf: str) -> str:
    args, jvm = main_args(role, conf), jvm_options(HOME, direct)
    return shlex.join(machine_java_command(MAIN[role], f"{HOME}/lib/*", heap, args, jvm))


class RocketMQCloud(CloudRecipe[RocketMQParams]):
    data_dir = DATA_DIR

    def install_commands(self) -> list[str]:
        pom = Path(POM).read_text()
        return [
            "apt-get update -y",
            "DEBIAN_FRONTEND=noninteractive apt-get install -y openjdk-17-jre-headless maven",
            f"mkdir -p {HOME}/lib {CONF_DIR} {DATA_DIR}/rocketmq",
            f"cat > {HOME}/pom.xml <<'POM_EOF'\n{pom}POM_EOF",
            f"mvn -B -q -f {HOME}/pom.xml dependency:copy-dependencies "
            f"-DincludeScope=runtime -DoutputDirectory={HOME}/lib",
        ]

    def node_files(
        self, role: str, index: int, cluster: dict[str, list[str]], params: RocketMQParams
    ) -> dict[str, str]:
        me = cluster[role][index]
        namesrv = [f"{host}:{NAMESRV_PORT}" for host in cluster["namesrv"]]
        sizes = AWS_SIZES
        if role == "namesrv":
            conf = f"{CONF_DIR}/namesrv.conf"
            return {
                conf: render_namesrv(NAMESRV_PORT, "0.0.0.0"),
                _unit_path("namesrv"): render_unit(
                    role, HOME, java_line("namesrv", sizes.namesrv_heap, None, conf)
                ),
            }
        if role not in ("master", "slave"):
            raise ValueError(f"RocketMQ has no role {role!r} (namesrv, master, slave)")
        settings = (
            params if isinstance(params, RocketMQParams) else RocketMQParams.model_validate({})
        )
        has_slave = index < len(cluster.get("slave", []))
        node = BrokerNode(
            broker_name=broker_name(index),
            broker_id=0 if role == "master" else 1,
            role=settings.broker_role(has_slave) if role == "master" else "SLAVE",
            ip=me,
            bind="0.0.0.0",
            port=BROKER_PORT,
            ha_port=HA_PORT,
            store=f"{DATA_DIR}/rocketmq/store",
        )
        conf = f"{CONF_DIR}/broker.conf"
        files = {
            conf: render_broker(node, settings.flush_disk_type, namesrv, sizes),
            _unit_path("broker"): render_unit(
                role, HOME, java_line("broker", sizes.broker_heap, sizes.broker_direct, conf)
            ),
        }
        if role == "master":
            proxy_conf = f"{CONF_DIR}/proxy.json"
            files[proxy_conf] = render_proxy(namesrv, PROXY_GRPC_PORT, PROXY_REMOTING_PORT)
            files[_unit_path("proxy")] = render_unit(
                "proxy", HOME, java_line("proxy", sizes.proxy_heap, sizes.proxy_direct, proxy_conf)
            )
        return files

    def start_commands(self, role: str, index: int, cluster: dict[str, list[str]]) -> list[str]:
        units = {"namesrv": ["namesrv"], "master": ["broker", "proxy"], "slave": ["broker"]}
        return ["systemctl daemon-reload"] + [
            f"systemctl enable --now rocketmq-{unit}" for unit in units[role]
        ]

    def ports(self) -> list[int]:
        return [
            NAMESRV_PORT,
            BROKER_PORT - 2,
            BROKER_PORT,
            HA_PORT,
            PROXY_REMOTING_PORT,
            PROXY_GRPC_PORT,
        ]

    def endpoints(self, cluster: dict[str, list[str]]) -> Endpoints:
        return Endpoints(
            hosts=tuple(f"{m}:{PROXY_GRPC_PORT}" for m in cluster["master"]),
            extra=(("namesrv", ";".join(f"{n}:{NAMESRV_PORT}" for n in cluster["namesrv"])),),
        )


def _unit_path(unit: str) -> str:
    return f"/etc/systemd/system/rocketmq-{unit}.service"
