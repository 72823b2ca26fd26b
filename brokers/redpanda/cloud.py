"""Redpanda nodes on AWS: the pinned release from Redpanda's Debian repository, configured
from ``templates/redpanda.yaml.j2`` (per node) and ``templates/bootstrap.yaml.j2``
(cluster properties applied when the three seeds first form the cluster).
"""

from __future__ import annotations

from brokers import templating
from brokers.cloud import CloudFaults, CloudRecipe
from brokers.redpanda.params import ADMIN_PORT, RedpandaParams

#: The pinned release (Debian package version ``<this>-1``).
REDPANDA_VERSION = "24.2.7"
SETUP_SCRIPT = "https://dl.redpanda.com/nzc4ZYQK3WRGd9sy/redpanda/cfg/setup/bash.deb.sh"
CONF_DIR = "/etc/redpanda"
#: The node's data volume (the package's home of data and core dumps).
VOLUME = "/var/lib/redpanda"
DATA_DIR = f"{VOLUME}/data"
COREDUMP_DIR = f"{VOLUME}/coredump"
KAFKA_PORT = 9092
RPC_PORT = 33145
ROLE = "broker"


def render_node_config(
    advertised_host: str, seeds: list[str], bind: str = "0.0.0.0", data_dir: str = DATA_DIR
) -> str:
    return templating.render(
        __file__,
        "redpanda.yaml.j2",
        redpanda_version=REDPANDA_VERSION,
        data_dir=data_dir,
        coredump_dir=COREDUMP_DIR,
        seeds=seeds,
        bind=bind,
        advertised_host=advertised_host,
        kafka_port=KAFKA_PORT,
        rpc_port=RPC_PORT,
        admin_port=ADMIN_PORT,
    )


def render_bootstrap(replication: int) -> str:
    return templating.render(__file__, "bootstrap.yaml.j2", replication=replication)


class RedpandaCloud(CloudRecipe[RedpandaParams]):
    """One Redpanda broker per node of the ``broker`` role; all of them are seeds."""

    data_dir = VOLUME
    faults = CloudFaults("redpanda.service", (ROLE,))

    def install_commands(self) -> list[str]:
        return [
            "apt-get update -y",
            "DEBIAN_FRONTEND=noninteractive apt-get install -y curl",
            f"curl -1sLf {SETUP_SCRIPT} | bash",
            f"DEBIAN_FRONTEND=noninteractive apt-get install -y redpanda={REDPANDA_VERSION}-1",
        ]

    def node_files(
        self, role: str, index: int, cluster: dict[str, list[str]], params: RedpandaParams
    ) -> dict[str, str]:
        brokers = cluster[ROLE]
        return {
            f"{CONF_DIR}/redpanda.yaml": render_node_config(brokers[index], brokers),
            f"{CONF_DIR}/.bootstrap.yaml": render_bootstrap(min(3, len(brokers))),
        }

    def start_commands(self, role: str, index: int, cluster: dict[str, list[str]]) -> list[str]:
        return [
            f"mkdir -p {DATA_DIR} {COREDUMP_DIR}",
            f"chown -R redpanda:redpanda {CONF_DIR} {VOLUME}",
            "rpk redpanda tune all || true",
            "systemctl enable --now redpanda",
        ]

    def ports(self) -> list[int]:
        return [KAFKA_PORT, RPC_PORT, ADMIN_PORT]
