"""ActiveMQ Artemis: configuration, command lines and AWS recipe without a server, then the
STOMP adapter, settings read-back and a failover against a real live–backup
replication pair made by ``artemis create`` from the Maven Central distribution."""

from __future__ import annotations

import re
import time
import xml.etree.ElementTree as ET

import pytest

from brokers import registry
from brokers.artemis import SYSTEM, config
from brokers.artemis.cloud import ArtemisCloud
from brokers.artemis.jolokia import Jolokia
from brokers.artemis.local import POM
from brokers.artemis.params import ArtemisParams
from brokers.base import Destination, Endpoints
from brokers.errors import BrokerConnectionError
from brokers.local import ProcessCluster, free_ports
from tests.conftest import LocalBrokers
from tests.support import receive_bodies

pytestmark = pytest.mark.artemis

NS = {"a": "urn:activemq:core"}


def core(node: config.NodeConfig) -> ET.Element:
    root = ET.fromstring(config.render_broker_xml(node))
    element = root.find("a:core", NS)
    assert element is not None
    return element


def text(element: ET.Element, path: str) -> str | None:
    return element.findtext(path, namespaces=NS)


# -- without a server -----------------------------------------------------------------------


def test_defaults_are_the_safe_settings() -> None:
    params = ArtemisParams()
    assert params.consumer_window_size == 10240
    assert params.pairs == 1
    assert params.heap == "512m"
    with pytest.raises(ValueError, match="consumer_window"):
        ArtemisParams.model_validate({"consumer_window": 1})
    with pytest.raises(ValueError):
        ArtemisParams(pairs=3)


def test_pom_pins_the_version_the_code_uses() -> None:
    ns = {"m": "http://maven.apache.org/POM/4.0.0"}
    root = ET.parse(POM).getroot()
    (dependency,) = root.iterfind(".//m:dependencies/m:dependency", ns)
    assert dependency.findtext("m:groupId", namespaces=ns) == "org.apache.activemq"
    assert dependency.findtext("m:artifactId", namespaces=ns) == "apache-artemis"
    assert dependency.findtext("m:classifier", namespaces=ns) == "bin"
    assert dependency.findtext("m:version", namespaces=ns) == config.ARTEMIS_VERSION
    assert re.fullmatch(r"2\.3\d\.\d+", config.ARTEMIS_VERSION)


def test_replication_pair_uses_static_connectors_and_groups() -> None:
    live, backup = config.pair_nodes([("127.0.0.1", 1001, 2001), ("127.0.0.1", 1002, 2002)])
    assert (live.name, live.role, backup.name, backup.role) == (
        "live0",
        "live",
        "backup0",
        "backup",
    )
    live_xml, backup_xml = core(live), core(backup)
    assert text(live_xml, "a:persistence-enabled") == "true"
    assert text(live_xml, "a:journal-sync-non-transactional") == "true"
    assert text(live_xml, "a:journal-datasync") == "true"
    assert text(live_xml, "a:ha-policy/a:replication/a:primary/a:group-name") == "pair0"
    assert text(backup_xml, "a:ha-policy/a:replication/a:backup/a:group-name") == "pair0"
    assert live_xml.find("a:ha-policy/a:replication/a:backup", NS) is None
    for xml in (live_xml, backup_xml):
        assert xml.find("a:broadcast-groups", NS) is None
        assert xml.find("a:discovery-groups", NS) is None
        refs = xml.findall(".//a:cluster-connection/a:static-connectors/a:connector-ref", NS)
        assert [r.text for r in refs] == ["peer0"]
    (acceptor,) = live_xml.findall("a:acceptors/a:acceptor", NS)
    assert (acceptor.text or "").startswith("tcp://127.0.0.1:1001?protocols=CORE,STOMP")
    assert text(live_xml, "a:connectors/a:connector[@name='peer0']") == "tcp://127.0.0.1:1002"
    settings = live_xml.find("a:address-settings/a:address-setting[@match='#']", NS)
    assert settings is not None
    assert text(settings, "a:max-delivery-attempts") == "-1"
    assert text(settings, "a:auto-delete-queues") == "false"


