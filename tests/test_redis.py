"""Redis Streams: the adapter against a real master with two replicas."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from brokers import registry
from brokers.base import Destination, Endpoints, LocalCluster
from brokers.connection import split_host_port
from brokers.credentials import Credentials, generate
from brokers.errors import BrokerError
from brokers.redis.adapter import auth_options
from tests.conftest import SCENARIOS, LocalBrokers
from tests.support import files_holding, prepared, receive_count

pytestmark = [pytest.mark.redis, pytest.mark.slow]


SYSTEM = registry.get("redis")


@pytest.fixture(scope="module")
def cluster(local_brokers: LocalBrokers) -> LocalCluster:
    return local_brokers.get(SYSTEM, "cluster")


def test_describe_reads_back_replicas_and_aof(cluster) -> None:
    info = SYSTEM.describe(cluster.endpoints, SYSTEM.params_model())
    assert info["role"] == "master" and info["connected_replicas"] == 2
    assert info["settings"] == {"appendonly": "yes", "appendfsync": "everysec"}


def assert_password_required(endpoints: Endpoints, host: str, port: int) -> None:
    """The server at host:port refuses clients without the password or with a wrong one,
    and answers those that give the endpoints' credentials."""
    import redis

    for refused in ({}, {"password": "wrong"}, {"username": "default", "password": "wrong"}):
        with pytest.raises(redis.AuthenticationError):  # at once: no retries
            redis.Redis(host=host, port=port, retry=None, **refused).ping()
    with redis.Redis(host=host, port=port, **auth_options(endpoints)) as client:
        assert client.ping()


def test_every_server_requires_the_runs_password(cluster) -> None:
    endpoints = cluster.endpoints
    assert endpoints.get("user") == "default" and len(endpoints.get("password")) == 32
    for host, port in endpoints.addresses():
        assert_password_required(endpoints, host, port)


def test_the_password_is_in_private_files_only_and_not_described(cluster) -> None:
    password = cluster.endpoints.get("password")
    configs = {str(cluster.workdir / n / "redis.conf") for n in ("master", "replica1", "replica2")}
    assert files_holding(cluster, password) == dict.fromkeys(configs, 0o600)
    info = SYSTEM.describe(cluster.endpoints, SYSTEM.params_model())
    assert info["auth"] == "password" and password not in json.dumps(info)


def test_a_sharded_cluster_requires_the_password_on_every_node(tmp_path: Path) -> None:
    import redis

    assert SYSTEM.local is not None
    with SYSTEM.local.start("sharded", SYSTEM.params_model(), tmp_path / "c") as sharded:
        endpoints = sharded.endpoints
        with redis.Redis(*endpoints.first, **auth_options(endpoints)) as client:
            nodes = list(client.cluster("nodes"))
        assert len(nodes) == 9
        for node in nodes:
            assert_password_required(endpoints, *split_host_port(node))


