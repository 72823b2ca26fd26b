"""Scenario parsing: defaults, sweeps and every kind of bad input as one clear line."""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

import pytest
from pydantic import ValidationError

from brokers.connection import split_host_port
from tests.conftest import SCENARIOS, brokerbench
from workload.model import scenario_file
from workload.model.bounds import format_duration, parse_duration
from workload.model.errors import ScenarioError
from workload.model.scenario import Scenario, expand
from workload.model.scenario_file import load_scenario
from workload.model.sections import LoadSection
from workload.model.sweep import SWEEPABLE, SweepSection
from workload.shell import cli

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
    assert (s.load.message_size.fixed, s.load.max_send_batch) == (100, 10)
    assert s.load.receive_batch is None  # the system's own
    assert (s.load.pool_size, s.load.idle_timeout) == (10_000, 60.0)
    assert (s.measurement.window, s.measurement.step) == (60.0, 10.0)
    (point,) = expand(s)
    assert point.receiver_nodes == 2


def test_an_unknown_key_names_the_likely_one_and_params_are_checked_in_the_same_pass(
    tmp_path: Path,
) -> None:
    text = GOOD.replace("threads = 3", "thredas = 3").replace(
        "[load]", "[broker.params]\nreplicaton = 1\n[load]"
    )
    lines = error_lines(tmp_path, text)
    assert any("load.thredas: unknown key (did you mean threads?)" in line for line in lines)
    assert any(
        "broker.params.replicaton: unknown key (did you mean replication?)" in line
        for line in lines
    )
    (line,) = error_lines(tmp_path, GOOD.replace("threads = 3", "zzzz = 3"))
    assert "unknown key (misspelt?)" in line  # nothing close enough to suggest


def test_checks_across_keys_are_reported_in_the_same_pass_as_wrong_values(
    tmp_path: Path,
) -> None:
    text = """
name = "x"
[broker]
system = "kafka"
topology = "cluster"
[broker.params]
replication_factor = 5
[load]
threads = "two"
duration = "5s"
[measurement]
window = "30s"
"""
    lines = error_lines(tmp_path, text)
    assert any("load.threads: Input should be a valid integer" in line for line in lines)
    # Found although a value above is wrong: the window against the measured period,
    # the replicas against the topology's nodes.
    assert any("measurement.window: the latency window (30 s)" in line for line in lines)
    assert any("broker.params.replication_factor: 5 replicas" in line for line in lines)
    assert len(lines) == 3
    # A check that involves a wrong key is not made with the default standing in for it.
    lines = error_lines(tmp_path, text.replace('duration = "5s"', 'duration = "5 parsecs"'))
    assert any(line.split(": ")[1] == "load.duration" for line in lines)
    assert not any("measurement.window" in line for line in lines)


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
    scenario = load_scenario(path)
    if scenario.search is None:  # a capacity search has no fixed points (tests/test_search.py)
        assert expand(scenario)


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
    assert "INSERT transaction" in line, "the line says why the system cannot pipeline"
    nats = GOOD.replace('"postgresql"', '"nats"') + "max_in_flight = 4\n"
    assert load_scenario(write(tmp_path, nats)).load.max_in_flight == 4
    (line,) = error_lines(tmp_path, GOOD + "max_in_flight = 0\n")
    assert "load.max_in_flight" in line


# Hostile input: strict types, limits, cross-field checks, sweep points, endpoints, files.


def test_numbers_and_booleans_are_not_coerced(tmp_path: Path) -> None:
    for written in ("threads = true", 'threads = "3"', "threads = 3.0"):
        (line,) = error_lines(tmp_path, GOOD.replace("threads = 3", written))
        assert "load.threads" in line and "valid integer" in line
    (line,) = error_lines(tmp_path, GOOD + 'message_size = "100"\n')
    assert "load.message_size" in line and "got a string" in line
    (line,) = error_lines(tmp_path, GOOD + "rate = true\n")
    assert "load.rate" in line and "got a boolean" in line


def test_durations_take_numbers_and_strings(tmp_path: Path) -> None:
    for written, seconds in (("90", 90.0), ("2.5", 2.5), ('"90s"', 90.0), ('"1h"', 3600.0)):
        s = load_scenario(write(tmp_path, GOOD.replace('"2m"', written)))
        assert s.load.duration == seconds
    for written in ("inf", "nan", '"99999999999h"', '"169h"', "true", '"١٢٣s"', "10000000000"):
        (line,) = error_lines(tmp_path, GOOD.replace('"2m"', written))
        assert "load.duration" in line and "line 7" in line


