"""Hostile scenario files: mutations of the shipped scenarios either load or fail cleanly.

Each mutated file must either load — and then every number of every sweep point lies within
the documented limits, kept here as an independent table — or raise ``ScenarioError`` whose
every line is one printable line starting with the file's path. Nothing else may escape and
nothing may hang.
"""

from __future__ import annotations

import math
import re
import signal
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import FrameType

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from brokers.connection import split_host_port
from tests.conftest import SCENARIOS
from workload.engine.search import probe_point
from workload.model.errors import ScenarioError
from workload.model.scenario import Scenario, expand
from workload.model.scenario_file import load_scenario
from workload.model.sections import LoadSection
from workload.model.sweep import SweepPoint

WEEK = 7 * 24 * 3600.0
MIB = 2**20

#: The documented limits of every ``[load]`` key: (type, lowest, highest).
LOAD_LIMITS: dict[str, tuple[type, float, float]] = {
    "threads": (int, 1, 10_000),
    "sender_nodes": (int, 1, 1_000),
    "receiver_nodes": (int, 1, 2_000),
    "message_size": (int, 72, 16 * MIB),
    "min_send_batch": (int, 1, 100_000),
    "max_send_batch": (int, 1, 100_000),
    "receive_batch": (int, 1, 100_000),
    "pool_size": (int, 1, 1_000_000),
    "messages": (int, 1, 10**12),
    "rate": (float, 0.001, 1e8),
    "max_in_flight": (int, 1, 1_000),
    "processes": (int, 1, 1_024),
    "duration": (float, 0, WEEK),
    "idle_timeout": (float, 0, WEEK),
    "failure_timeout": (float, 1, WEEK),
    "keys": (int, 1, 1_000_000),
    "key_zipf": (float, 0, 10),
    "sender_threads": (int, 1, 10_000),
    "receiver_threads": (int, 1, 10_000),
}
#: Keys whose lowest value is excluded (a duration of 0 is not allowed).
ABOVE_LOWEST = {"duration", "idle_timeout", "key_zipf"}
POOL_BYTES = 2**30
SWEEP_POINTS = 10_000
#: The floors of the durations the code acts on once a second (issue 42).
TELEMETRY_INTERVAL = (1.0, 60.0)
DRAIN_LIMIT = (0.1, WEEK)
#: How deep tables and arrays nest, and how many entries one holds, at most.
NESTING = 16
ENTRIES = 10_000
DEEP_KEYS = ".".join(["a"] * 1_000)
NAME_CHARS = 64
DESCRIPTION_CHARS = 2_000

SHIPPED = sorted(SCENARIOS.glob("*.toml"))
HOSTILE_VALUES = [
    "0",
    "-1",
    "1",
    "3",
    "true",
    "false",
    '"100"',
    '"30s"',
    '"500ms"',
    '"2m"',
    '"7d"',
    '"99999999999h"',
    '"١٢٣"',
    "0.5",
    "2.0",
    "1e-300",
    "1e300",
    "inf",
    "-inf",
    "nan",
    "10000",
    "10001",
    "1000",
    "2000",
    "100000",
    "1000000",
    "16777216",
    "604800",
    '"168h"',
    '"169h"',
    "0.001",
    "100000000",
    "16777217",
    "1000000000",
    "9223372036854775807",
    "100000000000000000000000000000",
    '"::1"',
    '["::1"]',
    '["a b c:80"]',
    '["$(id):80"]',
    '["-oProxyCommand=x:22"]',
    '["[::1]:9092"]',
    '["h:٨٠"]',
    '["localhost:65536"]',
    "[]",
    "[0]",
    "[10000000000]",
    "[1, 2, 3]",
    "[200000, 100]",
    "[[1]]",
    "{}",
    "{ a = 1 }",
    "{ streams = [1, 2] }",
    '"' + "a" * 300 + '"',
    "1979-05-27",
    "[" * 60 + "]" * 60,
    "[" * 300 + "]" * 300,
    "{ a = " * 20 + "1" + " }" * 20,
    '"\\u0000"',
    '"line\\nbreak"',
    '"\\u2028"',
]
KEYS = [
    *LOAD_LIMITS,
    "warmup",
    "window",
    "step",
    "name",
    "description",
    "system",
    "deployment",
    "topology",
    "endpoints",
    "options",
    "params",
    "points",
    "repeat",
    "slo_p99",
    "low",
    "high",
    "precision",
    "max_probes",
    "thredas",
    "telemetry_interval",
    "drain_limit",
    "max_points",
    DEEP_KEYS,
    '"odd\\nkey"',
]
TABLES = [
    "[load]",
    "[measurement]",
    "[broker]",
    "[broker.params]",
    "[sweep]",
    "[[sweep.points]]",
    "[search]",
    "[backlog]",
    f"[{DEEP_KEYS}]",
    f"[[{DEEP_KEYS}]]",
    f"[broker.params.{DEEP_KEYS}]",
]


@contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Fail (instead of hanging) when the body takes longer than ``seconds``."""

    def expire(signum: int, frame: FrameType | None) -> None:
        raise TimeoutError(f"no result after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def check_endpoint(endpoint: str) -> None:
    """The endpoint rules, checked independently: no spaces, shell characters or option look."""
    host, port = split_host_port(endpoint)
    assert re.fullmatch(r"[0-9]{1,5}", endpoint.rpartition(":")[2])
    assert 1 <= port <= 65535
    assert host and not host.startswith("-")
    assert not set(host) & set(" \t\n$`;&|<>()'\"\\*?!{}=%")
    assert ":" not in host or endpoint.startswith("[")


def check_load(load: LoadSection) -> None:
    assert set(type(load).model_fields) == set(LOAD_LIMITS), "every [load] key needs a limit"
    for key, (kind, lowest, highest) in LOAD_LIMITS.items():
        value = getattr(load, key)
        if value is None:
            continue
        if key == "message_size":  # a distribution: every size it draws within the limits
            drawn = value.draw(100, seed=0)
            assert lowest <= min(drawn) and max(drawn) <= value.upper, (key, value)
            value = value.upper
        assert type(value) is kind, (key, value)
        assert math.isfinite(value), (key, value)
        assert value > lowest if key in ABOVE_LOWEST else value >= lowest, (key, value)
        assert value <= highest, (key, value)
    assert load.pool_size * load.message_size.upper <= POOL_BYTES
    assert load.min_send_batch <= load.max_send_batch


def check_accepted(scenario: Scenario, points: list[SweepPoint]) -> None:
    """Everything an accepted scenario holds lies within the documented limits."""
    assert len(scenario.name) <= NAME_CHARS
    assert re.fullmatch(r"[A-Za-z0-9]+(?:[._-][A-Za-z0-9]+)*", scenario.name)
    assert len(scenario.description) <= DESCRIPTION_CHARS
    for endpoint in scenario.broker.endpoints:
        check_endpoint(endpoint)
    check_load(scenario.load)
    measurement, duration = scenario.measurement, scenario.load.duration
    assert measurement.warmup is not None and 0 <= measurement.warmup < duration
    assert 1 <= measurement.step <= measurement.window <= WEEK
    assert measurement.step.is_integer() and measurement.window.is_integer()
    if "window" in measurement.model_fields_set:
        assert measurement.window <= duration
    low, high = TELEMETRY_INTERVAL
    assert low <= measurement.telemetry_interval <= high
    if scenario.backlog is not None:
        assert DRAIN_LIMIT[0] <= scenario.backlog.drain_limit <= DRAIN_LIMIT[1]
    assert 1 <= len(points) <= SWEEP_POINTS
    if scenario.sweep.max_points is not None:
        assert len(points) <= scenario.sweep.max_points
    assert shape(scenario.model_dump()) <= (NESTING, ENTRIES)
    for point in points:
        check_load(point.load)
        assert point.load.receiver_nodes is not None


def shape(data: object, depth: int = 1) -> tuple[int, int]:
    """(deepest nesting, most entries of one table or array) of accepted data."""
    if isinstance(data, dict | list):
        items = list(data.values() if isinstance(data, dict) else data)
        inner = [shape(item, depth + 1) for item in items]
        return (
            max([depth, *(d for d, _ in inner)]),
            max([len(items), *(n for _, n in inner)]),
        )
    return depth - 1, 0


def check(path: Path) -> None:
    """Load (and expand) one file: a clean failure, or an accepted scenario within limits."""
    try:
        with time_limit(10):
            scenario = load_scenario(path)
            points = expand(scenario) if scenario.search is None else search_bounds(scenario)
    except ScenarioError as exc:
        assert exc.lines
        for line in exc.lines:
            assert line.startswith(f"{path}: "), line
            assert line.isprintable(), line
        return
    check_accepted(scenario, points)


def search_bounds(scenario: Scenario) -> list[SweepPoint]:
    """A capacity search's probes at its lowest and highest rates (every other lies between)."""
    assert scenario.search is not None
    return [
        probe_point(scenario, i, r)
        for i, r in enumerate((scenario.search.low, scenario.search.high))
    ]


