"""Helpers the broker test modules share: draining an adapter, reading properties files,
the addresses a local cluster listens on, the files that hold its password, and a
scenario's smoke run against a running cluster."""

from __future__ import annotations

import contextlib
import json
import subprocess
import tempfile
import time
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import toml

from brokers.base import (
    Adapter,
    AsyncAdapter,
    BrokerSystem,
    Destination,
    Endpoints,
    LocalCluster,
    Received,
    Topology,
)
from brokers.connection import BrokerParams
from brokers.local import ProcessCluster
from workload.model.scenario import Scenario


def memory_system(adapter: Adapter[Any] | AsyncAdapter[Any]) -> BrokerSystem[Any]:
    """A system whose every connection is ``adapter`` (an in-memory stand-in, blocking or
    asyncio), for tests that run node code without a broker."""

    def connect(*_: Any) -> Any:
        return adapter

    async def connect_async(*_: Any) -> Any:
        return adapter

    return BrokerSystem(
        name="memory",
        title="Memory",
        params_model=BrokerParams,
        connect=connect_async if isinstance(adapter, AsyncAdapter) else connect,
        adapters=(type(adapter),),
        prepare=lambda endpoints, params, destination: None,
        describe=lambda endpoints, params: {},
        reference_topology=Topology({"broker": 1}),
    )


def node_spec(run_dir: Path, load: Any, role: str = "sender", system: str = "memory") -> Any:
    """Node 0 of sweep point 0 of run "r", in ``role``, with this load section."""
    from workload.engine.node import NodeSpec

    return NodeSpec(
        run_dir=run_dir,
        run_id="r",
        tag="t0000000.0",
        point=0,
        role=role,
        node=0,
        system=system,
        endpoints=Endpoints(("127.0.0.1:1",)),
        params={},
        destination="d",
        load=load,
    )


def receive_bodies(adapter: Any, wanted: set[bytes], timeout: float = 60) -> list[bytes]:
    """Receive and acknowledge until every wanted body arrived (or the timeout)."""
    bodies: list[bytes] = []
    deadline = time.monotonic() + timeout
    while not wanted <= set(bodies) and time.monotonic() < deadline:
        messages = adapter.receive(10)
        bodies += [m.body for m in messages]
        adapter.ack([m.receipt for m in messages])
    return bodies


def receive_count(
    adapter: Any, wanted: int, timeout: float = 60, ack: bool = True
) -> list[Received[Any]]:
    """Receive (and acknowledge) until ``wanted`` messages arrived (or the timeout)."""
    got: list[Received[Any]] = []
    deadline = time.monotonic() + timeout
    while len(got) < wanted and time.monotonic() < deadline:
        messages = adapter.receive(10)
        got += messages
        if ack and messages:
            adapter.ack([m.receipt for m in messages])
    return got


def drain(adapter: Any, wanted: int, timeout: float = 30) -> list[Received[Any]]:
    """Receive without acknowledging until ``wanted`` messages arrived (or the timeout)."""
    return receive_count(adapter, wanted, timeout, ack=False)


def prepared(system: BrokerSystem[Any], endpoints: Endpoints, name: str, **values: Any) -> Any:
    """A worker's adapter on a freshly prepared destination, with these parameters."""
    params = system.params_model.model_validate(values)
    destination = Destination(name)
    system.prepare(endpoints, params, destination)
    return system.connect(endpoints, params, destination)


@contextlib.contextmanager
def sender_and_receiver(
    system: BrokerSystem[Any], endpoints: Endpoints, params: Any, name: str
) -> Iterator[tuple[Any, Any]]:
    """Two workers' adapters on a freshly prepared destination; closed afterwards."""
    destination = Destination(name)
    system.prepare(endpoints, params, destination)
    sender = system.connect(endpoints, params, destination)
    receiver = system.connect(endpoints, params, destination)
    try:
        yield sender, receiver
    finally:
        sender.close()
        receiver.close()