@pytest.mark.parametrize(
    ("key", "highest", "beyond"),
    [
        ("threads", "10000", "10001"),
        ("sender_nodes", "1000", "1001"),
        ("receiver_nodes", "2000", "2001"),
        ("max_send_batch", "100000", "100001"),
        ("receive_batch", "100000", "100001"),
        ("pool_size", "1000000", "1000001"),
        ("messages", "1000000000000", "1000000000001"),
        ("rate", "100000000", "100000001"),
        ("idle_timeout", '"168h"', '"169h"'),
        ("failure_timeout", "604800", "604801"),
    ],
)
def test_every_number_has_an_upper_bound(
    tmp_path: Path, key: str, highest: str, beyond: str
) -> None:
    text = GOOD.replace("threads = 3", "") + f"{key} = {{}}\n"
    load_scenario(write(tmp_path, text.format(highest)))
    (line,) = error_lines(tmp_path, text.format(beyond))
    assert f"load.{key}" in line and "less than or equal to" in line and "line 8" in line


def test_every_system_that_keeps_one_batch_in_flight_says_why(capsys) -> None:
    from brokers import registry

    one = {n: s.one_in_flight for n, s in registry.systems().items() if not s.can_pipeline}
    assert one and all(one.values()), one
    assert cli.main(["brokers"]) == 0
    shown = capsys.readouterr().out
    assert all(f"  {name}: {why}" in shown for name, why in one.items())


def test_a_smallest_send_batch_above_the_largest_names_both(tmp_path: Path) -> None:
    fixed = load_scenario(write(tmp_path, GOOD + "min_send_batch = 10\n"))
    assert (fixed.load.min_send_batch, fixed.load.max_send_batch) == (10, 10)
    (line,) = error_lines(tmp_path, GOOD + "min_send_batch = 11\n")
    assert "load.min_send_batch" in line and "larger than max_send_batch (10)" in line


def test_message_size_and_pool_memory_limits(tmp_path: Path) -> None:
    (line,) = error_lines(tmp_path, GOOD + "message_size = 16777217\n")
    assert "load.message_size" in line and "16777216" in line
    load_scenario(write(tmp_path, GOOD + "message_size = 16777216\npool_size = 64\n"))
    (line,) = error_lines(tmp_path, GOOD + "message_size = 200000\n")
    assert "load.pool_size" in line and "1 GiB" in line


def test_rate_has_a_floor(tmp_path: Path) -> None:
    assert load_scenario(write(tmp_path, GOOD + "rate = 0.001\n")).load.rate == 0.001
    (line,) = error_lines(tmp_path, GOOD + "rate = 1e-300\n")
    assert "load.rate" in line and "0.001" in line


def test_name_and_description_lengths(tmp_path: Path) -> None:
    load_scenario(write(tmp_path, GOOD.replace('"t"', '"' + "n" * 64 + '"')))
    (line,) = error_lines(tmp_path, GOOD.replace('"t"', '"' + "n" * 300 + '"'))
    assert line.startswith(f"{tmp_path / 's.toml'}: name: ") and "64 characters" in line
    (line,) = error_lines(tmp_path, 'description = "' + "d" * 2001 + '"\n' + GOOD)
    assert "description" in line and "2000 characters" in line


def test_step_longer_than_the_window_is_an_error(tmp_path: Path) -> None:
    (line,) = error_lines(tmp_path, GOOD + '[measurement]\nwindow = "5s"\nstep = "10s"\n')
    assert "measurement.step" in line and "must not exceed window" in line and "line 10" in line


def test_a_window_longer_than_the_run_is_an_error(tmp_path: Path) -> None:
    (line,) = error_lines(tmp_path, GOOD + '[measurement]\nwindow = "5m"\n')
    assert "measurement.window" in line and "load.duration 120 s" in line and "line 9" in line


def test_a_window_longer_than_the_measured_period_is_an_error(tmp_path: Path) -> None:
    """120 s with the default 10 s warm-up measure 110 s: a 115 s window would be the only
    one of each point."""
    (line,) = error_lines(tmp_path, GOOD + '[measurement]\nwindow = "115s"\n')
    assert "measured period (load.duration 120 s − warm-up 10 s = 110 s)" in line
    load_scenario(write(tmp_path, GOOD + '[measurement]\nwindow = "110s"\n'))