@st.composite
def mutated(draw: st.DrawFn) -> str:
    """A shipped scenario with one to three mutations: values, keys, tables, lines, bytes."""
    lines = draw(st.sampled_from(SHIPPED)).read_text(encoding="utf-8").splitlines()
    for _ in range(draw(st.integers(1, 3))):
        at = draw(st.integers(0, len(lines)))
        kinds = ["value", "scale", "insert", "table", "delete", "copy", "splice"]
        kind = draw(st.sampled_from(kinds))
        value = draw(st.sampled_from(HOSTILE_VALUES))
        if kind == "value":
            assigned = [i for i, line in enumerate(lines) if "=" in line]
            if assigned:
                i = draw(st.sampled_from(assigned))
                lines[i] = lines[i].split("=", 1)[0] + "= " + value
        elif kind == "scale":
            numbered = [i for i, line in enumerate(lines) if re.search(r"= .*[0-9]", line)]
            if numbered:
                i = draw(st.sampled_from(numbered))
                factor = draw(st.sampled_from([0, 0.5, 2, 10, 1000, 10**6]))
                lines[i] = re.sub(r"[0-9]+", lambda m, f=factor: str(int(m[0]) * f), lines[i])
        elif kind == "insert":
            lines.insert(at, f"{draw(st.sampled_from(KEYS))} = {value}")
        elif kind == "table":
            lines[at:at] = [
                draw(st.sampled_from(TABLES)),
                f"{draw(st.sampled_from(KEYS))} = {value}",
            ]
        elif kind == "delete" and lines:
            del lines[min(at, len(lines) - 1)]
        elif kind == "copy" and lines:
            lines.insert(at, lines[draw(st.integers(0, len(lines) - 1))])
        elif kind == "splice":
            text = "\n".join(lines)
            cut = draw(st.integers(0, len(text)))
            noise = draw(st.text(max_size=8))
            lines = (text[:cut] + noise + text[cut:]).split("\n")
    return "\n".join(lines) + "\n"


@settings(
    max_examples=300,
    deadline=None,
    database=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(mutated())
def test_mutated_scenarios_load_or_fail_cleanly(text: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "mutated.toml"
        path.write_text(text, encoding="utf-8")
        check(path)


def test_every_key_with_every_hostile_value(tmp_path: Path) -> None:
    """Each [load] and [measurement] key and each sweep list set to each hostile value."""
    base = (SCENARIOS / "postgresql-smoke.toml").read_text(encoding="utf-8")
    path = tmp_path / "hostile.toml"
    tables = {key: "load" for key in LOAD_LIMITS} | {"window": "measurement", "step": "measurement"}
    tables |= {"warmup": "measurement", "telemetry_interval": "measurement"}
    for key, table in tables.items():
        kept = "\n".join(x for x in base.splitlines() if not x.startswith(f"{key} ="))
        for value in HOSTILE_VALUES:
            path.write_text(kept.replace(f"[{table}]", f"[{table}]\n{key} = {value}", 1))
            check(path)
    for key in (
        "threads",
        "sender_nodes",
        "receiver_nodes",
        "message_size",
        "sender_threads",
        "receiver_threads",
    ):
        for value in HOSTILE_VALUES:
            path.write_text(f"{base}\n[sweep]\n{key} = [{value}]\n")
            check(path)
