"""RocketMQ: parameters, configuration rendering, the remoting protocol, the loopback-bind
library and the AWS recipe without a server, then the adapter and describe
against a real name server + SYNC_MASTER + SLAVE + gRPC proxy from Maven Central."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import struct
import subprocess
import sys
import threading
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from brokers import registry
from brokers.base import Destination, Endpoints
from brokers.errors import BrokerConnectionError, BrokerError, BrokerStartError
from brokers.local import ProcessCluster, free_ports
from brokers.rocketmq import SYSTEM, admin, local, loopback, remoting
from brokers.rocketmq.cloud import RocketMQCloud
from brokers.rocketmq.config import (
    POM,
    BrokerNode,
    Sizes,
    render_broker,
    render_namesrv,
    render_proxy,
    version,
)
from brokers.rocketmq.params import RocketMQParams
from tests.conftest import LocalBrokers
from tests.support import listening_addresses, properties

pytestmark = pytest.mark.rocketmq


# -- without a server -----------------------------------------------------------------------


def test_defaults_are_the_safe_settings() -> None:
    params = RocketMQParams()
    assert params.broker_role(has_slave=True) == "SYNC_MASTER"
    assert params.broker_role(has_slave=False) == "ASYNC_MASTER"
    assert params.flush_disk_type == "SYNC_FLUSH"
    assert params.invisible_duration == 30.0
    assert RocketMQParams(replication="async").broker_role(True) == "ASYNC_MASTER"
    assert RocketMQParams(flush="async").flush_disk_type == "ASYNC_FLUSH"


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"invisible_duration": 5}, "invisible_duration"),
        ({"flush": "never"}, "flush"),
        ({"queue": 8}, "queue"),
    ],
)
def test_invalid_params_are_rejected(values: dict[str, object], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        RocketMQParams.model_validate(values)


def test_pom_pins_one_5x_version_for_all_components() -> None:
    ns = {"m": "http://maven.apache.org/POM/4.0.0"}
    root = ET.parse(POM).getroot()
    assert re.fullmatch(r"5\.\d+\.\d+", version())
    artifacts = {a.text for a in root.iterfind(".//m:dependency/m:artifactId", ns)}
    assert artifacts == {"rocketmq-namesrv", "rocketmq-broker", "rocketmq-proxy", "rocketmq-tools"}
    versions = {v.text for v in root.iterfind(".//m:dependency/m:version", ns)}
    assert versions == {"${rocketmq.version}"}


def test_broker_configuration() -> None:
    node = BrokerNode("broker-a", 1, "SLAVE", "127.0.0.1", "127.0.0.1", 20911, 20912, "/s")
    conf = properties(render_broker(node, "SYNC_FLUSH", ["127.0.0.1:9876"], Sizes()))
    assert conf["brokerRole"] == "SLAVE" and conf["brokerId"] == "1"
    assert conf["flushDiskType"] == "SYNC_FLUSH"
    assert conf["bindAddress"] == "127.0.0.1" and conf["haListenPort"] == "20912"
    assert conf["autoCreateTopicEnable"] == "false"
    assert conf["autoCreateSubscriptionGroup"] == "false"
    assert conf["storePathCommitLog"] == "/s/commitlog"
    assert properties(render_namesrv(9876, "127.0.0.1"))["bindAddress"] == "127.0.0.1"
    proxy = json.loads(render_proxy(["a:1", "b:2"], 8081, 8080))
    assert proxy["namesrvAddr"] == "a:1;b:2" and proxy["proxyMode"] == "cluster"


def test_cloud_recipe_pairs_masters_and_slaves() -> None:
    recipe = SYSTEM.cloud
    assert isinstance(recipe, RocketMQCloud)
    assert SYSTEM.reference_topology.roles == {"namesrv": 1, "master": 3, "slave": 3}
    cluster = {
        "namesrv": ["10.0.0.1"],
        "master": ["10.0.0.2", "10.0.0.3", "10.0.0.4"],
        "slave": ["10.0.0.5", "10.0.0.6", "10.0.0.7"],
    }
    master = recipe.node_files("master", 1, cluster, RocketMQParams())
    conf = properties(master["/etc/rocketmq/broker.conf"])
    assert (conf["brokerName"], conf["brokerId"], conf["brokerRole"]) == (
        "broker-b",
        "0",
        "SYNC_MASTER",
    )
    assert conf["brokerIP1"] == "10.0.0.3" and conf["namesrvAddr"] == "10.0.0.1:9876"
    assert "/etc/systemd/system/rocketmq-proxy.service" in master
    assert "-Xmx8g" in master["/etc/systemd/system/rocketmq-broker.service"]
    slave = properties(
        recipe.node_files("slave", 1, cluster, RocketMQParams())["/etc/rocketmq/broker.conf"]
    )
    assert (slave["brokerName"], slave["brokerId"], slave["brokerRole"]) == (
        "broker-b",
        "1",
        "SLAVE",
    )
    assert "rocketmq-proxy" not in " ".join(recipe.start_commands("slave", 0, cluster))
    assert "rocketmq-proxy" in " ".join(recipe.start_commands("master", 0, cluster))
    install = "\n".join(recipe.install_commands())
    assert "<rocketmq.version>" in install and "copy-dependencies" in install
    endpoints = recipe.endpoints(cluster)
    assert endpoints.hosts == ("10.0.0.2:8081", "10.0.0.3:8081", "10.0.0.4:8081")
    assert endpoints.get("namesrv") == "10.0.0.1:9876"


def test_fastjson_integer_keys_are_parsed() -> None:
    body = b'{"brokerAddrTable":{"broker-a":{"brokerAddrs":{0:"127.0.0.1:1",1:"127.0.0.1:2"}}}}'
    parsed = remoting.lenient_json(body)
    assert parsed["brokerAddrTable"]["broker-a"]["brokerAddrs"] == {
        "0": "127.0.0.1:1",
        "1": "127.0.0.1:2",
    }


def fake_server(reply_code: int, body: bytes) -> tuple[str, list[dict[str, object]]]:
    """A one-shot remoting server answering with ``reply_code``; records the request header."""
    seen: list[dict[str, object]] = []
    server = socket.create_server(("127.0.0.1", 0))

    def serve() -> None:
        conn, _ = server.accept()
        with conn, server:
            length, header_length = struct.unpack(">ii", conn.recv(8))
            data = b""
            while len(data) < length - 4:
                data += conn.recv(length - 4 - len(data))
            header = json.loads(data[:header_length])
            seen.append(header)
            reply = json.dumps(
                {"code": reply_code, "flag": 1, "opaque": header["opaque"], "remark": "nope"}
            ).encode()
            conn.sendall(struct.pack(">ii", 4 + len(reply) + len(body), len(reply)) + reply + body)

    threading.Thread(target=serve, daemon=True).start()
    return f"127.0.0.1:{server.getsockname()[1]}", seen


def test_remoting_request_and_response_frames() -> None:
    address, seen = fake_server(0, b"brokerRole=SYNC_MASTER\nflushDiskType=SYNC_FLUSH\n")
    assert remoting.broker_config(address) == {
        "brokerRole": "SYNC_MASTER",
        "flushDiskType": "SYNC_FLUSH",
    }
    assert seen[0]["code"] == remoting.GET_BROKER_CONFIG and seen[0]["language"] == "PYTHON"
    address, seen = fake_server(1, b"")
    with pytest.raises(BrokerError, match="code 1: nope"):
        remoting.create_topic(address, "t", 8)
    assert seen[0]["extFields"]["attributes"] == "+message.type=NORMAL"  # type: ignore[index]


def test_loopback_library_moves_wildcard_binds_to_loopback() -> None:
    if loopback.compiler() is None and not loopback.library().exists():
        pytest.skip("no C compiler")
    library = loopback.build()
    probe = (
        "import socket\n"
        "s = socket.socket(); s.bind(('0.0.0.0', 0)); print(s.getsockname()[0])\n"
        "s6 = socket.socket(socket.AF_INET6); s6.bind(('::', 0)); print(s6.getsockname()[0])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        env={**os.environ, "LD_PRELOAD": str(library)},
        capture_output=True,
        text=True,
        check=True,
    )
    assert done.stdout.split() == ["127.0.0.1", "::ffff:127.0.0.1"]


def test_broker_ports_leave_room_for_the_fast_port() -> None:
    ports = local.broker_ports(2, taken=set())
    assert len(set(ports) | {p - 2 for p in ports}) == 4


def test_unreachable_proxy_fails_fast_naming_host() -> None:
    (port,) = free_ports(1)
    endpoints = Endpoints(hosts=(f"127.0.0.1:{port}",), extra=(("namesrv", f"127.0.0.1:{port}"),))
    started = time.monotonic()
    with pytest.raises(BrokerConnectionError, match=f"127.0.0.1:{port}") as err:
        SYSTEM.connect(endpoints, RocketMQParams(), Destination("t"))
    assert time.monotonic() - started < 30 and "\n" not in str(err.value)
    with pytest.raises(BrokerConnectionError, match=f"127.0.0.1:{port}"):
        SYSTEM.describe(endpoints, RocketMQParams())


def test_registered_with_local_and_cloud() -> None:
    system = registry.get("rocketmq")
    assert system.local is not None and system.local.topologies == ("single", "cluster")
    assert "gcc" in system.local.debian_packages
    assert system.cloud is not None and system.client_package == "rocketmq-python-client"


# -- against a real cluster -------------------------------------------------------------------


@pytest.fixture(scope="module")
def cluster(local_brokers: LocalBrokers) -> ProcessCluster:
    started = local_brokers.get(SYSTEM, "cluster")
    assert isinstance(started, ProcessCluster)
    return started


@pytest.mark.slow
def test_start_failure_names_the_component(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    deployment = SYSTEM.local
    assert deployment is not None
    if deployment.missing():
        pytest.skip(deployment.missing() or "")
    monkeypatch.setitem(local.MAIN, "namesrv", "org.apache.rocketmq.namesrv.NoSuchStartup")
    with pytest.raises(BrokerStartError, match=r"^namesrv .*namesrv\.log") as err:
        deployment.start("single", RocketMQParams(), tmp_path / "broken")
    assert "\n" not in str(err.value)
    assert not (tmp_path / "broken").exists()


@pytest.mark.slow
def test_describe_reads_back_sync_master_and_slave(cluster: ProcessCluster) -> None:
    described = SYSTEM.describe(cluster.endpoints, RocketMQParams())
    assert described["version"] == version()
    assert (described["masters"], described["slaves"]) == (1, 1)
    assert described["broker_roles"] == ["SLAVE", "SYNC_MASTER"]
    assert described["flush_disk_types"] == ["SYNC_FLUSH"]
    assert described["in_sync_slaves"] == {"broker-a": 1}


@pytest.mark.slow
def test_every_process_listens_on_loopback_only(cluster: ProcessCluster) -> None:
    if shutil.which("ss") is None:
        pytest.skip("ss (iproute2) is not installed")
    addresses = listening_addresses(cluster)
    assert addresses and addresses <= {"127.0.0.1"}, addresses


# -- keys: message groups on a FIFO topic, and the per-key order check (tests/keyed.py) ------


def topic_config(address: str, topic: str) -> dict[str, object]:
    """A topic's settings as its broker reads them back (the remoting request
    GET_TOPIC_CONFIG, 351)."""
    reply = remoting.call(address, 351, {"topic": topic, "lo": "false"})
    data = remoting.lenient_json(reply.body)
    return dict(data.get("topicConfig", data))


@pytest.mark.slow
def test_a_keyed_destination_is_a_fifo_topic_and_group(cluster: ProcessCluster) -> None:
    params = RocketMQParams(queues=2)
    SYSTEM.prepare(cluster.endpoints, params, Destination("bb_keyed_fifo", keyed=True))
    SYSTEM.prepare(cluster.endpoints, params, Destination("bb_keyless_normal"))
    (master,) = admin.masters(admin.namesrv_address(cluster.endpoints)).values()
    fifo = topic_config(master, "bb_keyed_fifo")
    assert fifo["attributes"] == {"message.type": "FIFO"} and fifo["order"] is True
    normal = topic_config(master, "bb_keyless_normal")
    assert normal["attributes"] == {"message.type": "NORMAL"} and normal["order"] is False


@pytest.mark.slow
@pytest.mark.integration
def test_a_keyed_run_keeps_each_message_group_in_order(cluster, spark, tmp_path) -> None:
    from tests.conftest import SCENARIOS
    from tests.keyed import keyed_run_in_order

    smoke = SCENARIOS / "rocketmq-cluster-smoke.toml"
    keyed_run_in_order(smoke, cluster.endpoints, tmp_path, 20, spark)


@pytest.mark.slow
@pytest.mark.integration
def test_an_injected_reordering_is_counted_once(cluster, spark, tmp_path) -> None:
    from tests.keyed import inject_reordering

    params = RocketMQParams(queues=2)
    assert inject_reordering(SYSTEM, cluster.endpoints, params, "keys_inject", spark, tmp_path) == 1
