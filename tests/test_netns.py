"""Nodes in network namespaces of their own (brokers.netns): reachable from here, cut off
and reconnected by the ``isolate`` fault, removed with the cluster — or by the watchdog when
the coordinator is gone — and a real cluster isolated mid-run (slow)."""

from __future__ import annotations

import io
import ipaddress
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from brokers.local import ManagedProcess, ProcessCluster, wait_until
from brokers.netns import NETWORK, Namespaces, NodeHosts
from brokers.watchdog import guard
from tests.test_faults import run_failover

PORT = 18_765


def namespaces() -> set[str]:
    out = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    return {line.split()[0] for line in out.splitlines() if line.strip()}


def links() -> set[str]:
    out = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True).stdout
    return {line.split(":")[1].strip().split("@")[0] for line in out.splitlines()}


def answers(host: str, port: int = PORT, timeout: float = 1.0) -> bool:
    """Whether a TCP connection to ``host:port`` is accepted within ``timeout``."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def listener(tmp_path: Path, name: str, host: str) -> ManagedProcess:
    """A process that accepts TCP connections on ``host:PORT``."""
    code = (
        "import socket, time\n"
        f"s = socket.create_server(({host!r}, {PORT}))\n"
        "while True:\n    s.accept()[0].close()\n"
    )
    return ManagedProcess(name, [sys.executable, "-c", code], tmp_path / f"{name}.log")


def test_nodes_on_hosts_of_their_own_are_cut_off_and_reconnected(tmp_path: Path) -> None:
    hosts = Namespaces()
    cluster = ProcessCluster("cluster", tmp_path / "work", hosts=hosts)
    try:
        addresses = [cluster.host(slot) for slot in range(2)]
        assert len(set(addresses)) == 2
        assert all(ipaddress.ip_address(a) in NETWORK for a in addresses)
        for slot, address in enumerate(addresses):
            cluster.add(listener(tmp_path, f"n{slot}", address), slot=slot)
        for address in addresses:
            wait_until(lambda a=address: answers(a), f"listener on {address}", 10)  # type: ignore[misc]
        # Each node runs in its own namespace: the same port is free on both hosts, and
        # the node is not reachable on this machine's loopback.
        assert not answers("127.0.0.1")
        assert {hosts.namespace(0), hosts.namespace(1)} <= namespaces()
        cluster.fault("n0", "isolate")
        assert not answers(addresses[0]) and answers(addresses[1])
        assert cluster.dead_nodes() == []  # cut off, still running
        cluster.recover("n0", "isolate")
        assert answers(addresses[0], timeout=3)
    finally:
        cluster.stop()
    assert not {hosts.namespace(0), hosts.namespace(1)} & namespaces()
    assert hosts.bridge not in links()


def test_loopback_nodes_cannot_be_isolated(tmp_path: Path) -> None:
    cluster = ProcessCluster("cluster", tmp_path / "work")
    assert isinstance(cluster.hosts, NodeHosts) and not cluster.hosts.isolates
    assert cluster.host(0) == "127.0.0.1" and cluster.hosts.network() == "127.0.0.1/32"


def test_the_watchdog_removes_namespaces_and_bridges_left_behind() -> None:
    hosts = Namespaces()
    hosts.address(0)
    name = hosts.namespace(0)
    assert name in namespaces() and hosts.bridge in links()
    # What the guard reads when the coordinator registered them and then died.
    guard(io.StringIO(f"+link {hosts.bridge}\n+netns {name}\n+netns gone\n-netns gone\n"))
    assert name not in namespaces() and hosts.bridge not in links()


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.nats
def test_nats_keeps_every_confirmed_message_when_the_stream_leader_is_cut_off(
    tmp_path: Path,
) -> None:
    stdout, result = run_failover(tmp_path, "nats-isolate.toml")
    (fault,) = result.faults
    assert "a network namespace per node" in stdout
    assert fault.record.action == "isolate" and fault.record.leader
    assert fault.record.began_ns and fault.record.ended_ns  # cut off, then reconnected
    assert result.confirmed > 0 and result.missing == result.lost == result.unavailable == 0
    # Clients of the cut-off server noticed from unanswered pings and went elsewhere.
    assert fault.send_gap.resumed and fault.receive_gap.resumed
