"""CPU isolation of a local run (``[broker] cpus = N``): the key's checks (one line naming
it), what a process started from a pinned thread inherits, and the verdict judging each
side against its own cores (synthetic telemetry)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from brokers.connection import Destination
from tests.test_scenario import error_lines, write
from workload.engine.cpu_pins import STARTED_ON, CpuPins
from workload.engine.faults import ClusterFaults
from workload.model.errors import ScenarioError
from workload.model.faults import FaultRecord
from workload.model.host_limits import HostLimits
from workload.model.scenario_file import load_scenario
from workload.model.verdict import (
    BROKER_CPU,
    CLIENT_CPU,
    NONE,
    SHARED_HOST,
    NodeUsage,
    Usage,
    pinned_cores,
    point_usage,
    verdict,
)

BASE = 'name = "t"\n[broker]\nsystem = "redis"\n'


def test_cpus_is_checked_against_this_machine_in_one_line(tmp_path: Path) -> None:
    path = write(tmp_path, BASE + "cpus = 2\n")
    with pytest.raises(ScenarioError) as caught:
        load_scenario(path, HostLimits(cores=2))
    (line,) = caught.value.lines
    assert line == (
        f"{path}: broker.cpus: 2 cores for the broker leave the clients none: this machine "
        "has 2; at most 1, or leave cpus out to share them all (line 4)"
    )
    assert load_scenario(path, HostLimits(cores=4)).broker.cpus == 2
    assert load_scenario(path).broker.cpus == 2  # no host: nothing of this machine asked
    (line,) = error_lines(tmp_path, BASE + "cpus = 0\n")
    assert "broker.cpus" in line and "greater than or equal to 1" in line
    (line,) = error_lines(
        tmp_path,
        BASE.replace("[broker]\n", "[broker]\ndeployment = 'endpoints'\n")
        + 'endpoints = ["127.0.0.1:6379"]\ncpus = 1\n',
    )
    assert "broker.cpus: cpus pins a broker started here" in line


def test_the_split_in_words_and_in_the_run_context() -> None:
    pins = CpuPins((0,), (1, 2, 3))
    assert pins.words() == "the broker on core 0, the clients on cores 1, 2, 3"
    assert pins.describe() == {"broker": [0], "clients": [1, 2, 3]}
    assert pinned_cores(pins.describe()) == (1, 3) == pins.cores


def test_the_broker_side_and_the_clients_side_are_inherited_by_what_they_start() -> None:
    if len(STARTED_ON) < 2:
        pytest.skip("one core: nothing to split")
    pins = CpuPins.of(1)
    assert pins is not None and pins.broker == STARTED_ON[:1]
    assert pins.clients == STARTED_ON[1:] and pins.cores == (1, len(STARTED_ON) - 1)
    before = os.sched_getaffinity(0)
    show = [sys.executable, "-c", "import os; print(sorted(os.sched_getaffinity(0)))"]
    with pins.broker_side():
        started = subprocess.run(show, capture_output=True, text=True, check=True)
    assert started.stdout.strip() == str(list(pins.broker))
    with pins.clients_side():
        started = subprocess.run(show, capture_output=True, text=True, check=True)
    assert started.stdout.strip() == str(list(pins.clients))
    assert os.sched_getaffinity(0) == before  # the thread is back where it was
    with pytest.raises(ValueError, match=r"broker\.cpus"):
        CpuPins.of(len(STARTED_ON))
    assert CpuPins.of(None) is None


def node(role: str, name: str, cpu: float, **more: float) -> NodeUsage:
    return NodeUsage(role=role, node=name, cores=2.0, processes=1.0, cpu_pct=cpu, **more)  # type: ignore[arg-type]


def test_pinned_each_side_is_judged_against_its_own_cores() -> None:
    # Redis at batches of 800 on its one pinned core: 93 % of it, the machine 150 % busy
    redis = (
        node("broker", "redis", 93.0, thread_max_pct=80.0),
        node("sender", "sender-0", 30.0, process_max_pct=30.0),
        node("receiver", "receiver-0", 20.0, process_max_pct=20.0),
        node("host", "host", 150.0),
    )
    judged = verdict(Usage(redis, pinned=(1, 1)))
    assert judged.limit == BROKER_CPU
    assert judged.reason.startswith("the broker nodes used 93 % of a core, of the 1 core pinned")
    assert verdict(Usage(redis)).limit == NONE  # unpinned: 93 % of two cores is not saturated
    # the clients, three processes at a third of a core each, fill their one core
    clients = (
        node("broker", "b0", 40.0),
        node("sender", "sender-0", 50.0, process_max_pct=30.0),
        node("receiver", "receiver-0", 45.0, process_max_pct=30.0),
        node("host", "host", 190.0),
    )
    judged = verdict(Usage(clients, pinned=(1, 1)))
    assert judged.limit == CLIENT_CPU
    assert "the clients used 95 % of a core, of the 1 core pinned to them" in judged.reason
    # the machine 95 % busy but neither side at its cores: not the shared host's
    busy = (
        node("broker", "b0", 80.0),
        node("sender", "sender-0", 80.0, process_max_pct=50.0),
        node("host", "host", 190.0),
    )
    assert verdict(Usage(busy)).limit == SHARED_HOST
    assert verdict(Usage(busy, pinned=(1, 1))).limit == NONE


def test_the_pins_reach_the_verdict_from_the_run_context() -> None:
    assert pinned_cores({"broker": [0], "clients": [1, 2, 3]}) == (1, 3)
    assert pinned_cores(None) is None and pinned_cores({"broker": []}) is None
    host = [node("broker", "b0", 95.0), node("host", "host", 120.0)]
    usage = point_usage(
        host, rate=None, workers=1, max_in_flight=1, send_msgs_per_s=1.0, pinned=(1, 1)
    )
    assert usage.pinned == (1, 1) and verdict(usage).limit == BROKER_CPU
    # machines apart (AWS): nothing was pinned
    apart = [node("broker", "b0", 95.0), node("host", "host-broker-0", 120.0)]
    usage = point_usage(
        apart, rate=None, workers=1, max_in_flight=1, send_msgs_per_s=1.0, pinned=(1, 1)
    )
    assert usage.pinned is None


def test_a_node_a_fault_stops_and_starts_again_starts_on_the_brokers_cores() -> None:
    if len(STARTED_ON) < 2:
        pytest.skip("one core: nothing to split")
    pins = CpuPins.of(1)
    assert pins is not None
    seen: list[set[int]] = []

    class Cluster:  # what ClusterFaults calls of a local cluster
        def fault(self, node: str, action: str) -> None:
            seen.append(os.sched_getaffinity(0))

        def recover(self, node: str, action: str, timeout: float) -> None:
            seen.append(os.sched_getaffinity(0))

    actuator = ClusterFaults(Cluster(), Destination("q"), pins)  # type: ignore[arg-type]
    record = FaultRecord(index=0, action="kill", selector="0", at_s=1.0, until_s=2.0, node="n0")
    with pins.clients_side():  # where the fault clock's thread runs
        actuator.begin(record)
        actuator.end(record, "until")
        assert os.sched_getaffinity(0) == set(pins.clients)
    assert seen == [set(pins.broker)] * 2