def test_sweep_size_is_bounded_before_expanding(tmp_path: Path) -> None:
    hundred = list(range(1, 101))
    text = GOOD + (
        f"[sweep]\nthreads = {hundred}\nsender_nodes = {hundred}\n"
        f"receiver_nodes = {hundred}\nmessage_size = {[100 + i for i in range(100)]}\n"
    )
    (line,) = error_lines(tmp_path, text)
    assert "sweep: 100,000,000 sweep points" in line and "10,000" in line


def test_sweep_values_obey_the_load_limits(tmp_path: Path) -> None:
    (line,) = error_lines(tmp_path, GOOD + "[sweep]\nmessage_size = [100, 10000000000]\n")
    assert "sweep.message_size[1]" in line and "16777216" in line and "line 9" in line
    (line,) = error_lines(tmp_path, GOOD + "[sweep]\nthreads = [1, true]\n")
    assert "sweep.threads[1]" in line and "valid integer" in line


def test_a_sweep_lists_and_a_sweep_point_sets_the_same_load_keys() -> None:
    assert SWEEPABLE == (
        "threads",
        "sender_nodes",
        "receiver_nodes",
        "message_size",
        "sender_threads",
        "receiver_threads",
    )
    assert set(SweepSection.model_fields) == {*SWEEPABLE, "params", "points", "max_points"}
    assert set(SWEEPABLE) <= set(LoadSection.model_fields)


def test_every_sweep_point_is_validated_whole(tmp_path: Path) -> None:
    text = GOOD + "[sweep]\nthreads = [1, 2]\nmessage_size = [100, 200000]\n"
    (line,) = error_lines(tmp_path, text)
    assert "sweep.message_size[1]" in line and "1 GiB" in line and "line 10" in line
    points = GOOD + "[[sweep.points]]\nthreads = 2\n[[sweep.points]]\nmessage_size = 300000\n"
    (line,) = error_lines(tmp_path, points)
    assert "sweep.points[1].message_size" in line and "1 GiB" in line and "line 11" in line


def test_swept_broker_parameters_are_checked_in_every_combination(tmp_path: Path) -> None:
    text = (
        'name = "p"\n[broker]\nsystem = "pulsar"\ntopology = "cluster"\n'
        "[sweep]\nparams = { ensemble_size = [1, 3], write_quorum = [3], ack_quorum = [2] }\n"
    )
    (line,) = error_lines(tmp_path, text)
    assert line.split(": ")[1] == "sweep" and "ensemble_size=1 write_quorum=3 ack_quorum=2" in line
    bad_value = GOOD + '[sweep]\nparams = { replication = ["synchronous", "bogus"] }\n'
    (line,) = error_lines(tmp_path, bad_value)
    assert "sweep.params.replication[1]" in line and "line 9" in line


def test_expand_validates_each_point(tmp_path: Path) -> None:
    scenario = load_scenario(write(tmp_path, GOOD))
    swept = scenario.model_copy(update={"sweep": SweepSection(message_size=[200_000])})
    with pytest.raises(ValidationError, match="1 GiB"):
        expand(swept)


ENDPOINTS = GOOD.replace(
    'system = "postgresql"', 'system = "postgresql"\ndeployment = "endpoints"\nendpoints = [{}]'
)


@pytest.mark.parametrize(
    "endpoint",
    ["[::1]:9092", "10.0.0.5:6379", "redpanda-1:9092", "broker.example.com.:443", "db_1:1"],
)
def test_endpoint_syntax_accepted(tmp_path: Path, endpoint: str) -> None:
    s = load_scenario(write(tmp_path, ENDPOINTS.format(json.dumps(endpoint))))
    host, port = split_host_port(s.broker.endpoints[0])
    written_host, _, written_port = endpoint.rpartition(":")
    assert (host, port) == (written_host.strip("[]"), int(written_port))


