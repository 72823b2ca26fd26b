"""RabbitMQ: the adapter against a real 3-node cluster started from the Debian package,
the settings read back from it, and the AWS recipe's rendering."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from brokers import registry
from brokers.base import Destination, Endpoints, LocalCluster
from brokers.cloud import BROKER_PASSWORD, CLUSTER_SECRET
from brokers.errors import BrokerConnectionError, BrokerError
from brokers.local import free_ports
from brokers.rabbitmq import local as rabbitmq_local
from brokers.rabbitmq.adapter import open_connection
from brokers.rabbitmq.cloud import RabbitMQCloud
from brokers.rabbitmq.confirms import ConfirmTracker, PublishedBatch, PublishFrames
from brokers.rabbitmq.ctl import Ctl
from tests.conftest import LocalBrokers
from tests.support import drain, files_holding, receive_count

pytestmark = [pytest.mark.rabbitmq]


SYSTEM = registry.get("rabbitmq")
AWS = {"broker": ["10.42.1.10", "10.42.1.11", "10.42.1.12"]}


@pytest.fixture(scope="module")
def cluster(local_brokers: LocalBrokers) -> LocalCluster:
    return local_brokers.get(SYSTEM, "cluster")


@pytest.fixture(scope="module")
def ctl(cluster) -> Ctl:
    found = Ctl.from_endpoints(cluster.endpoints)
    assert found is not None
    return found


@pytest.mark.slow
def test_only_the_runs_user_may_log_in(cluster, ctl: Ctl) -> None:
    endpoints = cluster.endpoints
    user, password = endpoints.get("user"), endpoints.get("password")
    assert user.startswith("brokerbench") and len(password) == 32
    for node in ctl.nodes:  # guest was never created; a joined node has the cluster's users
        assert ctl.json(node, "list_users") == [{"user": user, "tags": ["administrator"]}]
    params = SYSTEM.params_model()
    for address in endpoints.addresses():
        for login in (("guest", "guest"), (user, "wrong")):
            given = dict(endpoints.extra) | dict(zip(("user", "password"), login, strict=True))
            with pytest.raises(BrokerConnectionError, match="ACCESS_REFUSED"):
                open_connection([address], Endpoints((), tuple(given.items())), params)
        connection, _ = open_connection([address], endpoints, params)
        connection.close()


@pytest.mark.slow
def test_the_password_is_in_private_files_only_and_not_described(cluster) -> None:
    password = cluster.endpoints.get("password")
    configs = [str(cluster.workdir / f"bb{i}" / "rabbitmq.conf") for i in (1, 2, 3)]
    assert files_holding(cluster, password) == dict.fromkeys(configs, 0o600)
    info = SYSTEM.describe(cluster.endpoints, SYSTEM.params_model())
    assert info["auth"] == "password" and password not in json.dumps(info)


@pytest.mark.slow
def test_quorum_queue_really_has_three_members(cluster, ctl: Ctl) -> None:
    destination = Destination("bb_members")
    SYSTEM.prepare(cluster.endpoints, SYSTEM.params_model(), destination)
    queue = ctl.queue(destination.name)
    assert queue is not None
    assert queue["type"] == "quorum" and queue["durable"] is True
    assert sorted(queue["members"]) == ["bb1@localhost", "bb2@localhost", "bb3@localhost"]
    assert sorted(queue["online"]) == sorted(queue["members"])


@pytest.mark.slow
def test_describe_reads_back_version_nodes_and_replicas(cluster) -> None:
    info = SYSTEM.describe(cluster.endpoints, SYSTEM.params_model())
    assert info["version"].startswith("3.")
    assert info["cluster_nodes"] == ["bb1@localhost", "bb2@localhost", "bb3@localhost"]
    assert info["queue_type"] == "quorum" and info["queue_durable"] is True
    assert info["replicas"] == 3 and len(info["queue_members"]) == 3


@pytest.mark.slow
def test_round_trip_with_confirms_prefetch_and_acks(cluster, ctl: Ctl) -> None:
    params = SYSTEM.params_model(prefetch=7)
    destination = Destination("bb_round_trip")
    SYSTEM.prepare(cluster.endpoints, params, destination)
    sender = SYSTEM.connect(cluster.endpoints, params, destination)
    receiver = SYSTEM.connect(cluster.endpoints, params, destination)
    bodies = [f"m{i}".encode() for i in range(25)]
    sender.send(bodies[:10])
    sender.send(bodies[10:])
    first = receiver.receive(3)
    assert 1 <= len(first) <= 3
    consumers = ctl.json(
        ctl.nodes[0], "list_consumers", "queue_name", "ack_required", "prefetch_count"
    )
    mine = [c for c in consumers if c["queue_name"] == destination.name]
    assert mine == [{"queue_name": destination.name, "ack_required": True, "prefetch_count": 7}]
    held = first + drain(receiver, 25, timeout=3)
    assert len(held) == 7, "without acks, the consumer gets no more than the prefetch"
    receiver.ack([m.receipt for m in held])
    got = held + receive_count(receiver, 25 - len(held), timeout=20)
    assert sorted(m.body for m in got) == sorted(bodies)
    assert not any(m.redelivered for m in got)
    assert receiver.receive(10) == []
    sender.close()
    receiver.close()


@pytest.mark.slow
def test_acks_go_out_a_quarter_of_the_prefetch_at_a_time_and_all_by_close(
    cluster, ctl: Ctl
) -> None:
    """Acks wait until a quarter of the prefetch is due (or receive would wait, or the
    receiver closes): a receiver that takes and acks one message at a time never stalls at
    the prefetch, and closing sends what is left, so nothing comes back."""
    params = SYSTEM.params_model(prefetch=8)
    destination = Destination("bb_ack_every")
    SYSTEM.prepare(cluster.endpoints, params, destination)
    sender = SYSTEM.connect(cluster.endpoints, params, destination)
    bodies = [f"a{i}".encode() for i in range(30)]
    sender.send(bodies)
    receiver = SYSTEM.connect(cluster.endpoints, params, destination)
    got = []
    deadline = time.monotonic() + 30
    while len(got) < len(bodies) and time.monotonic() < deadline:
        one = receiver.receive(1)
        receiver.ack([m.receipt for m in one])
        got += one
        if len(got) == 1:
            assert receiver._acks_due, "one ack of 8 prefetched waits for the next"
    assert sorted(m.body for m in got) == sorted(bodies)
    assert receiver._acks_due == [] or len(receiver._acks_due) < 2
    receiver.close()
    again = SYSTEM.connect(cluster.endpoints, params, destination)
    assert drain(again, 1, timeout=3) == [], "every message was acknowledged by close"
    again.close()
    sender.close()


@pytest.mark.slow
def test_submitted_batches_stay_in_flight_and_arrive_once(cluster) -> None:
    params = SYSTEM.params_model()
    destination = Destination("bb_in_flight")
    SYSTEM.prepare(cluster.endpoints, params, destination)
    sender = SYSTEM.connect(cluster.endpoints, params, destination)
    assert sender.pipelined and SYSTEM.can_pipeline
    batches = [[f"{b}-{i}".encode() for i in range(b % 7 + 1)] for b in range(30)]
    confirmations = [sender.submit(batch) for batch in batches]
    assert not any(c.finished for c in confirmations), "submit does not wait for confirms"
    sender.send([b"synchronous"])
    times = [c.wait(10) for c in confirmations]
    assert all(t is not None for t in times)
    receiver = SYSTEM.connect(cluster.endpoints, params, destination)
    wanted = [body for batch in batches for body in batch] + [b"synchronous"]
    got = receive_count(receiver, len(wanted), timeout=30)
    assert sorted(m.body for m in got) == sorted(wanted)
    assert receiver.receive(10) == []
    sender.close()
    receiver.close()


@pytest.mark.slow
def test_clients_are_spread_over_all_nodes(cluster) -> None:
    params = SYSTEM.params_model()
    destination = Destination("bb_spread")
    SYSTEM.prepare(cluster.endpoints, params, destination)
    adapters = [SYSTEM.connect(cluster.endpoints, params, destination) for _ in range(3)]
    assert {a.node for a in adapters} == set(cluster.endpoints.hosts)
    for adapter in adapters:
        adapter.close()


@pytest.mark.slow
def test_unroutable_batch_is_not_confirmed(cluster) -> None:
    adapter = SYSTEM.connect(cluster.endpoints, SYSTEM.params_model(), Destination("bb_absent"))
    with pytest.raises(BrokerError, match="unroutable"):
        adapter.send([b"nowhere"])
    in_flight = [adapter.submit([b"a", b"b"]), adapter.submit([b"c"])]
    for confirmation in in_flight:
        with pytest.raises(BrokerError, match=r"0 of (\d) messages nacked, \1 returned"):
            while confirmation.wait(5) is None:
                pass
    adapter.close()


def test_publish_frames_are_the_ones_pika_writes() -> None:
    import pika
    import pika.frame
    import pika.spec

    properties = pika.BasicProperties(delivery_mode=2)
    frames = PublishFrames(3, "bb_queue", properties, body_max_length=16)
    batch = [b"short", b"", b"x" * 40]
    publish = pika.spec.Basic.Publish(exchange="", routing_key="bb_queue", mandatory=True)
    expected = b""
    for body in batch:
        expected += pika.frame.Method(3, publish).marshal()
        expected += pika.frame.Header(3, len(body), properties).marshal()
        for start in range(0, len(body), 16):
            expected += pika.frame.Body(3, body[start : start + 16]).marshal()
    assert frames.encode(batch) == expected


def test_confirms_settle_batches_by_delivery_tag() -> None:
    tracker = ConfirmTracker("node:1", "bb_queue")

    def batch(*bodies: bytes) -> PublishedBatch:
        published = PublishedBatch(bodies, deadline=0.0, settle=lambda *_: None)
        tracker.add(published)
        return published

    # Delivery tags 1-3, 4-5, 6, 7-8.
    first, second, third, fourth = (
        batch(b"a", b"b", b"c"),
        batch(b"d", b"e"),
        batch(b"f"),
        batch(b"g", b"h"),
    )
    assert tracker.on_confirm(2, multiple=False, nack=False) is False
    assert tracker.on_confirm(4, multiple=True, nack=False) is True  # 1, 3, 4
    assert first.done_ns is not None and not second.finished
    tracker.on_return(b"f")  # its confirm may cover other batches too
    assert tracker.on_confirm(6, multiple=True, nack=False) is True
    assert second.done_ns is not None
    assert third.error is not None and "0 of 1 messages nacked, 1 returned" in str(third.error)
    tracker.on_confirm(7, multiple=False, nack=True)
    assert not fourth.finished
    tracker.fail_all("connection lost")
    assert fourth.error is not None and "connection lost" in str(fourth.error)
    assert tracker.by_tag == {}


def test_unreachable_broker_fails_fast_naming_it() -> None:
    (port,) = free_ports(1)
    started = time.monotonic()
    with pytest.raises(BrokerConnectionError, match=f"127.0.0.1:{port}"):
        SYSTEM.connect(Endpoints((f"127.0.0.1:{port}",)), SYSTEM.params_model(), Destination("x"))
    assert time.monotonic() - started < 30


@pytest.mark.slow
def test_sending_goes_on_when_a_node_dies(cluster) -> None:
    # Last: it kills a node of the module's cluster.
    params = SYSTEM.params_model()
    destination = Destination("bb_node_dies")
    SYSTEM.prepare(cluster.endpoints, params, destination)
    adapter = SYSTEM.connect(cluster.endpoints, params, destination)
    adapter.send([b"before"])
    # The node this client is connected to: it must reconnect to another one.
    index = cluster.endpoints.hosts.index(adapter.node)
    cluster.node(f"rabbitmq bb{index + 1}@localhost").kill()
    deadline = time.monotonic() + 60
    while True:  # a client of the dead node reconnects to another; a new leader is elected
        try:
            adapter.send([b"after"])
            break
        except BrokerError:
            assert time.monotonic() < deadline, "no confirmed send within 60 s of a node dying"
            time.sleep(0.5)
    started = time.monotonic()
    adapter.send([b"again"])
    assert time.monotonic() - started < 5, "the new connection confirms promptly"
    got = drain(adapter, 3, timeout=60)
    assert sorted(m.body for m in got) == [b"after", b"again", b"before"]
    adapter.close()


def test_cloud_config_is_the_local_template_with_other_addresses() -> None:
    local = rabbitmq_local.render_config("bb1@localhost", "127.0.0.1", 5999)
    files = RabbitMQCloud().node_files("broker", 1, AWS, params=None)
    cloud = files["/etc/rabbitmq/rabbitmq.conf"]
    assert "listeners.tcp.1 = 0.0.0.0:5672" in cloud
    assert "default_user = brokerbench" in cloud and "loopback_users = none" in cloud
    assert files["/etc/rabbitmq/enabled_plugins"] == local["enabled_plugins"] == "[].\n"
    assert "NODENAME=rabbit@10.42.1.11" in files["/etc/rabbitmq/rabbitmq-env.conf"]
    keys = {
        line.split("=")[0].strip() for line in local["rabbitmq.conf"].splitlines() if "=" in line
    }
    assert all(f"{key} =" in cloud for key in keys)
    cookies = {
        RabbitMQCloud().node_files("broker", i, AWS, None)["/var/lib/rabbitmq/.erlang.cookie"]
        for i in range(3)
    }
    assert cookies == {CLUSTER_SECRET.placeholder}  # the stack's secret, filled in at boot
    assert f"default_pass = {BROKER_PASSWORD.placeholder}" in cloud
    assert "password" not in dict(RabbitMQCloud().endpoints(AWS).extra)


def test_cloud_nodes_join_the_first_one_after_it_is_up() -> None:
    recipe = RabbitMQCloud()
    assert not any("join_cluster" in c for c in recipe.start_commands("broker", 0, AWS))
    commands = recipe.start_commands("broker", 2, AWS)
    wait = next(i for i, c in enumerate(commands) if "-n rabbit@10.42.1.10 await_startup" in c)
    stop = commands.index("rabbitmqctl stop_app")
    join = commands.index("rabbitmqctl join_cluster rabbit@10.42.1.10")
    assert wait < stop < join < commands.index("rabbitmqctl start_app")
    assert recipe.endpoints(AWS).hosts == ("10.42.1.10:5672", "10.42.1.11:5672", "10.42.1.12:5672")
    assert recipe.ports()[0] == 5672


@pytest.mark.slow
def test_a_node_that_does_not_start_is_named_and_everything_is_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert SYSTEM.local is not None
    real = rabbitmq_local.render_config

    def broken(name: str, *args, **kwargs) -> dict[str, str]:
        files = real(name, *args, **kwargs)
        return {**files, "rabbitmq.conf": files["rabbitmq.conf"] + "no_such.setting = 1\n"}

    monkeypatch.setattr(rabbitmq_local, "render_config", broken)
    workdir = tmp_path / "c"
    with pytest.raises(BrokerError, match=r"rabbitmq bb1@localhost .*exited.*bb1\.log"):
        SYSTEM.local.start("single", SYSTEM.params_model(), workdir)
    assert not workdir.exists()
    marker = f"HOME={workdir}/home".encode()
    leftovers = [p.parent.name for p in Path("/proc").glob("[0-9]*/environ") if marker in _read(p)]
    assert leftovers == [], "epmd and the node are stopped"


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:
        return b""
