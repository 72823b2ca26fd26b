"""Scenario parsing: defaults, sweeps and every kind of bad input as one clear line."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import SCENARIOS, brokerbench
from workload.errors import ScenarioError
from workload.scenario import load_scenario, parse_duration
from workload.sweep import expand

GOOD = """
name = "t"
[broker]
system = "postgresql"
[load]
threads = 3
duration = "2m"
"""


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "s.toml"
    path.write_text(text)
    return path


def error_lines(tmp_path: Path, text: str) -> list[str]:
    with pytest.raises(ScenarioError) as info:
        load_scenario(write(tmp_path, text))
    return info.value.lines


def test_defaults_follow_the_spec(tmp_path: Path) -> None:
    s = load_scenario(write(tmp_path, GOOD))
    assert s.load.threads == 3
    assert s.load.duration == 120.0
    assert (s.load.message_size, s.load.max_send_batch, s.load.receive_batch) == (100, 10, 10)
    assert (s.load.pool_size, s.load.idle_timeout) == (10_000, 60.0)
    assert (s.measurement.window, s.measurement.step) == (60.0, 10.0)
    (point,) = expand(s)
    assert point.receiver_nodes == 2


def test_misspelt_key_names_file_key_and_line(tmp_path: Path) -> None:
    (line,) = error_lines(tmp_path, GOOD.replace("threads = 3", "thredas = 3"))
    assert line.startswith(str(tmp_path / "s.toml"))
    assert "load.thredas" in line and "unknown key" in line and "line 6" in line


def test_wrong_type(tmp_path: Path) -> None:
    (line,) = error_lines(tmp_path, GOOD.replace("threads = 3", 'threads = "many"'))
    assert "load.threads" in line and "integer" in line


def test_negative_count(tmp_path: Path) -> None:
    (line,) = error_lines(tmp_path, GOOD.replace("threads = 3", "threads = -2"))
    assert "load.threads" in line and "greater than 0" in line


def test_unknown_broker_lists_known_ones(tmp_path: Path) -> None:
    (line,) = error_lines(tmp_path, GOOD.replace('"postgresql"', '"postgres"'))
    assert "broker.system" in line and "unknown broker system 'postgres'" in line
    assert "redis" in line


def test_empty_file(tmp_path: Path) -> None:
    (line,) = error_lines(tmp_path, "  \n")
    assert "empty" in line


def test_not_toml(tmp_path: Path) -> None:
    (line,) = error_lines(tmp_path, "name = \n[broker")
    assert "not valid TOML" in line and "line 1" in line


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="no such file"):
        load_scenario(tmp_path / "nope.toml")


def test_broker_params_are_checked_against_the_system(tmp_path: Path) -> None:
    text = GOOD + '[broker.params]\nreplication = "sometimes"\nvisiblity_timeout = 3\n'
    lines = error_lines(tmp_path, text)
    assert any("broker.params.replication" in x for x in lines)
    assert any("broker.params.visiblity_timeout" in x and "unknown key" in x for x in lines)


def test_endpoints_deployment_needs_endpoints(tmp_path: Path) -> None:
    text = GOOD.replace('system = "postgresql"', 'system = "postgresql"\ndeployment = "endpoints"')
    (line,) = error_lines(tmp_path, text)
    assert "endpoints" in line


def test_durations() -> None:
    assert parse_duration("500ms") == 0.5
    assert parse_duration("2m") == 120.0
    assert parse_duration(7) == 7.0
    with pytest.raises(ValueError):
        parse_duration("soon")


def test_cartesian_sweep_in_declared_order(tmp_path: Path) -> None:
    text = GOOD + "[sweep]\nthreads = [1, 5, 25]\nsender_nodes = [1, 2, 4]\n"
    points = expand(load_scenario(write(tmp_path, text)))
    assert len(points) == 9
    assert [(p.load.threads, p.load.sender_nodes, p.receiver_nodes) for p in points[:4]] == [
        (1, 1, 2),
        (1, 2, 4),
        (1, 4, 8),
        (5, 1, 2),
    ]
    assert points[3].label == "threads=5 sender_nodes=1"


def test_explicit_points_and_param_sweep(tmp_path: Path) -> None:
    text = GOOD + (
        "[[sweep.points]]\nthreads = 2\nreceiver_nodes = 1\n"
        '[[sweep.points]]\nsender_nodes = 3\nparams = { replication = "asynchronous" }\n'
    )
    a, b = expand(load_scenario(write(tmp_path, text)))
    assert (a.load.threads, a.receiver_nodes, a.params["replication"]) == (2, 1, "synchronous")
    assert (b.load.threads, b.receiver_nodes, b.params["replication"]) == (3, 6, "asynchronous")


def test_lists_and_points_are_exclusive(tmp_path: Path) -> None:
    text = GOOD + "[sweep]\nthreads = [1]\n[[sweep.points]]\nthreads = 2\n"
    (line,) = error_lines(tmp_path, text)
    assert "either" in line


@pytest.mark.parametrize("path", sorted(SCENARIOS.glob("*.toml")), ids=lambda p: p.name)
def test_shipped_scenarios_are_valid(path: Path) -> None:
    assert expand(load_scenario(path))


def test_validate_cli_exits_2_with_one_line(tmp_path: Path) -> None:
    path = write(tmp_path, GOOD.replace("threads = 3", "thredas = 3"))
    done = brokerbench("validate", str(path))
    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "load.thredas" in lines[0] and str(path) in lines[0]
    assert "Traceback" not in done.stderr


def test_warmup_defaults_to_10_s_or_a_fifth_of_a_short_run(tmp_path: Path) -> None:
    assert load_scenario(write(tmp_path, GOOD)).measurement.warmup == 10.0
    short = load_scenario(write(tmp_path, GOOD.replace('"2m"', '"20s"')))
    assert short.measurement.warmup == 4.0
    given = load_scenario(write(tmp_path, GOOD + '[measurement]\nwarmup = "30s"\n'))
    assert given.measurement.warmup == 30.0


def test_warmup_as_long_as_the_run_is_an_error(tmp_path: Path) -> None:
    (line,) = error_lines(tmp_path, GOOD + '[measurement]\nwarmup = "2m"\n')
    assert "warmup" in line and "shorter than load.duration" in line


def test_batches_in_flight_need_a_system_that_can_keep_them(tmp_path: Path) -> None:
    (line,) = error_lines(tmp_path, GOOD + "max_in_flight = 4\n")
    assert "load.max_in_flight" in line and "only 1" in line
    nats = GOOD.replace('"postgresql"', '"nats"') + "max_in_flight = 4\n"
    assert load_scenario(write(tmp_path, nats)).load.max_in_flight == 4
    (line,) = error_lines(tmp_path, GOOD + "max_in_flight = 0\n")
    assert "load.max_in_flight" in line