@pytest.mark.parametrize(
    "endpoint",
    [
        "::1",
        "a b c:80",
        "$(id):80",
        "-oProxyCommand=x:22",
        "h:٨٠",
        "h:0",
        "h:65536",
        "h:",
        "[::1]",
        "[zz::1]:80",
        "999.1.1.1:80",
        "h;rm:80",
        "h:80 ",
        "a" * 300 + ":80",
    ],
)
def test_endpoint_syntax_rejected(tmp_path: Path, endpoint: str) -> None:
    (line,) = error_lines(tmp_path, ENDPOINTS.format(json.dumps(endpoint)))
    assert "broker.endpoints[0]" in line and "line 6" in line


def test_deep_nesting_is_one_line(tmp_path: Path) -> None:
    for nested in ("[" * 1000 + "]" * 1000, "{ a = " * 1000 + "1" + " }" * 1000):
        (line,) = error_lines(tmp_path, GOOD + f"nested = {nested}\n")
        assert line == (
            f"{tmp_path / 's.toml'}: not valid TOML: arrays or tables nested too deeply (line 8)"
        )


def test_parser_out_of_memory_is_one_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def exhausted(text: str) -> dict[str, object]:
        raise MemoryError

    monkeypatch.setattr(scenario_file.tomllib, "loads", exhausted)
    (line,) = error_lines(tmp_path, GOOD)
    assert line.startswith(str(tmp_path / "s.toml")) and "too large" in line


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
def test_devices_are_refused_without_reading(device: str) -> None:
    if not Path(device).exists():
        pytest.skip(f"no {device}")
    with pytest.raises(ScenarioError) as info:
        load_scenario(device)
    assert info.value.lines == [
        f"{device}: not a regular file (a pipe, device or socket); nothing was read"
    ]


def test_a_directory_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ScenarioError, match="a directory"):
        load_scenario(tmp_path)


