"""Redpanda: no server can run here, so only what is checkable without one — the system's
registration as AWS-only, its parameters, the configuration templates of its AWS nodes,
and that the Kafka adapters serving it report an unreachable cluster quickly."""

from __future__ import annotations

import time

import pytest
import yaml

from brokers import registry
from brokers.base import Destination, Endpoints
from brokers.errors import BrokerConnectionError
from brokers.kafka import SYSTEM as KAFKA
from brokers.kafka import client
from brokers.local import free_ports
from brokers.redpanda import SYSTEM, TOPIC_CONFIGS
from brokers.redpanda.cloud import REDPANDA_VERSION
from brokers.redpanda.params import RedpandaParams
from tests.conftest import brokerbench

pytestmark = pytest.mark.redpanda

CLUSTER = {"broker": ["10.0.1.11", "10.0.1.12", "10.0.1.13"]}


def test_runs_on_aws_only() -> None:
    system = registry.get("redpanda")
    assert system.local is None and system.cloud is not None
    assert system.reference_topology.roles == {"broker": 3}
    assert system.connect is KAFKA.connect and system.adapters == KAFKA.adapters
    assert system.can_pipeline and system.client(RedpandaParams()) == "confluent-kafka"
    assert any("AWS only" in caveat for caveat in system.caveats)


def test_brokers_command_lists_it_as_aws_only() -> None:
    done = brokerbench("brokers", timeout=120)
    assert done.returncode == 0, done.stderr
    (line,) = [row for row in done.stdout.splitlines() if row.startswith("redpanda")]
    assert "AWS only" in line


def test_params_are_the_safe_settings() -> None:
    params = RedpandaParams()
    assert params.acks == "all" and params.partitions == 64
    assert TOPIC_CONFIGS == {"write.caching": "false"}
    with pytest.raises(ValueError, match="min_insync_replicas"):
        RedpandaParams.model_validate({"min_insync_replicas": 2})


def test_node_config_and_cluster_bootstrap() -> None:
    recipe = SYSTEM.cloud
    assert recipe is not None
    files = recipe.node_files("broker", 1, CLUSTER, RedpandaParams())
    node = yaml.safe_load(files["/etc/redpanda/redpanda.yaml"])["redpanda"]
    assert [s["host"]["address"] for s in node["seed_servers"]] == CLUSTER["broker"]
    assert node["advertised_kafka_api"] == [{"address": "10.0.1.12", "port": 9092}]
    assert node["advertised_rpc_api"] == {"address": "10.0.1.12", "port": 33145}
    assert node["developer_mode"] is False
    bootstrap = yaml.safe_load(files["/etc/redpanda/.bootstrap.yaml"])
    assert bootstrap["default_topic_replications"] == 3
    assert bootstrap["write_caching_default"] == "false"
    assert any(f"redpanda={REDPANDA_VERSION}-1" in c for c in recipe.install_commands())
    assert set(recipe.ports()) == {9092, 33145, 9644}
    assert node["data_directory"].startswith(recipe.data_dir + "/")
    assert recipe.endpoints(CLUSTER).hosts == tuple(f"{a}:9092" for a in CLUSTER["broker"])


@pytest.mark.parametrize("kafka_client", ["confluent-kafka", "kafka-python"])
def test_unreachable_cluster_is_one_line_naming_the_host(
    monkeypatch: pytest.MonkeyPatch, kafka_client: str
) -> None:
    monkeypatch.setattr(client, "BOOTSTRAP_TIMEOUT", 2.0)
    (port,) = free_ports(1)
    endpoints = Endpoints(hosts=(f"127.0.0.1:{port}",))
    params = RedpandaParams(client=kafka_client)
    started = time.monotonic()
    with pytest.raises(BrokerConnectionError, match=f"127.0.0.1:{port}"):
        SYSTEM.describe(endpoints, params)
    with pytest.raises(BrokerConnectionError, match=f"127.0.0.1:{port}"):
        SYSTEM.connect(endpoints, params, Destination("t"))
    assert time.monotonic() - started < 30