def test_a_run_records_and_prints_no_password(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    from brokers.redis import local as redis_local
    from workload.engine.runner import run_scenario

    issued: list[Credentials] = []

    def recorded(user: str = "") -> Credentials:
        issued.append(generate(user))
        return issued[-1]

    monkeypatch.setattr(redis_local, "generate", recorded)
    lines: list[str] = []
    outcome = run_scenario(SCENARIOS / "redis-smoke.toml", tmp_path, console=lines.append)
    assert outcome.ok, outcome.errors
    (password,) = (c.password for c in issued)
    context = json.loads((outcome.run_dir / "context.json").read_text())
    assert context["broker"]["auth"] == "password"
    assert context["broker"]["endpoints"][0].startswith("127.0.0.1:")
    written = [p for p in tmp_path.rglob("*") if p.is_file()]
    assert written and not [p for p in written if password.encode() in p.read_bytes()]
    printed = capfd.readouterr()
    assert password not in "\n".join([*lines, printed.out, printed.err])


def test_wait_for_replicas_confirms_the_batch(cluster) -> None:
    params = SYSTEM.params_model(streams=3, wait_replicas=2)
    destination = Destination("bb_wait")
    SYSTEM.prepare(cluster.endpoints, params, destination)
    adapter = SYSTEM.connect(cluster.endpoints, params, destination)
    adapter.send([b"a", b"b", b"c", b"d"])
    got = []
    for _ in range(5):
        got += adapter.receive(10)
    assert sorted(m.body for m in got) == [b"a", b"b", b"c", b"d"]
    adapter.ack([m.receipt for m in got])
    adapter.close()


def test_replies_are_parsed_by_hiredis(cluster) -> None:
    """The receiving connection's replies (the sending one counts its XADDs' replies)."""
    import hiredis

    adapter = prepared(SYSTEM, cluster.endpoints, "bb_parser")
    adapter.send([b"x"])
    assert [m.body for m in adapter.receive(10)] == [b"x"]
    assert isinstance(adapter._receiving.connection.reader, hiredis.Reader)
    info = SYSTEM.describe(cluster.endpoints, SYSTEM.params_model())
    assert info["client_parser"].startswith("hiredis.Reader (hiredis ")
    adapter.close()


def test_a_worker_opens_one_connection_per_role_and_closes_them(cluster) -> None:
    """The connection that found the master reachable is the first channel's; ``close``
    closes both channels' connections."""
    import redis

    adapter = prepared(SYSTEM, cluster.endpoints, "bb_connections")
    master = redis.Redis(*cluster.endpoints.first, **auth_options(cluster.endpoints))

    def named() -> int:
        ours = {adapter._sending, adapter._receiving} - {None}
        ports = {c.connection.sock.getsockname()[1] for c in ours if c.connection.sock}
        return sum(int(c["addr"].rpartition(":")[2]) in ports for c in master.client_list())

    spare = adapter._spare
    adapter.send([b"x"])
    assert adapter._sending.connection is spare and adapter._spare is None
    assert [m.body for m in adapter.receive(10)] == [b"x"]
    assert named() == 2
    sockets = [adapter._sending.connection, adapter._receiving.connection]
    adapter.close()
    assert all(c.sock is None for c in sockets)


def test_submitted_batches_stay_in_flight_and_arrive_once(cluster) -> None:
    adapter = prepared(SYSTEM, cluster.endpoints, "bb_in_flight", streams=3)
    assert adapter.pipelined and SYSTEM.can_pipeline
    # Even batches' bodies are of one size (packed stream by stream), odd ones' are not.
    batches = [
        [
            (f"{b:03d}-{i}" if b % 2 == 0 else f"{b}-{i}" * (i + 1)).encode()
            for i in range(b % 7 + 1)
        ]
        for b in range(40)
    ]
    confirmations = [adapter.submit(batch) for batch in batches]
    assert len(adapter._sending.waiting) == len(batches), "no reply read while submitting"
    adapter.send([b"synchronous"])  # reads the replies of every batch before it
    times = [c.wait(0) for c in confirmations]
    assert all(t is not None for t in times) and times == sorted(times)
    wanted = [body for batch in batches for body in batch] + [b"synchronous"]
    got = receive_count(adapter, len(wanted), timeout=30)
    assert sorted(m.body for m in got) == sorted(wanted)
    assert adapter.receive(10) == []
    adapter.close()


def test_a_failed_batch_raises_and_the_next_ones_are_confirmed(cluster) -> None:
    import redis

    adapter = prepared(SYSTEM, cluster.endpoints, "bb_failed_batch", streams=2)
    # Single-message batches alternate between the keys; the second key is no stream.
    master = redis.Redis(*cluster.endpoints.first, **auth_options(cluster.endpoints))
    master.delete(adapter.keys[1])
    master.set(adapter.keys[1], "not a stream")
    first, second, third = (adapter.submit([body]) for body in (b"one", b"two", b"three"))
    with pytest.raises(BrokerError, match="WRONGTYPE"):
        second.wait(5)
    assert first.wait(0) is not None and third.wait(5) is not None
    assert [fields[b"m"] for _, fields in master.xrange(adapter.keys[0])] == [b"one", b"three"]
    adapter.close()


def test_replies_shorter_than_the_low_water_mark_counts_on_are_still_read(cluster) -> None:
    """The sending connection waits for the fewest bytes a group's XADD replies take
    (SO_RCVLOWAT); a reply shorter than that (here INCR's integer, 4 bytes, counted as an
    XADD's 22) is read once the mark drops back, not after the 30 s socket timeout."""
    from brokers.redis.protocol import LOWAT_WAIT, XADD_REPLY_MIN
    from brokers.redis.resp import pack

    adapter = prepared(SYSTEM, cluster.endpoints, "bb_low_water", streams=2)
    adapter.send([b"first"])
    channel = adapter._sending
    marks: list[int] = []
    mark = channel.connection.mark
    channel.connection.mark = lambda lowat: (marks.append(lowat), mark(lowat))[1]
    adapter.send([b"%06d" % i for i in range(300)])
    assert marks[0] == 300 * XADD_REPLY_MIN, "the batch's replies were awaited at a mark"
    written = channel.write_packed(pack(b"INCR", b"bb_low_water_count"), 1)
    assert channel.settle(written, None) is not None and written.reply == 1
    assert channel.connection.lowat == 1 and len(b":1\r\n") < XADD_REPLY_MIN
    written = channel.write_packed(pack(b"INCR", b"bb_low_water_count"), 1)
    waits = 0
    while written.wait(LOWAT_WAIT * 2) is None:  # as a pipelined sender waits
        waits += 1
        assert waits < 50
    assert written.reply == 2
    adapter.send([b"after"])  # XADDs go on
    adapter.close()


def test_a_server_that_reads_no_more_fails_the_write_after_the_timeout(tmp_path: Path) -> None:
    """The sending connection writes on a blocking socket (no poll before each send); a
    server that stops reading (paused) fails the write once nothing moved for the write
    timeout, with the host in one line, and the batches in flight fail with it."""
    import time

    from brokers.errors import BrokerConnectionError
    from brokers.redis.protocol import SendChannel
    from brokers.redis.resp import RespConnection, pack

    assert SYSTEM.local is not None
    params = SYSTEM.params_model()
    single = SYSTEM.local.start("single", params, tmp_path / "broker")
    try:
        adapter = prepared(SYSTEM, single.endpoints, "bb_stalled")
        channel = SendChannel(RespConnection(adapter.server, timeout=0.5))
        command = pack(b"XADD", b"bb_stalled:{0}", b"*", b"m", b"x" * 10_000)
        earlier = channel.write_packed(command, 1)
        assert earlier.wait(5) is not None  # a working connection first
        in_flight = channel.write_packed(command, 1)
        node = single.processes()[0].name
        single.fault(node, "pause")
        began = time.monotonic()
        host, port = single.endpoints.first
        with pytest.raises(
            BrokerConnectionError, match=rf"{host}:{port}: nothing written for 0.5 s"
        ):
            while time.monotonic() - began < 20:  # until the socket's buffers are full
                channel.write_packed(command * 100, 100)
        assert time.monotonic() - began < 20
        with pytest.raises(BrokerConnectionError):
            in_flight.wait(0)
        single.recover(node, "pause")
        assert channel.settle(channel.write_packed(command, 1), None) is not None  # reconnects
        adapter.close()
    finally:
        single.stop()


def test_too_few_replicas_fail_the_batch(cluster) -> None:
    adapter = prepared(
        SYSTEM, cluster.endpoints, "bb_few_replicas", wait_replicas=3, wait_timeout_ms=50
    )
    with pytest.raises(BrokerError, match="only 2 of 3 replicas"):
        adapter.send([b"a"])
    confirmation = adapter.submit([b"b"])
    with pytest.raises(BrokerError, match="only 2 of 3 replicas"):
        while confirmation.wait(1) is None:
            pass
    adapter.close()


def test_redis_cluster_sharded_end_to_end(tmp_path: Path) -> None:
    from tests.conftest import brokerbench, read_summary

    done = brokerbench(
        "run", str(SCENARIOS / "redis-sharded-smoke.toml"), "--results", str(tmp_path)
    )
    assert done.returncode == 0, done.stderr[-2000:]
    (row,) = read_summary(tmp_path)
    assert int(row["sent"]) > 0 and int(row["received"]) == int(row["sent"])
    assert int(row["lost"]) == 0
    (context,) = tmp_path.glob("*/context.json")
    import json

    assert json.loads(context.read_text())["broker"]["cluster_shards"] == 3


@pytest.mark.integration
def test_message_sizes_and_producers_and_consumers_apart(cluster, spark, tmp_path: Path) -> None:
    """Uniform sizes, 3 sender threads against 1 receiver thread on each of 2 receiver
    nodes: the byte columns equal the raw records to the byte, every size is one the
    sender's pool drew, and each role ran its own count of workers."""
    from tests.support import run_against
    from tests.test_sizes import sized_run
    from workload.model.sections import LoadSection

    sizes = {"kind": "uniform", "min": 100, "max": 3000}
    load = {
        "duration": "3s",
        "idle_timeout": "1s",
        "sender_threads": 3,
        "receiver_threads": 1,
        "receiver_nodes": 2,
        "message_size": sizes,
    }
    short = {"load": load, "measurement": {"window": "2s"}}
    run = sized_run(
        run_against(SCENARIOS / "redis-cluster-smoke.toml", cluster.endpoints, tmp_path, short),
        spark,
    )
    run.check_exact()
    row = run.row
    pool = LoadSection.model_validate({"message_size": sizes}).message_size.draw(10_000, seed=0)
    assert set(run.received_sizes) <= set(pool) and len(set(run.received_sizes)) > 50
    assert 100 <= row["send_mb_per_s"] * 1e6 / row["send_msgs_per_s"] <= 3000
    assert (row["sender_threads"], row["receiver_threads"], row["threads"]) == (3, 1, 2)
    assert row["message_size"] == "uniform 100–3000"
    workers = {(r["role"], r["node"], r["worker"]) for r in run.seconds}
    assert {w for role, _, w in workers if role == "sender"} == {0, 1, 2}
    assert {(n, w) for role, n, w in workers if role == "receiver"} == {(0, 0), (1, 0)}
    (point,) = run.context["points"]
    assert point["receiver_processes_per_node"] == 1
    print(
        f"redis sizes: {row['sent']} msgs, {row['sent_bytes']} B; send "
        f"{row['send_msgs_per_s']:.0f} msgs/s {row['send_mb_per_s']:.2f} MB/s, receive "
        f"{row['receive_msgs_per_s']:.0f} msgs/s {row['receive_mb_per_s']:.2f} MB/s"
    )


# -- keys and the per-key order check (tests/keyed.py) ---------------------------------------


@pytest.mark.integration
def test_a_keyed_run_keeps_each_key_in_one_stream_and_counts_no_reordering(
    cluster, spark, tmp_path: Path
) -> None:
    import pyarrow.parquet as pq
    import redis

    from brokers.redis.adapter import stream_keys
    from brokers.redis.xadd import stream_of
    from tests.keyed import keyed_run_in_order
    from workload.engine.keys import KeyScheme
    from workload.engine.naming import destination_name, run_tag
    from workload.model.record import load_context

    smoke = SCENARIOS / "redis-cluster-smoke.toml"
    run_dir = keyed_run_in_order(smoke, cluster.endpoints, tmp_path, 20, spark)
    context = load_context(run_dir)
    # Each message is in the stream its key names: count each stream's entries added.
    scheme = KeyScheme(20)
    rows = pq.read_table(run_dir / "raw" / "received").to_pylist()
    expected: dict[int, int] = {}
    for node, worker, seq in {(r["sender_node"], r["sender_worker"], r["seq"]) for r in rows}:
        key = scheme.name(scheme.key_of(node, worker, seq))
        stream = stream_of(key, 2)
        expected[stream] = expected.get(stream, 0) + 1
    host, port = cluster.endpoints.first
    client = redis.Redis(host=host, port=port, **auth_options(cluster.endpoints))
    destination = destination_name(run_tag(context.run_id), 0)
    streams = stream_keys(destination, SYSTEM.params_model(streams=2))
    added = {i: client.xinfo_stream(key)["entries-added"] for i, key in enumerate(streams)}
    assert added == expected, (added, expected)


@pytest.mark.integration
def test_an_injected_reordering_is_counted_once(cluster, spark, tmp_path: Path) -> None:
    from tests.keyed import inject_reordering

    params = SYSTEM.params_model()
    assert inject_reordering(SYSTEM, cluster.endpoints, params, "keys_inject", spark, tmp_path) == 1