def test_a_named_pipe_returns_at_once(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.toml"
    os.mkfifo(fifo)
    outcome: list[BaseException] = []

    def validate() -> None:
        try:
            load_scenario(fifo)
        except BaseException as exc:
            outcome.append(exc)

    worker = threading.Thread(target=validate, daemon=True)
    worker.start()
    worker.join(timeout=10)
    assert not worker.is_alive(), "load_scenario blocked on a named pipe"
    (exc,) = outcome
    assert isinstance(exc, ScenarioError) and "not a regular file" in str(exc)


def test_a_file_over_1_mib_is_refused(tmp_path: Path) -> None:
    (line,) = error_lines(tmp_path, GOOD + "#" * (1024 * 1024) + "\n")
    assert "larger than the limit of 1 MiB" in line


def test_not_utf8_is_one_line(tmp_path: Path) -> None:
    path = tmp_path / "s.toml"
    path.write_bytes(b'name = "\xff"\n')
    with pytest.raises(ScenarioError, match="not UTF-8") as info:
        load_scenario(path)
    assert len(info.value.lines) == 1


def test_odd_keys_stay_on_one_printable_line(tmp_path: Path) -> None:
    (line,) = error_lines(tmp_path, GOOD + '"odd\\nkey\\u2028" = 1\n')
    assert line.isprintable() and 'load."odd\\nkey\\u2028": unknown key' in line


def test_many_problems_are_capped(tmp_path: Path) -> None:
    lines = error_lines(tmp_path, GOOD + f"[sweep]\nthreads = {[0] * 200}\n")
    assert len(lines) == 51 and "150 further problem(s) not shown" in lines[-1]
    assert all(x.startswith(str(tmp_path / "s.toml")) for x in lines)


def test_format_duration() -> None:
    assert [format_duration(s) for s in (45, 1620, 12_000, 604_800)] == [
        "45 s",
        "27 min",
        "3 h 20 min",
        "7 d",
    ]


def test_validate_prints_sweep_size_and_estimated_run_time(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, GOOD + "[sweep]\nthreads = [1, 2]\n")
    assert cli.main(["validate", str(path)]) == 0
    out = capsys.readouterr().out
    assert f"{path}: ok (2 sweep point(s)" in out
    assert "estimated run time about 6 min" in out  # 2 × (2 min + 60 s idle timeout)


# -- faults ---------------------------------------------------------------------------------

CLUSTER = """
name = "f"
[broker]
system = "{system}"
topology = "{topology}"
[load]
duration = "30s"
"""


def faults(*entries: str, system: str = "kafka", topology: str = "cluster") -> str:
    return CLUSTER.format(system=system, topology=topology) + "".join(
        f"\n[[faults]]\n{entry}\n" for entry in entries
    )


def test_faults_parse_with_durations_and_selectors(tmp_path: Path) -> None:
    s = load_scenario(
        write(
            tmp_path,
            faults(
                'at = "5s"\naction = "kill"\nnode = "follower"\nuntil = "10s"',
                'at = 15\naction = "pause"\nnode = 2\nuntil = "20s"',
                'at = "25s"\naction = "stop"\nnode = "leader"',
            ),
        )
    )
    assert [(f.at, f.action, f.node, f.until) for f in s.faults] == [
        (5.0, "kill", "follower", 10.0),
        (15.0, "pause", 2, 20.0),
        (25.0, "stop", "leader", None),
    ]


@pytest.mark.parametrize(
    ("entry", "key", "words"),
    [
        ('at = "5s"\naction = "crash"\nnode = 0', "faults[0].action", "'kill'"),
        ('at = "5s"\naction = "kill"\nnode = "boss"', "faults[0].node", '"leader", "follower"'),
        ('at = "5s"\naction = "kill"\nnode = true', "faults[0].node", "node index"),
        ('at = "5s"\naction = "kill"\nnode = 0\nuntil = "5s"', "faults[0].until", "after at"),
        ('at = "30s"\naction = "kill"\nnode = 0', "faults[0].at", "within load.duration"),
        ('at = "5s"\naction = "kill"\nnode = 0\nuntil = "31s"', "faults[0].until", "load.duration"),
        ('at = "5s"\naction = "kill"\nnode = 3', "faults[0].node", "3 nodes (0 to 2)"),
        ('at = "5s"\naction = "kill"\nnode = 0\nwhen = 1', "faults[0].when", "unknown key"),
    ],
)
def test_bad_faults_name_file_key_and_line(
    tmp_path: Path, entry: str, key: str, words: str
) -> None:
    (line,) = error_lines(tmp_path, faults(entry))
    assert line.startswith(f"{tmp_path / 's.toml'}: {key}: ")
    assert words in line and "(line " in line


def test_isolate_needs_a_system_whose_nodes_run_in_namespaces(tmp_path: Path) -> None:
    isolate = 'at = "5s"\naction = "isolate"\nnode = 0\nuntil = "10s"'
    (line,) = error_lines(tmp_path, faults(isolate, system="rabbitmq"))
    assert line.startswith(f"{tmp_path / 's.toml'}: faults[0].action: ")
    assert "network namespace" in line and "RabbitMQ" in line
    assert load_scenario(write(tmp_path, faults(isolate))).faults[0].action == "isolate"


def test_overlapping_faults_are_an_error(tmp_path: Path) -> None:
    (line,) = error_lines(
        tmp_path,
        faults(
            'at = "5s"\naction = "kill"\nnode = 0\nuntil = "15s"',
            'at = "10s"\naction = "kill"\nnode = 1',
        ),
    )
    assert "faults[1].at" in line and "one at a time" in line and "line 16" in line
    assert "fault 1 (kill node 1 at 10 s) overlaps fault 0 (kill node 0 at 5 s until 15 s)" in line


@pytest.mark.parametrize(
    ("system", "topology", "words"),
    [
        ("kafka", "single", "topology 'single' has one node"),
        ("activemq", "single", "faults are not supported for ActiveMQ Classic yet"),
        ("redis", "sharded", "faults are not supported for Redis Streams yet"),
        ("sqs", "single", "faults are not supported for Amazon SQS yet"),
    ],
)
def test_faults_need_a_system_and_topology_that_take_them(
    tmp_path: Path, system: str, topology: str, words: str
) -> None:
    text = faults('at = "5s"\naction = "kill"\nnode = 0', system=system, topology=topology)
    (line,) = error_lines(tmp_path, text)
    assert words in line and "faults[0]" in line


def test_faults_need_a_local_deployment(tmp_path: Path) -> None:
    text = faults('at = "5s"\naction = "kill"\nnode = 0').replace(
        'topology = "cluster"', 'deployment = "endpoints"\nendpoints = ["10.0.0.1:9092"]'
    )
    (line,) = error_lines(tmp_path, text)
    assert "deployment = 'local'" in line


def test_a_leader_down_without_fail_over_must_come_back_before_workers_give_up(
    tmp_path: Path,
) -> None:
    kill_leader = 'at = "5s"\naction = "kill"\nnode = "leader"'
    (line,) = error_lines(tmp_path, faults(kill_leader, system="postgresql"))
    assert "does not fail over" in line and "failure_timeout (20 s)" in line
    (line,) = error_lines(tmp_path, faults(kill_leader + '\nuntil = "26s"', system="redis"))
    assert "faults[0].until" in line
    assert load_scenario(write(tmp_path, faults(kill_leader + '\nuntil = "24s"', system="redis")))
    assert load_scenario(write(tmp_path, faults(kill_leader)))  # Kafka fails over


def test_faults_are_in_the_json_schema() -> None:
    schema = Scenario.model_json_schema()
    assert "faults" in schema["properties"]
    fault = schema["$defs"]["FaultSpec"]
    assert set(fault["properties"]) == {"at", "action", "node", "until"}
    assert fault["properties"]["action"]["enum"] == [
        "kill",
        "stop",
        "pause",
        "isolate",
        "power-loss",
    ]
    assert fault["additionalProperties"] is False


def test_with_faults_receivers_must_outwait_a_visibility_timeout(tmp_path: Path) -> None:
    """A claim whose reply dies with a connection hides the message for the visibility
    timeout: receivers that stop sooner would count it lost although it is queued."""
    fault = 'at = "5s"\naction = "kill"\nnode = "follower"\nuntil = "10s"'
    text = faults(fault, system="postgresql").replace(
        'duration = "30s"', 'duration = "30s"\nidle_timeout = "5s"'
    )
    (line,) = error_lines(tmp_path, text)
    assert "load.idle_timeout: with faults, idle_timeout (5 s) must be longer" in line
    assert "(30 s, broker.params.visibility_timeout)" in line
    shorter = text.replace(
        'topology = "cluster"', 'topology = "cluster"\nparams = { visibility_timeout = 3.0 }'
    )
    assert load_scenario(write(tmp_path, shorter)).faults
    without_faults = text.split("[[faults]]")[0]
    assert load_scenario(write(tmp_path, without_faults)).load.idle_timeout == 5.0


def test_brokers_says_a_system_whose_client_is_missing_does_not_run_here(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """ActiveMQ's server may be installed without stomp.py: it does not run from here."""
    import importlib.metadata

    from brokers import registry
    from workload.shell.cli import main

    real = importlib.metadata.version

    def version(name: str) -> str:
        if name == "stomp.py":
            raise importlib.metadata.PackageNotFoundError(name)
        return real(name)

    monkeypatch.setattr(importlib.metadata, "version", version)
    assert registry.get("activemq").client_missing() == (
        "its client stomp.py is not installed: pip install 'brokerbench[brokers]'"
    )
    assert registry.get("redis").client_missing() is None
    assert main(["brokers"]) == 0
    out = capsys.readouterr().out.splitlines()
    lines = {line.split()[0]: line for line in out if line.strip()}  # a blank line, then notes
    for name in ("activemq", "artemis"):
        assert "not installed: its client stomp.py is not installed" in lines[name]


def test_validate_names_the_open_loop_batching_floor(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from workload.shell.cli import main

    paced = write(tmp_path, GOOD.replace("threads = 3", "threads = 3\nrate = 500"))
    assert main(["validate", str(paced)]) == 0
    note = capsys.readouterr().out.splitlines()[-1]
    assert note.startswith("  note: open loop at 500 msgs/s per worker with batches of up to 10")
    assert "waits up to 18 ms" in note
    single = write(
        tmp_path, GOOD.replace("threads = 3", "threads = 3\nrate = 500\nmax_send_batch = 1")
    )
    assert main(["validate", str(single)]) == 0
    assert "note:" not in capsys.readouterr().out


@pytest.mark.parametrize("node", ["-1", "1001", '"primary"', "true", "1.5"])
def test_a_faults_node_out_of_bounds_is_one_line_with_its_line_number(
    tmp_path: Path, node: str
) -> None:
    text = (
        'name = "f"\n[broker]\nsystem = "kafka"\ntopology = "cluster"\n[load]\n'
        f'duration = "30s"\n[[faults]]\nat = "5s"\naction = "kill"\nnode = {node}\n'
    )
    (line,) = error_lines(tmp_path, text)
    assert 'faults[0].node: expected "leader", "follower" or a node index (0 to 1000)' in line
    assert line.endswith("(line 10)")
