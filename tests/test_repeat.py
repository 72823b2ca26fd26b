"""``repeat = N``: every sweep point runs N times, interleaved, each run a sweep point of its
own (its own index and destination) that names the point it repeats (``base``)."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.compute as pc
import pytest

from brokers import registry
from tests.conftest import SCENARIOS
from workload.engine.context import build_context
from workload.engine.naming import destination_name, run_tag
from workload.model.errors import ScenarioError, UserError
from workload.model.results import read_point
from workload.model.scenario import expand
from workload.model.sweep import estimated_seconds
from workload.shell import cli
from workload.shell.remote import _point

SWEPT = """
name = "r"
repeat = {repeat}
[broker]
system = "redis"
[load]
duration = "10s"
idle_timeout = "5s"
[sweep]
threads = [1, 2, 3]
"""


def scenario_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "r.toml"
    path.write_text(text)
    return path


def load(tmp_path: Path, repeat: object = 2, text: str = SWEPT):
    from workload.model.scenario_file import load_scenario

    return load_scenario(scenario_file(tmp_path, text.format(repeat=repeat)))


def error_lines(tmp_path: Path, repeat: object, text: str = SWEPT) -> list[str]:
    with pytest.raises(ScenarioError) as info:
        load(tmp_path, repeat, text)
    return info.value.lines


def test_points_repeat_interleaved_with_their_own_indices(tmp_path: Path) -> None:
    points = expand(load(tmp_path, 2))
    assert [p.index for p in points] == [0, 1, 2, 3, 4, 5]
    assert [p.load.threads for p in points] == [1, 2, 3, 1, 2, 3]
    assert [p.base for p in points] == [0, 1, 2, 0, 1, 2]
    assert [p.repeat for p in points] == [0, 0, 0, 1, 1, 1]
    # The label is the swept values only: runs of one point share it (and their base).
    assert [p.label for p in points[:3]] == [p.label for p in points[3:]]
    assert points[4].label == "threads=2"
    # Each run has a destination of its own.
    tag = run_tag("run-1")
    assert len({destination_name(tag, p.index).name for p in points}) == 6


def test_without_repeat_each_point_is_its_own_base(tmp_path: Path) -> None:
    text = SWEPT.replace("repeat = {repeat}\n", "")
    scenario = load(tmp_path, text=text)
    assert scenario.repeat == 1
    points = expand(scenario)
    assert [(p.index, p.base, p.repeat) for p in points] == [(0, 0, 0), (1, 1, 0), (2, 2, 0)]


def test_the_estimate_counts_every_run(tmp_path: Path) -> None:
    assert estimated_seconds(expand(load(tmp_path, 1))) == 3 * 15
    assert estimated_seconds(expand(load(tmp_path, 4))) == 12 * 15


@pytest.mark.parametrize("written", ["0", "101", "-1", '"2"', "true", "2.0"])
def test_repeat_is_1_to_100_and_strict(tmp_path: Path, written: str) -> None:
    (line,) = error_lines(tmp_path, written)
    assert ": repeat: " in line and "line 3" in line


def test_points_times_repeat_obey_the_sweep_limit(tmp_path: Path) -> None:
    text = SWEPT.replace("threads = [1, 2, 3]", f"message_size = {list(range(100, 5100))}")
    assert len(expand(load(tmp_path, 2, text))) == 10_000
    (line,) = error_lines(tmp_path, 3, text)
    assert ": repeat: " in line and "5,000 sweep point(s) × repeat 3 = 15,000 runs" in line
    assert "10,000" in line


def test_the_context_records_repeat_and_base_of_every_point(tmp_path: Path) -> None:
    scenario = load(tmp_path, 2)
    system = registry.get("redis")
    context = build_context("run-1", scenario, "r.toml", system, expand(scenario), {})
    entries = [(p.point, p.base, p.repeat, p.label) for p in context.points]
    assert entries == [
        (0, 0, 0, "threads=1"),
        (1, 1, 0, "threads=2"),
        (2, 2, 0, "threads=3"),
        (3, 0, 1, "threads=1"),
        (4, 1, 1, "threads=2"),
        (5, 2, 1, "threads=3"),
    ]
    assert context.scenario.repeat == 2
    assert json.loads(json.dumps(context.dump()))["points"][5]["load"]["threads"] == 3


def test_a_client_machine_runs_a_repeated_point_by_its_index(tmp_path: Path) -> None:
    text = SWEPT.replace('system = "redis"', 'system = "redis"\ndeployment = "endpoints"')
    text = text.replace("[load]", 'endpoints = ["10.0.0.5:6379"]\n[load]')
    scenario = load(tmp_path, 2, text)
    point = _point(scenario, 4, tmp_path / "r.toml")
    assert (point.index, point.base, point.repeat, point.load.threads) == (4, 1, 1, 2)
    with pytest.raises(UserError, match=r"out of range \(0…5\)"):
        _point(scenario, 6, tmp_path / "r.toml")


def test_validate_says_how_often_points_repeat(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = scenario_file(tmp_path, SWEPT.format(repeat=2))
    assert cli.main(["validate", str(path)]) == 0
    out = capsys.readouterr().out
    assert f"{path}: ok (6 sweep point(s): 3 × repeat 2, interleaved;" in out
    assert "estimated run time about 2 min" in out  # 6 × (10 s + 5 s)


@pytest.mark.slow
@pytest.mark.redis
def test_a_repeated_sweep_runs_every_point_again_on_a_fresh_destination(tmp_path: Path) -> None:
    from workload.engine.runner import run_scenario

    lines: list[str] = []
    outcome = run_scenario(SCENARIOS / "redis-repeat.toml", tmp_path, console=lines.append)
    assert outcome.ok, outcome.errors
    context = json.loads((outcome.run_dir / "context.json").read_text())
    assert context["status"] == "complete"
    assert [(p["point"], p["base"], p["repeat"], p["label"]) for p in context["points"]] == [
        (0, 0, 0, "threads=1"),
        (1, 1, 0, "threads=2"),
        (2, 0, 1, "threads=1"),
        (3, 1, 1, "threads=2"),
    ]
    assert any("(run 2 of 2)" in line for line in lines)
    for point in range(4):
        seconds = read_point(outcome.run_dir, "seconds", point)
        assert set(seconds["point"].to_pylist()) == {point}
        sent = pc.sum(seconds["sent"]).as_py()
        received = pc.sum(seconds["received"]).as_py()
        # Each run received exactly what it sent: nothing left over from an earlier run.
        assert sent > 0 and received == sent, (point, sent, received)
        senders = seconds.filter(pc.equal(seconds["role"], "sender"))
        assert (
            len(set(senders["worker"].to_pylist())) == context["points"][point]["load"]["threads"]
        )