def test_single_broker_has_no_ha_policy() -> None:
    (node,) = config.pair_nodes([("127.0.0.1", 1001, 2001)], single=True)
    xml = core(node)
    assert node.role == "single"
    assert xml.find("a:ha-policy", NS) is None
    assert xml.find("a:cluster-connections", NS) is None
    assert text(xml, "a:persistence-enabled") == "true"
    with pytest.raises(ValueError, match="pairs"):
        config.pair_nodes([("h", 1, 2)] * 3)


def test_create_command_is_non_interactive_with_explicit_heap() -> None:
    nodes = config.pair_nodes([("127.0.0.1", 1001, 2001), ("127.0.0.1", 1002, 2002)], heap="384m")
    cmd = config.create_command("/opt/artemis/bin/artemis", "/work/backup0", nodes[1])
    assert cmd[:2] == ["/opt/artemis/bin/artemis", "create"]
    assert cmd[-1] == "/work/backup0"
    for flag in ("--silent", "--require-login", "--replicated", "--backup", "--clustered"):
        assert flag in cmd
    assert cmd[cmd.index("--java-memory") + 1] == "384M"
    assert cmd[cmd.index("--static-cluster") + 1] == "tcp://127.0.0.1:1001"
    assert cmd[cmd.index("--user") + 1] == config.USER
    assert cmd[cmd.index("--host") + 1] == "127.0.0.1"
    single = config.create_command("a", "i", config.pair_nodes([("h", 1, 2)], single=True)[0])
    assert "--replicated" not in single and "--clustered" not in single


def test_endpoints_list_lives_then_their_backups() -> None:
    nodes = config.pair_nodes([("127.0.0.1", p, p + 100) for p in (1, 2, 3, 4)])
    endpoints = config.endpoints_for(nodes)
    assert endpoints.hosts == ("127.0.0.1:1", "127.0.0.1:3")
    assert endpoints.get("backups") == "127.0.0.1:2,127.0.0.1:4"
    assert endpoints.get("jolokia") == "127.0.0.1:101,127.0.0.1:103"
    assert endpoints.get("jolokia_backups") == "127.0.0.1:102,127.0.0.1:104"


def test_cloud_recipe_renders_three_replicated_pairs() -> None:
    recipe = SYSTEM.cloud
    assert isinstance(recipe, ArtemisCloud)
    assert SYSTEM.reference_topology.roles == {"live": 3, "backup": 3}
    cluster = {
        "live": ["10.0.0.1", "10.0.0.2", "10.0.0.3"],
        "backup": ["10.0.0.4", "10.0.0.5", "10.0.0.6"],
    }
    files = recipe.node_files("backup", 2, cluster, ArtemisParams())
    root = ET.fromstring(next(v for k, v in files.items() if k.endswith("broker.xml")))
    xml = root.find("a:core", NS)
    assert xml is not None
    assert text(xml, "a:name") == "backup2"
    assert text(xml, "a:ha-policy/a:replication/a:backup/a:group-name") == "pair2"
    assert text(xml, "a:journal-type") == "ASYNCIO"
    peers = [c.text for c in xml.findall("a:connectors/a:connector", NS)]
    assert peers[0] == "tcp://10.0.0.6:61616"
    assert len(peers) == 6 and "tcp://10.0.0.3:61616" in peers
    starts = " ".join(recipe.start_commands("backup", 2, cluster))
    assert "create --silent" in starts and "--backup" in starts and "--java-memory 16G" in starts
    assert any(config.ARTEMIS_VERSION in c for c in recipe.install_commands())
    assert set(recipe.ports()) == {61616, 8161}
    endpoints = recipe.endpoints(cluster)
    assert endpoints.hosts == ("10.0.0.1:61616", "10.0.0.2:61616", "10.0.0.3:61616")
    assert endpoints.get("backups") == "10.0.0.4:61616,10.0.0.5:61616,10.0.0.6:61616"
    assert endpoints.get("jolokia_backups").endswith("10.0.0.6:8161")


