"""ActiveMQ Classic: configuration, command line and AWS recipe without a server, then the
STOMP adapter and settings read-back against the Debian package's broker (the whole run
is the conformance suite's)."""

from __future__ import annotations

import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from brokers import registry
from brokers.activemq import SYSTEM, config
from brokers.activemq.adapter import parse_map_json
from brokers.activemq.cloud import ActiveMQCloud
from brokers.activemq.params import ActiveMQParams
from brokers.base import Destination, Endpoints, LocalCluster
from brokers.errors import BrokerConnectionError
from brokers.local import ProcessCluster, free_ports
from tests.conftest import LocalBrokers

pytestmark = pytest.mark.activemq

AMQ = {"amq": "http://activemq.apache.org/schema/core"}


def broker_element(node: config.NodeConfig) -> ET.Element:
    root = ET.fromstring(config.render_activemq_xml(node))
    broker = root.find("amq:broker", AMQ)
    assert broker is not None
    return broker


# -- without a server -----------------------------------------------------------------------


def test_defaults_are_the_safe_settings() -> None:
    params = ActiveMQParams()
    assert params.prefetch == 100
    assert params.heap == "512m"
    with pytest.raises(ValueError, match="prefetch_size"):
        ActiveMQParams.model_validate({"prefetch_size": 10})


def test_configuration_is_persistent_synced_and_stomp_on_loopback(tmp_path: Path) -> None:
    node = config.NodeConfig("brokerbench", "127.0.0.1", 61999, str(tmp_path / "b"))
    broker = broker_element(node)
    assert broker.get("persistent") == "true"
    assert broker.get("dataDirectory") == f"{tmp_path}/b/data"
    kahadb = broker.find("amq:persistenceAdapter/amq:kahaDB", AMQ)
    assert kahadb is not None
    assert kahadb.get("journalDiskSyncStrategy") == "always"
    assert kahadb.get("directory") == f"{tmp_path}/b/data/kahadb"
    (connector,) = broker.findall("amq:transportConnectors/amq:transportConnector", AMQ)
    assert (connector.get("uri") or "").startswith("stomp+nio://127.0.0.1:61999?")
    assert broker.find("amq:plugins/amq:statisticsBrokerPlugin", AMQ) is not None
    auth = broker.find("amq:plugins/amq:simpleAuthenticationPlugin", AMQ)
    assert auth is not None and auth.get("anonymousAccessAllowed") == "false"
    path = config.write_configuration(node)
    assert path == tmp_path / "b" / "conf" / "activemq.xml"
    assert (tmp_path / "b" / "conf" / "log4j.properties").is_file()
    assert (tmp_path / "b" / "data").is_dir()


def test_broker_command_has_explicit_heap_and_own_base_dir() -> None:
    node = config.NodeConfig("b", "127.0.0.1", 1, "/work/amq", heap="384m")
    cmd = config.broker_command(node, java="/usr/bin/java")
    assert cmd[:3] == ["/usr/bin/java", "-Xmx384m", "-Xms384m"]
    assert "-Dactivemq.base=/work/amq" in cmd
    assert "-Dactivemq.data=/work/amq/data" in cmd
    assert cmd[-3:] == [config.MAIN_CLASS, "start", "xbean:file:/work/amq/conf/activemq.xml"]
    assert not any("/var/lib/activemq" in part for part in cmd)


def test_cloud_recipe_uses_the_same_templates() -> None:
    recipe = SYSTEM.cloud
    assert isinstance(recipe, ActiveMQCloud)
    assert SYSTEM.reference_topology.roles == {"broker": 1}
    files = recipe.node_files("broker", 0, {"broker": ["10.0.0.9"]}, ActiveMQParams())
    xml = next(v for k, v in files.items() if k.endswith("/activemq.xml"))
    assert "stomp+nio://10.0.0.9:61613" in xml
    unit = files["/etc/systemd/system/brokerbench-activemq.service"]
    assert "-Xmx16g" in unit and "org.apache.activemq.console.Main" in unit
    assert any("activemq" in c for c in recipe.install_commands())
    assert recipe.ports() == [61613]
    endpoints = recipe.endpoints({"broker": ["10.0.0.9"]})
    assert endpoints.hosts == ("10.0.0.9:61613",) and endpoints.get("user") == config.USER


def test_statistics_map_is_parsed() -> None:
    body = (
        b'{"map":{"entry":[{"string":"storeLimit","long":10737418240},'
        b'{"string":["dataDirectory","\\/srv\\/data"]},{"string":["stomp",""]},'
        b'{"string":"storePercentUsage","int":0}]}}'
    )
    assert parse_map_json(body) == {
        "storeLimit": 10737418240,
        "dataDirectory": "/srv/data",
        "stomp": "",
        "storePercentUsage": 0,
    }


def test_report_says_there_is_no_replication() -> None:
    system = registry.get("activemq")
    assert any("No replication" in caveat for caveat in system.caveats)
    assert system.local is not None and system.local.topologies == ("single",)
    assert "activemq" in system.local.debian_packages


def test_unreachable_broker_fails_fast_naming_host() -> None:
    (port,) = free_ports(1)
    started = time.monotonic()
    with pytest.raises(BrokerConnectionError, match=f"127.0.0.1:{port}") as err:
        SYSTEM.connect(Endpoints(hosts=(f"127.0.0.1:{port}",)), ActiveMQParams(), Destination("q"))
    assert time.monotonic() - started < 30
    assert "\n" not in str(err.value)


# -- against a real broker --------------------------------------------------------------------


@pytest.fixture(scope="module")
def broker(local_brokers: LocalBrokers) -> LocalCluster:
    return local_brokers.get(SYSTEM, "single")


@pytest.mark.slow
def test_describe_reads_back_version_and_store(broker: ProcessCluster, tmp_path: Path) -> None:
    described = SYSTEM.describe(broker.endpoints, ActiveMQParams())
    assert described["version"].startswith("5.17")
    assert described["replicated"] is False
    assert described["broker_name"] == "brokerbench"
    assert str(described["data_directory"]).endswith("/broker/data")
    assert "/var/lib/activemq" not in str(described["data_directory"])
    assert described["store_limit_bytes"] == 10 * 1024**3
