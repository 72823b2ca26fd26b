"""Scenario files that used to crash `validate` or start nonsense (issue 42): each is one
line naming the file, the key and, where it can be found, its line; exit code 2.

Deep nesting: tables and arrays nested a thousand deep are bounded before anything that
recurses walks them (a RecursionError from ``copy.deepcopy`` was a 3,000-line trace, exit
1). Nonsense: a drain limit or telemetry interval the code cannot honour, more workers
than one host runs, a sweep of days started without a word.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import brokerbench
from tests.test_scenario import error_lines, write
from workload.model.bounds import MAX_ENTRIES, MAX_NESTING, MAX_VALUES
from workload.model.scenario_file import load_scenario
from workload.model.shape import nesting_line, shape_problem
from workload.shell import cli

BASE = """name = "t"
[broker]
system = "redis"
[load]
duration = "5s"
idle_timeout = "4s"
"""
DEEP = 1_000
KEYS = ".".join(["a"] * DEEP)

#: The five kinds of deep nesting, each with the line it is on (BASE has 6 lines).
NESTED = {
    "table header": (f"[{KEYS}]\nx = 1\n", 7),
    "array-of-tables header": (f"[[{KEYS}]]\nx = 1\n", 7),
    "dotted key": (f"{KEYS} = 1\n", 7),
    "table in a known section": (f"[broker.params.{KEYS}]\nx = 1\n", 7),
    "inline arrays": ("[measurement]\nx = " + "[" * DEEP + "]" * DEEP + "\n", 8),
}


def one_line(tmp_path: Path, text: str) -> str:
    (line,) = error_lines(tmp_path, text)
    assert line.startswith(f"{tmp_path / 's.toml'}: ") and line.isprintable(), line
    assert len(line) < 500, line
    return line.removeprefix(f"{tmp_path / 's.toml'}: ")


@pytest.mark.parametrize("kind", NESTED)
def test_deep_nesting_is_one_line_naming_its_line(tmp_path: Path, kind: str) -> None:
    text, line = NESTED[kind]
    found = one_line(tmp_path, BASE + text)
    assert "nested" in found and found.endswith(f"(line {line})"), found


def test_deep_nesting_names_the_key_path_the_parser_gave(tmp_path: Path) -> None:
    found = one_line(tmp_path, BASE + NESTED["table in a known section"][0])
    keys = ".".join(["a"] * (MAX_NESTING - 2))
    assert found == (
        f"broker.params.{keys}…: tables and arrays nested more than {MAX_NESTING} deep; a "
        "scenario nests at most a few (line 7)"
    )


def test_nesting_that_parses_is_bounded_too(tmp_path: Path) -> None:
    """300 arrays deep parse (the parser recurses less than the checks after it)."""
    text = BASE + "[sweep]\nthreads = " + "[" * 300 + "1" + "]" * 300 + "\n"
    found = one_line(tmp_path, text)
    assert found.startswith("sweep.threads[0][0]") and found.endswith("(line 8)"), found


def test_validate_refuses_every_deep_case_in_one_line_each(tmp_path: Path) -> None:
    """The command itself, in a process of its own: no trace, one line per file, exit 2."""
    paths = []
    for i, (text, _) in enumerate(NESTED.values()):
        (tmp_path / f"deep{i}.toml").write_text(BASE + text)
        paths.append(str(tmp_path / f"deep{i}.toml"))
    done = brokerbench("validate", *paths)
    assert done.returncode == 2, done.stderr[-2_000:]
    assert "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == len(NESTED), lines
    for path, (_, line), found in zip(paths, NESTED.values(), lines, strict=True):
        assert found.startswith(f"brokerbench: {path}: ") and f"(line {line})" in found


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "[sweep]\nthreads = [" + ", ".join(["1"] * (MAX_ENTRIES + 1)) + "]\n",
            f"sweep.threads: {MAX_ENTRIES + 1:,} entries; an array of a scenario holds at "
            f"most {MAX_ENTRIES:,} (line 8)",
        ),
        (
            "[broker.params]\n" + "".join(f"k{i} = 1\n" for i in range(MAX_ENTRIES + 1)),
            f"broker.params: {MAX_ENTRIES + 1:,} entries; a table of a scenario holds at "
            f"most {MAX_ENTRIES:,} (line 7)",
        ),
        (
            "".join(f"[x{i}]\nv = [{', '.join(['0'] * 999)}]\n" for i in range(101)),
            f"(top level): more than {MAX_VALUES:,} values in all; a scenario holds far fewer",
        ),
    ],
    ids=["array", "table", "values"],
)
def test_wide_structures_are_one_line(tmp_path: Path, text: str, expected: str) -> None:
    assert one_line(tmp_path, BASE + text) == expected


def test_the_shipped_shape_is_well_within_the_bounds() -> None:
    deepest = {"a": {"b": [{"c": {"d": [1]}}]}}  # sweep.points[i].params.<key> = [...]
    assert shape_problem(deepest) is None
    assert shape_problem([[[]]] * MAX_ENTRIES) is None


def test_nesting_line_skips_strings_and_comments() -> None:
    text = 'a = "[[[[[[[["\nb = 1 # {{{{{{{{{{\nc = [[[1]]]\nd = """\n[[[[[[\n"""\n'
    assert nesting_line(text) == 3


# -- nonsense -------------------------------------------------------------------------------


def test_a_drain_limit_below_100_ms_is_refused(tmp_path: Path) -> None:
    text = BASE + '[backlog]\nbuild = "2s"\ndrain_limit = "1ms"\n'
    assert one_line(tmp_path, text) == (
        "backlog.drain_limit: 0.001 s is below the minimum of 100 ms: the coordinator looks "
        "at the drain every 0.25 s, and would end it later than it says (line 9)"
    )
    accepted = text.replace('"1ms"', '"100ms"')
    backlog = load_scenario(write(tmp_path, accepted)).backlog
    assert backlog is not None and backlog.drain_limit == 0.1


def test_a_telemetry_interval_below_a_second_is_refused(tmp_path: Path) -> None:
    text = BASE + '[measurement]\ntelemetry_interval = "1ms"\n'
    assert one_line(tmp_path, text) == (
        "measurement.telemetry_interval: 0.001 s is below the minimum of 1 s: the analysis "
        "reads each telemetry row as one second (line 8)"
    )
    accepted = text.replace('"1ms"', '"1s"')
    assert load_scenario(write(tmp_path, accepted)).measurement.telemetry_interval == 1.0


MANY_WORKERS = BASE.replace(
    "[load]\n", "[load]\nthreads = 10000\nsender_nodes = 1000\nprocesses = 1024\n"
)
LONG_SWEEP = (
    BASE
    + "[sweep]\n"
    + "".join(
        f"{key} = {list(range(1, 11))}\n"
        for key in ("threads", "sender_nodes", "receiver_nodes", "sender_threads")
    )
)


def validate(capsys: pytest.CaptureFixture[str], path: Path, *flags: str) -> tuple[int, str]:
    code = cli.main(["validate", *flags, str(path)])
    captured = capsys.readouterr()
    return code, captured.err if code else captured.out


def test_more_workers_than_one_host_runs_is_refused_unless_allowed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, MANY_WORKERS)
    code, err = validate(capsys, path)
    assert code == 2
    assert err == (
        f"brokerbench: {path}: load.threads: 30,000,000 workers at once on this host "
        "(sender_threads × sender_nodes + receiver_threads × receiver_nodes = 10,000 × 1,000 "
        "+ 10,000 × 2,000); a local run runs at most 4,096 (docs/measurement.md §7): lower "
        "them, or pass --max-workers N if this host takes more (line 5)\n"
    )
    code, out = validate(capsys, path, "--max-workers", "30000000")
    assert code == 0 and "ok" in out
    # A swept value that makes a point too large is the one named.
    swept = write(tmp_path, BASE + "[sweep]\nthreads = [1, 2000]\n")
    code, err = validate(capsys, swept)
    assert code == 2 and f"{swept}: sweep.threads[1]: 6,000 workers" in err and "(line 8)" in err


def test_a_sweep_of_more_than_1000_runs_asks_for_yes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, LONG_SWEEP)
    code, err = validate(capsys, path)
    assert code == 2
    assert err == (
        f"brokerbench: {path}: sweep: 10,000 sweep point(s) = 10,000 runs, estimated run "
        "time about 1 d 1 h: more than the 1,000 runs a run starts without asking; pass "
        "--yes, or set [sweep] max_points = 10000 to say the sweep is meant to be this long "
        "(line 7)\n"
    )
    code, out = validate(capsys, path, "--yes")
    assert code == 0 and "10000 sweep point(s)" in out
    told = write(tmp_path, LONG_SWEEP.replace("[sweep]\n", "[sweep]\nmax_points = 10000\n"))
    assert validate(capsys, told)[0] == 0
    # Repeats count: 500 points × repeat 3 asks too, named at repeat.
    repeated = "repeat = 3\n" + BASE + "[sweep]\nthreads = " + str(list(range(1, 501))) + "\n"
    code, err = validate(capsys, write(tmp_path, repeated))
    assert code == 2 and ": repeat: 500 sweep point(s) × repeat 3 = 1,500 runs" in err


def test_a_sweep_larger_than_its_max_points_is_refused_even_with_yes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = write(tmp_path, LONG_SWEEP.replace("[sweep]\n", "[sweep]\nmax_points = 100\n"))
    code, err = validate(capsys, path, "--yes")
    assert code == 2
    assert err == (
        f"brokerbench: {path}: sweep.max_points: the sweep has 10,000 point(s) = 10,000 "
        "runs, more than max_points (100): sweep fewer values, or raise max_points (line 8)\n"
    )


@pytest.mark.parametrize("text", [MANY_WORKERS, LONG_SWEEP], ids=["workers", "sweep"])
def test_run_refuses_before_starting_anything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], text: str
) -> None:
    results = tmp_path / "results"
    code = cli.main(["run", "--no-analysis", "--results", str(results), str(write(tmp_path, text))])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert not results.exists()  # no broker, no run directory