def test_unreachable_broker_fails_fast_naming_host() -> None:
    (port,) = free_ports(1)
    started = time.monotonic()
    with pytest.raises(BrokerConnectionError, match=f"127.0.0.1:{port}") as err:
        SYSTEM.connect(Endpoints(hosts=(f"127.0.0.1:{port}",)), ArtemisParams(), Destination("q"))
    assert time.monotonic() - started < 30
    assert "\n" not in str(err.value)


def test_registered_with_local_and_cloud() -> None:
    system = registry.get("artemis")
    assert system.local is not None and system.local.topologies == ("single", "cluster")
    assert system.cloud is not None
    assert system.client_package == "stomp.py"


# -- against a real live–backup pair ----------------------------------------------------------


@pytest.fixture(scope="module")
def pair(local_brokers: LocalBrokers) -> ProcessCluster:
    started = local_brokers.get(SYSTEM, "cluster")
    assert isinstance(started, ProcessCluster)
    return started


def queue_settings(manager: Jolokia, name: str) -> dict[str, object]:
    """Durability and routing of a queue, read back through the broker's management API."""
    broker = manager.broker()["Name"]
    mbean = (
        f'org.apache.activemq.artemis:broker="{broker}",component=addresses,'
        f'address="{name}",subcomponent=queues,routing-type="anycast",queue="{name}"'
    )
    attributes = ["Durable", "RoutingType"]
    return dict(manager.request({"type": "read", "mbean": mbean, "attribute": attributes}))


@pytest.mark.slow
def test_prepare_makes_a_durable_anycast_queue(pair: ProcessCluster) -> None:
    params, destination = ArtemisParams(), Destination("durable_anycast")
    SYSTEM.prepare(pair.endpoints, params, destination)
    (manager,) = [
        Jolokia(a, config.USER, config.PASSWORD) for a in pair.endpoints.get("jolokia").split(",")
    ]
    assert queue_settings(manager, "durable_anycast") == {"Durable": True, "RoutingType": "ANYCAST"}


@pytest.mark.slow
def test_describe_reads_back_replication(pair: ProcessCluster) -> None:
    described = SYSTEM.describe(pair.endpoints, ArtemisParams())
    assert described["version"] == config.ARTEMIS_VERSION
    assert described["replicated"] is True
    assert (described["live_brokers"], described["backup_brokers"]) == (1, 1)
    live, backup = described["nodes"]["live0"], described["nodes"]["backup0"]
    assert live["ha_policy"].startswith("Replication Primary")
    assert backup["ha_policy"].startswith("Replication Backup")
    assert live["replica_sync"] is True and live["active"] is True
    assert backup["backup"] is True and backup["active"] is False
    assert live["node_id"] == backup["node_id"]
    assert described["persistence_enabled"] and described["journal_sync_non_transactional"]


@pytest.mark.slow
def test_confirmed_messages_survive_the_live_broker(pair: ProcessCluster) -> None:
    """Runs last: kills the live broker; its backup must hold every confirmed message."""
    params, destination = ArtemisParams(), Destination("failover")
    SYSTEM.prepare(pair.endpoints, params, destination)
    sender = SYSTEM.connect(pair.endpoints, params, destination)
    sent = [b"f%04d" % i for i in range(300)]
    for i in range(0, 300, 10):
        sender.send(sent[i : i + 10])
    sender.close()
    pair.node("artemis live0").kill()

    deadline = time.monotonic() + 90
    while True:  # the STOMP client tries the live, then its backup
        try:
            receiver = SYSTEM.connect(pair.endpoints, params, destination)
            break
        except BrokerConnectionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(1)
    try:
        assert set(receive_bodies(receiver, set(sent))) == set(sent)
    finally:
        receiver.close()
