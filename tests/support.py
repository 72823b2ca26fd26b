"""Helpers the broker test modules share: draining an adapter, reading properties files,
and the addresses a local cluster listens on."""

from __future__ import annotations

import subprocess
import time
from typing import Any

from brokers.base import Received
from brokers.local import ProcessCluster


def receive_bodies(adapter: Any, wanted: set[bytes], timeout: float = 60) -> list[bytes]:
    """Receive and acknowledge until every wanted body arrived (or the timeout)."""
    bodies: list[bytes] = []
    deadline = time.monotonic() + timeout
    while not wanted <= set(bodies) and time.monotonic() < deadline:
        messages = adapter.receive(10)
        bodies += [m.body for m in messages]
        adapter.ack([m.receipt for m in messages])
    return bodies


def receive_count(adapter: Any, wanted: int, timeout: float = 60) -> list[Received]:
    """Receive and acknowledge until ``wanted`` messages arrived (or the timeout)."""
    got: list[Received] = []
    deadline = time.monotonic() + timeout
    while len(got) < wanted and time.monotonic() < deadline:
        messages = adapter.receive(10)
        got += messages
        adapter.ack([m.receipt for m in messages])
    return got


def properties(text: str) -> dict[str, str]:
    """``key=value`` lines of a Java properties file (comments skipped)."""
    pairs = (line.split("=", 1) for line in text.splitlines() if "=" in line and line[0] != "#")
    return {k.strip(): v.strip() for k, v in pairs}


def listening_addresses(cluster: ProcessCluster) -> set[str]:
    """The addresses the cluster's processes listen on (``ss``), e.g. {"127.0.0.1"}."""
    pids = {n.proc.pid for n in cluster.nodes if n.proc is not None}
    out = subprocess.run(["ss", "-ltnpH"], capture_output=True, text=True, check=True).stdout
    found = set()
    for line in out.splitlines():
        if any(f"pid={pid}," in line for pid in pids):
            found.add(line.split()[3].rsplit(":", 1)[0])
    return found