def local_cluster(system: BrokerSystem[Any], topology: str, params: Any) -> Iterator[LocalCluster]:
    """For a module fixture: the system started here (skipped, naming why, if it cannot)."""
    assert system.local is not None
    reason = system.local.missing()
    if reason:
        pytest.skip(reason)
    workdir = Path(tempfile.mkdtemp(prefix=f"brokerbench-test-{system.name}-"))
    with system.local.start(topology, params, workdir) as running:
        yield running


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


def files_holding(cluster: ProcessCluster, secret: str) -> dict[str, int]:
    """Files of a local cluster (its work directory and further directories) whose content
    holds ``secret``: path → permission bits."""
    needle = secret.encode()
    found = {}
    for directory in [cluster.workdir, *cluster.cleanup]:
        for path in directory.rglob("*"):
            try:
                if path.is_file() and not path.is_symlink() and needle in path.read_bytes():
                    found[str(path)] = path.stat().st_mode & 0o777
            except OSError:  # a file the server removed meanwhile
                continue
    return found


@dataclass(frozen=True)
class SmokeRun:
    """What a smoke run left: its one summary row, its run context and the summary the
    terminal shows of it (``brokerbench report``'s)."""

    row: dict[str, str]
    context: dict[str, Any]
    printed: str


def run_against(
    scenario: Path,
    endpoints: Endpoints,
    tmp_path: Path,
    sections: dict[str, dict[str, Any]] | None = None,
) -> Path:
    """Run ``scenario``'s load with ``brokerbench run --no-analysis`` against a running
    cluster's ``endpoints`` (its broker becomes ``deployment = "endpoints"``), with the
    keys of ``sections`` (e.g. ``{"load": {"duration": "5s"}}``) replaced; the run's
    directory."""
    from tests.conftest import brokerbench

    loaded = tomllib.loads(scenario.read_text())
    broker = loaded["broker"]
    broker.pop("topology", None)
    broker.update(
        deployment="endpoints",
        endpoints=list(endpoints.hosts),
        options=dict(endpoints.extra),
    )
    for section, values in (sections or {}).items():
        loaded.setdefault(section, {}).update(values)
    path = tmp_path / scenario.name
    path.write_text(toml.dumps(loaded))
    results = tmp_path / "results"
    done = brokerbench("run", str(path), "--results", str(results), "--no-analysis")
    assert done.returncode == 0, done.stderr[-2000:]
    (run_dir,) = (p.parent for p in results.glob("*/context.json"))
    assert f"analyse it with: brokerbench report {run_dir}" in done.stdout
    return run_dir


def smoke_run(scenario: Path, endpoints: Endpoints, spark: Any, tmp_path: Path) -> SmokeRun:
    """Run ``scenario``'s load, shortened to 5 s, against a running cluster's ``endpoints``
    (:func:`run_against`), then analyse it with the session's Spark. The command line's
    own analysis is exercised by test_end_to_end."""
    from analysis.console import run_summary
    from analysis.job import analyse
    from tests.conftest import read_summary

    # Shortened to 5 s of sending (windows of 3 s): the load's length is not what this
    # checks, and every system runs it.
    short = {"load": {"duration": "5s"}, "measurement": {"window": "3s"}}
    run_dir = run_against(scenario, endpoints, tmp_path, short)
    broker = tomllib.loads(scenario.read_text())["broker"]
    rows = analyse(spark, run_dir)
    (row,) = read_summary(tmp_path / "results")
    assert row["broker"] == broker["system"]
    context = json.loads((run_dir / "context.json").read_text())
    return SmokeRun(row, context, run_summary(context, rows))


def small_scenario(tmp_path: Path, system: str, more: str) -> Scenario:
    """The scenario of a file naming ``system`` with two threads for a minute, and the
    TOML ``more`` (keys of ``[load]``, then any tables), loaded as ``brokerbench`` loads it."""
    from workload.model.scenario_file import load_scenario

    path = tmp_path / "s.toml"
    path.write_text(
        f'name = "t"\n[broker]\nsystem = "{system}"\n[load]\nthreads = 2\nduration = "1m"\n' + more
    )
    return load_scenario(path)
