"""Shared test set-up: one pytest marker per broker system (from the registry), the local
brokers the tests share (at most one running at a time, its tests run side by side), a
session-wide local Spark fixture, and helpers to run the CLI."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from brokers import registry
from brokers.base import BrokerSystem, LocalCluster

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = ROOT / "workload" / "scenarios"


def pytest_configure(config: pytest.Config) -> None:
    for name, system in registry.systems().items():
        config.addinivalue_line(
            "markers", f"{name}: needs {system.title} (real server or stand-in)"
        )


class LocalBrokers:
    """The local brokers of a test session, started on first use and shared by every test
    of their system (``tests/test_<system>.py`` and the conformance suite); at most one
    runs at a time: asking for another system or topology stops the previous one, and it
    is stopped once the tests of its system are done (:func:`pytest_runtest_teardown`),
    leaving no data behind."""

    def __init__(self) -> None:
        self.key: tuple[str, str] | None = None
        self.running: LocalCluster | None = None
        self.workdir = Path()

    def get(self, system: BrokerSystem[Any], topology: str) -> LocalCluster:
        """The system's ``topology`` started here with default parameters (skipped, naming
        why, if it cannot start here); a cluster one of whose nodes died is started again."""
        assert system.local is not None, f"{system.name} has no local deployment"
        reason = system.local.missing()
        if reason:
            pytest.skip(reason)
        key = (system.name, topology)
        if self.running is not None and (self.key != key or self.running.dead_nodes()):
            self.stop()
        if self.running is None:
            top = Path(tempfile.mkdtemp(prefix=f"brokerbench-test-{system.name}-"))
            self.workdir = top / "c"
            self.running = system.local.start(topology, system.params_model(), self.workdir)
            self.key = key
        return self.running

    def stop(self) -> None:
        running, self.running, self.key = self.running, None, None
        if running is not None:
            workdir = self.workdir
            running.stop()
            assert not workdir.exists(), f"stop() left {workdir} behind"
            workdir.parent.rmdir()


_BROKERS = pytest.StashKey[LocalBrokers]()


@pytest.fixture(scope="session")
def local_brokers(request: pytest.FixtureRequest) -> Iterator[LocalBrokers]:
    brokers = request.config.stash.setdefault(_BROKERS, LocalBrokers())
    yield brokers
    brokers.stop()


def system_of(item: pytest.Item) -> str | None:
    """The broker system whose local broker ``item`` may use: the parameter of a
    conformance test, the system of a ``tests/test_<system>.py`` module; else None."""
    callspec = getattr(item, "callspec", None)
    if item.path.stem == "test_conformance":
        return str(callspec.params["system"]) if callspec is not None else None
    name = item.path.stem.removeprefix("test_")
    return name if name in registry.systems() else None


#: The ``xdist_group`` of the tests that start or use local servers (a broker, a cluster, a
#: run's brokers), by system: ``make test`` runs the suite in two worker processes
#: (``pytest -n 2 --dist loadgroup``), and each group runs whole in one of them, one test
#: after the other, so that a system's tests share its running broker (at most one per
#: worker) and see no other test of theirs beside them. The two groups take about as long
#: (~800 s each in a full run on the 2-core development machine); a system not listed here
#: goes to the second. The tests without servers (unit tests, Spark jobs, cloud plans) run
#: in whichever worker is free.
SERVER_GROUP_OF = dict.fromkeys(
    ("kafka", "kmq", "redpanda", "pulsar", "rocketmq", "artemis", "activemq", "sqs", "nats"),
    "servers-1",
)
OTHER_SERVER_GROUP = "servers-2"


def server_group(item: pytest.Item) -> str | None:
    """The group of a test that starts or uses a local server — it carries a system's
    marker or ``integration``, or uses the shared local brokers — else None."""
    marked = {mark.name for mark in item.iter_markers()}
    systems = sorted(marked & registry.systems().keys())
    if not systems and system_of(item) is not None:
        systems = [str(system_of(item))]
    if systems:
        return SERVER_GROUP_OF.get(systems[0], OTHER_SERVER_GROUP)
    if "integration" in marked or "local_brokers" in getattr(item, "fixturenames", ()):
        return OTHER_SERVER_GROUP
    return None


def pytest_itemcollected(item: pytest.Item) -> None:
    """Puts a test that starts servers in its ``xdist_group`` (:func:`server_group`) as it
    is collected (before pytest-xdist reads the groups)."""
    group = server_group(item)
    if group is not None:
        item.add_marker(pytest.mark.xdist_group(group))


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Runs each system's conformance tests beside its own module's tests, just before the
    first of them that uses the local broker, so that both share one running broker (with
    workers, pytest-xdist hands out the largest groups first: the two server groups)."""
    conformance: dict[str, list[pytest.Item]] = {}
    rest: list[pytest.Item] = []
    for item in items:
        system = system_of(item)
        if system is not None and item.path.stem == "test_conformance":
            conformance.setdefault(system, []).append(item)
        else:
            rest.append(item)
    ordered: list[pytest.Item] = []
    for item in rest:
        system = system_of(item)
        if system in conformance and "local_brokers" in getattr(item, "fixturenames", ()):
            ordered += conformance.pop(system)
        ordered.append(item)
    for group in conformance.values():  # systems whose own tests were not selected
        ordered += group
    items[:] = ordered


def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """Stops the local broker once the tests of its system are done."""
    brokers = item.config.stash.get(_BROKERS, None)
    if brokers is None or brokers.key is None:
        return
    if nextitem is None or system_of(nextitem) != brokers.key[0]:
        brokers.stop()


def brokerbench(*args: str, timeout: float = 600, env: dict[str, str] | None = None):
    """Run the ``brokerbench`` CLI in a subprocess; returns the CompletedProcess."""
    return subprocess.run(
        [sys.executable, "-m", "workload.shell.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        check=False,
    )


def read_summary(results: Path) -> list[dict[str, str]]:
    """The rows of the single run's ``summary.csv`` under a results directory."""
    (path,) = results.glob("*/analysis/summary.csv")
    with path.open() as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="session")
def spark():
    from analysis.session import INTERPRETED, end_local_jvm, spark_session

    # The tests' runs are small: Spark's plans are interpreted, as for a small run's
    # analysis (analysis.session.INTERPRETED_BYTES); the command-line runs of more raw
    # records than that exercise the compiled plans.
    session = spark_session(
        "brokerbench-tests",
        cores=2,
        settings=INTERPRETED,
        write_archive=False,  # (the command-line runs write it: their JVMs end sooner)
    )
    yield session
    session.stop()
    end_local_jvm(orderly=True)
