"""NATS JetStream: the asyncio adapter against a real 3-server JetStream cluster started
from the Debian package, the settings read back from it, and the AWS recipe."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest

from brokers import registry
from brokers.base import Destination, Endpoints, LocalCluster
from brokers.cloud import BROKER_PASSWORD
from brokers.errors import BrokerConnectionError, BrokerError
from brokers.local import free_ports
from brokers.nats import local as nats_local
from brokers.nats.cloud import NatsCloud
from tests.conftest import LocalBrokers
from tests.support import files_holding

pytestmark = [pytest.mark.nats]

SYSTEM = registry.get("nats")
AWS = {"server": ["10.42.1.10", "10.42.1.11", "10.42.1.12"]}


async def drain(adapter, want: int, patience: float = 20.0) -> list:
    got: list = []
    deadline = time.monotonic() + patience
    while len(got) < want and time.monotonic() < deadline:
        got += await adapter.receive(10)
    return got


@pytest.fixture(scope="module")
def cluster(local_brokers: LocalBrokers) -> LocalCluster:
    return local_brokers.get(SYSTEM, "cluster")


async def refused(host: str, **login: str) -> str:
    """Why the server refuses a client with this login (fails when it accepts it)."""
    import nats

    async def quiet(_exc: Exception) -> None:
        pass

    with pytest.raises(nats.errors.Error) as refusal:
        await nats.connect(
            f"nats://{host}", allow_reconnect=False, connect_timeout=5, error_cb=quiet, **login
        )
    return str(refusal.value)


@pytest.mark.slow
def test_every_server_requires_the_runs_password(cluster) -> None:
    endpoints = cluster.endpoints
    user, password = endpoints.get("user"), endpoints.get("password")
    assert user.startswith("brokerbench") and len(password) == 32

    async def run() -> None:
        for host in endpoints.hosts:
            assert "Authorization Violation" in await refused(host)
            assert "Authorization Violation" in await refused(host, user=user, password="wrong")
            adapter = await SYSTEM.connect(
                Endpoints((host,), endpoints.extra), SYSTEM.params_model(), Destination("x")
            )
            await adapter.close()

    asyncio.run(run())


@pytest.mark.slow
def test_routes_require_the_runs_password(cluster) -> None:
    import socket
    import urllib.request

    for monitor in cluster.endpoints.get("monitor").split(","):
        with urllib.request.urlopen(f"http://{monitor}/varz", timeout=5) as reply:
            route = json.load(reply)["cluster"]
        with socket.create_connection((route["addr"], route["cluster_port"]), timeout=5) as peer:
            assert b'"auth_required":true' in peer.recv(4096)
            peer.sendall(b'CONNECT {"verbose":false,"name":"intruder"}\r\n')
            assert b"Authorization Violation" in peer.recv(4096)


@pytest.mark.slow
def test_the_password_is_in_private_files_only_and_not_described(cluster) -> None:
    password = cluster.endpoints.get("password")
    configs = [str(cluster.workdir / f"n{i}" / "nats-server.conf") for i in (1, 2, 3)]
    assert files_holding(cluster, password) == dict.fromkeys(configs, 0o600)
    info = SYSTEM.describe(cluster.endpoints, SYSTEM.params_model())
    assert info["auth"] == "password" and password not in json.dumps(info)


@pytest.mark.slow
def test_describe_reads_back_three_replicas(cluster) -> None:
    info = SYSTEM.describe(cluster.endpoints, SYSTEM.params_model())
    assert info["version"].startswith("2.")
    assert info["cluster_size"] == 3 and info["replicas"] == 3
    assert info["stream_peers"] == ["n1", "n2", "n3"]
    assert info["storage"] == "file" and info["consumer_ack_policy"] == "explicit"


@pytest.mark.slow
def test_round_trip_waits_for_stream_acks(cluster) -> None:
    params = SYSTEM.params_model()
    destination = Destination("bb_round_trip")
    SYSTEM.prepare(cluster.endpoints, params, destination)
    bodies = [f"m{i}".encode() for i in range(25)]

    async def run() -> None:
        sender = await SYSTEM.connect(cluster.endpoints, params, destination)
        receiver = await SYSTEM.connect(cluster.endpoints, params, destination)
        await sender.send(bodies[:10])
        await sender.send(bodies[10:])
        stream = await sender.js.stream_info("bb_round_trip")
        assert stream.state.messages == 25  # every confirmed message is in the stream
        got = await drain(receiver, 25)
        assert sorted(m.body for m in got) == sorted(bodies)
        assert not any(m.redelivered for m in got)
        await receiver.ack([m.receipt for m in got])
        assert await receiver.receive(10) == []
        stream = await sender.js.stream_info("bb_round_trip")
        assert stream.state.messages == 0  # work queue: acked messages are removed
        await sender.close()
        await receiver.close()

    asyncio.run(run())


@pytest.mark.slow
def test_concurrent_sends_on_one_adapter_arrive_once(cluster) -> None:
    params = SYSTEM.params_model()
    destination = Destination("bb_concurrent")
    SYSTEM.prepare(cluster.endpoints, params, destination)
    batches = [[f"{b}-{i}".encode() for i in range(b % 7 + 1)] for b in range(30)]

    async def run() -> None:
        sender = await SYSTEM.connect(cluster.endpoints, params, destination)
        receiver = await SYSTEM.connect(cluster.endpoints, params, destination)
        await asyncio.gather(*(sender.send(batch) for batch in batches))
        assert sender.acks.waiting == {}
        wanted = [body for batch in batches for body in batch]
        got = await drain(receiver, len(wanted))
        assert sorted(m.body for m in got) == sorted(wanted)
        await receiver.ack([m.receipt for m in got])
        assert await receiver.receive(10) == []
        await sender.close()
        await receiver.close()

    asyncio.run(run())


@pytest.mark.slow
def test_a_subject_without_stream_is_not_acknowledged(cluster) -> None:
    params = SYSTEM.params_model(publish_timeout=2)

    async def run() -> None:
        adapter = await SYSTEM.connect(cluster.endpoints, params, Destination("bb_no_stream"))
        with pytest.raises(BrokerError, match=r"2 of 2 messages not acknowledged.*503"):
            await adapter.send([b"a", b"b"])
        assert adapter.acks.waiting == {}
        await adapter.close()

    asyncio.run(run())


@pytest.mark.slow
def test_clients_are_spread_over_all_servers(cluster) -> None:
    params = SYSTEM.params_model()

    async def run() -> set[str]:
        adapters = [
            await SYSTEM.connect(cluster.endpoints, params, Destination("bb_spread"))
            for _ in range(3)
        ]
        servers = {a.server for a in adapters}
        for adapter in adapters:
            await adapter.close()
        return servers

    assert asyncio.run(run()) == set(cluster.endpoints.hosts)


def test_unreachable_server_fails_fast_naming_it() -> None:
    (port,) = free_ports(1)
    started = time.monotonic()
    with pytest.raises(BrokerConnectionError, match=f"127.0.0.1:{port}"):
        asyncio.run(
            SYSTEM.connect(
                Endpoints((f"127.0.0.1:{port}",)), SYSTEM.params_model(), Destination("x")
            )
        )
    assert time.monotonic() - started < 30


def test_a_redelivery_is_read_from_either_form_of_the_reply_subject() -> None:
    from brokers.nats.adapter import delivered_more_than_once

    assert not delivered_more_than_once("$JS.ACK.s.c.1.10.10.1700000000000000000.0")
    assert delivered_more_than_once("$JS.ACK.s.c.2.10.11.1700000000000000000.0")
    assert not delivered_more_than_once("$JS.ACK._.ACCHASH.s.c.1.10.10.1700000000000000000.0.xyz")
    assert delivered_more_than_once("$JS.ACK._.ACCHASH.s.c.12.10.10.1700000000000000000.0.xyz")


def test_cloud_config_is_the_local_template_with_other_addresses() -> None:
    local = nats_local.render_config(
        "n2",
        "127.0.0.1",
        4999,
        6999,
        8999,
        "/tmp/js",
        ["127.0.0.1:6998", "127.0.0.1:6997"],
        user="run-user",
        password="run-password",
    )
    cloud = NatsCloud().node_files("server", 1, AWS, params=None)["/etc/nats-server.conf"]
    assert "server_name: nats-2" in cloud and "listen: 0.0.0.0:4222" in cloud
    login = f"brokerbench:{BROKER_PASSWORD.placeholder}@"  # the stack's password, filled in at boot
    assert f"nats-route://{login}10.42.1.10:6222" in cloud
    assert f"nats-route://{login}10.42.1.12:6222" in cloud
    assert "10.42.1.11:6222" not in cloud
    assert f'password: "{BROKER_PASSWORD.placeholder}"' in cloud
    assert NatsCloud().endpoints(AWS).extra == (("user", "brokerbench"),)
    assert 'store_dir: "/var/lib/nats/jetstream"' in cloud

    def keys(text: str) -> list[str]:
        return [line.split(":")[0].strip() for line in text.splitlines() if ":" in line]

    assert keys(local) == keys(cloud)
    assert NatsCloud().endpoints(AWS).hosts == (
        "10.42.1.10:4222",
        "10.42.1.11:4222",
        "10.42.1.12:4222",
    )


def _processes_mentioning(text: str) -> list[str]:
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            args = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if text in args:
            found.append(args)
    return found


@pytest.mark.slow
def test_a_server_that_does_not_start_is_named_and_everything_is_removed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert SYSTEM.local is not None
    real = nats_local.render_config

    def broken_third(name: str, *args, **kwargs) -> str:
        text = real(name, *args, **kwargs)
        return text + "no_such_option: 1\n" if name == "n3" else text

    monkeypatch.setattr(nats_local, "render_config", broken_third)
    workdir = tmp_path / "c"
    with pytest.raises(BrokerError, match=r"nats-server n3 .*exited.*n3\.log"):
        SYSTEM.local.start("cluster", SYSTEM.params_model(), workdir)
    assert not workdir.exists()
    assert _processes_mentioning(str(workdir)) == []


# -- keys and the per-key order check (tests/keyed.py) ---------------------------------------


@pytest.mark.slow
@pytest.mark.integration
def test_a_keyed_run_counts_no_reordering(cluster, spark, tmp_path) -> None:
    from tests.conftest import SCENARIOS
    from tests.keyed import keyed_run_in_order

    # Every message went to a keyed subject, which the stream must capture for anything to be
    # acknowledged and received; test_kafka runs the whole analysis job.
    smoke = SCENARIOS / "nats-cluster-smoke.toml"
    keyed_run_in_order(smoke, cluster.endpoints, tmp_path, 50, spark)


@pytest.mark.slow
@pytest.mark.integration
def test_an_injected_reordering_is_counted_once(cluster, spark, tmp_path) -> None:
    from tests.keyed import inject_reordering

    params = SYSTEM.params_model()
    assert inject_reordering(SYSTEM, cluster.endpoints, params, "keys_inject", spark, tmp_path) == 1


@pytest.mark.slow
def test_publishing_goes_on_when_a_server_dies(cluster) -> None:
    # Last in this file: it kills a server of the module's cluster, which every test above shares.
    params = SYSTEM.params_model()
    destination = Destination("bb_server_dies")
    SYSTEM.prepare(cluster.endpoints, params, destination)

    async def run() -> None:
        adapter = await SYSTEM.connect(cluster.endpoints, params, destination)
        await adapter.send([b"before"])
        # The server this client is connected to: it must reconnect to another one.
        index = cluster.endpoints.hosts.index(adapter.server)
        cluster.node(f"nats-server n{index + 1}").kill()
        deadline = time.monotonic() + 60
        while True:  # reconnects to another server; 2 of 3 replicas still form a majority
            try:
                await adapter.send([b"after"])
                break
            except BrokerError:
                assert time.monotonic() < deadline, "no acknowledged publish within 60 s"
                await asyncio.sleep(0.5)
        got = await drain(adapter, 2, patience=60)
        assert sorted(m.body for m in got) == [b"after", b"before"]
        await adapter.close()

    asyncio.run(run())
