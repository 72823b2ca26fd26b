"""Scenario values that used to be accepted and then silently changed or ignored: each is now
one line naming the file, the key and its line."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.test_scenario import GOOD, error_lines, write
from workload.model.scenario import expand
from workload.model.scenario_file import load_scenario

SEARCH = """
name = "t"
[broker]
system = "redis"
[search]
slo_p99 = "20ms"
low = 100
high = 1000
"""


def one_line(tmp_path: Path, text: str) -> str:
    (line,) = error_lines(tmp_path, text)
    assert line.startswith(f"{tmp_path / 's.toml'}: ")
    return line.removeprefix(f"{tmp_path / 's.toml'}: ")


@pytest.mark.parametrize(
    ("key", "value", "line"),
    [
        ("step", '"1ms"', 9),
        ("step", '"1.5s"', 9),
        ("step", "0.5", 9),
        ("window", '"2500ms"', 9),
    ],
)
def test_windows_and_steps_are_whole_seconds(
    tmp_path: Path, key: str, value: str, line: int
) -> None:
    """The analysis works on per-second records: it would read a step of 1 ms as 1 s."""
    text = f"{GOOD}[measurement]\n{key} = {value}\n"
    assert one_line(tmp_path, text) == (
        f"measurement.{key}: {_seconds(value)} s: must be whole seconds, at least 1 s "
        f"(records are per second) (line {line})"
    )


def _seconds(value: str) -> str:
    return {'"1ms"': "0.001", '"1.5s"': "1.5", "0.5": "0.5", '"2500ms"': "2.5"}[value]


def test_whole_seconds_in_any_unit_are_accepted(tmp_path: Path) -> None:
    text = f'{GOOD}[measurement]\nwindow = "0.5m"\nstep = "2000ms"\n'
    measurement = load_scenario(write(tmp_path, text)).measurement
    assert (measurement.window, measurement.step) == (30.0, 2.0)


def test_failure_timeout_has_a_floor_of_1_s(tmp_path: Path) -> None:
    text = GOOD.replace('duration = "2m"', 'duration = "2m"\nfailure_timeout = "1ms"')
    assert one_line(tmp_path, text) == (
        "load.failure_timeout: 0.001 s is below the minimum of 1 s: a worker would give up "
        "at its first failed call (line 8)"
    )
    accepted = GOOD.replace('duration = "2m"', 'duration = "2m"\nfailure_timeout = "1s"')
    assert load_scenario(write(tmp_path, accepted)).load.failure_timeout == 1.0


def test_an_slo_has_a_floor_of_the_histograms_resolution(tmp_path: Path) -> None:
    text = SEARCH.replace('"20ms"', '"0.0000001ms"')
    assert one_line(tmp_path, text) == (
        "search.slo_p99: 1e-10 s is below the minimum of 1 µs: the latency histograms "
        "resolve nothing finer (line 6)"
    )
    search = load_scenario(write(tmp_path, SEARCH.replace('"20ms"', '"0.001ms"'))).search
    assert search is not None and search.slo_p99 == pytest.approx(1e-6)


def test_options_with_a_broker_started_here_are_an_error(tmp_path: Path) -> None:
    text = GOOD.replace('system = "postgresql"', 'system = "postgresql"\noptions = { a = "b" }')
    assert one_line(tmp_path, text) == (
        "broker.options: options are connection extras for deployment = 'endpoints': a "
        "broker started here takes none; leave them out (line 5)"
    )


@pytest.mark.parametrize("name", ["a..", "a.", ".a", "a..b", "a/b", "..", "a b", "a--b", "-a"])
def test_a_name_is_safe_in_file_names_and_keys(tmp_path: Path, name: str) -> None:
    line = one_line(tmp_path, GOOD.replace('name = "t"', f'name = "{name}"'))
    assert line == (
        f"name: {name!r}: a name is letters and digits, with single '.', '-' or '_' between "
        "them (it becomes part of run ids, file names and S3 keys) (line 2)"
    )


@pytest.mark.parametrize("name", ["t", "redis-smoke", "kafka_3.7-acks.all", "A1"])
def test_ordinary_names_are_accepted(tmp_path: Path, name: str) -> None:
    text = GOOD.replace('name = "t"', f'name = "{name}"')
    assert load_scenario(write(tmp_path, text)).name == name


def test_a_value_swept_twice_is_an_error(tmp_path: Path) -> None:
    lines = error_lines(tmp_path, GOOD + "[sweep]\nthreads = [1, 1, 1, 1]\n")
    prefix = f"{tmp_path / 's.toml'}: "
    assert lines == [
        f"{prefix}sweep.threads[{i}]: 1 is swept already (sweep.threads[0]): each value once "
        "— repeat runs every point more than once (line 9)"
        for i in (1, 2, 3)
    ]


def test_a_broker_parameter_swept_twice_is_an_error(tmp_path: Path) -> None:
    text = (
        GOOD
        + '[sweep]\nthreads = [1, 2]\nparams = { replication = ["asynchronous", "asynchronous"] }\n'
    )
    assert one_line(tmp_path, text) == (
        "sweep.params.replication[1]: 'asynchronous' is swept already (sweep.params.replication[0]): "
        "each value once — repeat runs every point more than once (line 10)"
    )


def test_the_same_explicit_point_twice_is_an_error(tmp_path: Path) -> None:
    points = "[[sweep.points]]\nthreads = 2\n" * 2 + "[[sweep.points]]\nthreads = 3\n"
    line = one_line(tmp_path, GOOD + points)
    assert line.startswith(
        "sweep.points[1]: the same point as sweep.points[0]: each point once — repeat runs "
        "every point more than once"
    )


def test_distinct_values_and_repeat_still_run_every_point(tmp_path: Path) -> None:
    text = GOOD.replace('name = "t"', 'name = "t"\nrepeat = 2') + "[sweep]\nthreads = [1, 2]\n"
    assert len(expand(load_scenario(write(tmp_path, text)))) == 4
