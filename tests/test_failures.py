"""Bad things during a run: the broker dies, the user presses Ctrl-C. Either way the
run ends with a clear message and a non-zero exit, and what was recorded is kept."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import ROOT, brokerbench, read_summary
from workload.model.faults import read_timelines
from workload.model.record import load_context

pytestmark = [pytest.mark.slow, pytest.mark.integration, pytest.mark.redis]

SCENARIO = """
name = "redis-failure"
[broker]
system = "redis"
[load]
threads = 1
duration = "40s"
idle_timeout = "2s"
failure_timeout = "3s"
[measurement]
window = "5s"
step = "1s"
"""


@pytest.fixture(autouse=True)
def run_temp(monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A temporary directory of the test's own (``TMPDIR`` of the runs it starts): what a
    run leaves behind there is the run's, whatever else runs on the machine meanwhile (the
    suite's other worker, its Spark sessions). Short, for the sockets kept under it."""
    temp = Path(tempfile.mkdtemp(prefix="bbt-"))
    monkeypatch.setenv("TMPDIR", str(temp))
    yield temp
    shutil.rmtree(temp, ignore_errors=True)


def start_run(
    tmp_path: Path, results: Path | None = None, text: str = SCENARIO, *options: str
) -> tuple[subprocess.Popen[str], Path]:
    scenario = tmp_path / "failure.toml"
    scenario.write_text(text)
    results = results or tmp_path / "results"
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "workload.shell.cli",
            "run",
            str(scenario),
            "--results",
            str(results),
            *options,
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    return proc, results


def wait_for_messages(results: Path, proc: subprocess.Popen[str], timeout: float = 180) -> str:
    """Read the run's progress lines until messages have been sent; return what was read."""
    assert proc.stderr is not None
    seen = []
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            raise AssertionError(f"the run ended early: {''.join(seen)}")
        seen.append(line)
        match = re.search(r"sent ([\d,]+)", line)
        if match and int(match.group(1).replace(",", "")) > 0:
            return "".join(seen)
    raise AssertionError("no messages were sent in time")


def redis_servers_of(proc: subprocess.Popen[str]) -> list[int]:
    """The redis-server processes this run started (children of the brokerbench process)."""
    out = subprocess.run(
        ["pgrep", "-P", str(proc.pid), "-x", "redis-server"], capture_output=True, text=True
    )
    return [int(pid) for pid in out.stdout.split()]


def test_broker_dying_mid_run_names_the_node_and_keeps_results(tmp_path: Path) -> None:
    proc, results = start_run(tmp_path)
    before = wait_for_messages(results, proc)
    pids = redis_servers_of(proc)
    assert pids, "no redis-server of this run found"
    for pid in pids:
        os.kill(pid, signal.SIGKILL)
    stdout, stderr = proc.communicate(timeout=240)
    stderr = before + stderr
    assert proc.returncode == 1, stderr
    assert "broker node redis master died during the run (killed by SIGKILL" in stderr
    assert "Traceback" not in stderr
    (row,) = read_summary(results)
    assert int(row["sent"]) > 0  # what was confirmed before the crash is kept and analysed
    # The death is analysed as a declared fault's effect is, and marked undeclared: the
    # master died at its first second or later and nothing was confirmed after it.
    assert re.fullmatch(
        r"redis master died at [\d.]+ s \(undeclared\) \(redis master\)", row["faults"]
    )
    assert float(row["send_gap_s"]) > 0
    (timeline,) = read_timelines(next(results.iterdir())).values()
    (death,) = timeline.faults
    assert death.undeclared and death.action == "died" and death.down_at_end
    # Nothing replaces a lone master: what it held is not lost. The run failed, so its point
    # stopped early: what was not received is not drained — in the summary, the table and
    # the Faults lines alike, never also "unavailable 0" beside it (issue 42).
    assert death.leaves_data_unavailable and row["lost"] in ("", "0")
    (whole,) = [line for line in stdout.splitlines() if "whole point:" in line]
    not_drained = int(row["not_drained"] or 0)
    if not_drained:
        assert row["delivery"].startswith("not drained") and row["unavailable"] == ""
        assert f"unavailable –, not drained {not_drained:,}," in whole
        header = next(line for line in stdout.splitlines() if "send msgs/s" in line)
        assert "lost  not drained" in header
    else:  # everything confirmed was received before the run stopped
        assert row["unavailable"] == "0" and "not drained" not in whole


@pytest.mark.parametrize(
    ("signum", "whole_group", "code", "analysed"),
    [
        (signal.SIGINT, True, 130, True),  # what a terminal's Ctrl-C sends
        (signal.SIGTERM, True, 143, False),  # what `timeout`, CI and systemd send
        (signal.SIGHUP, False, 129, False),  # a closed terminal
    ],
    ids=["ctrl-c", "sigterm", "sighup"],
)
def test_a_stopping_signal_stops_cleanly_and_keeps_what_was_recorded(
    tmp_path: Path, signum: int, whole_group: bool, code: int, analysed: bool
) -> None:
    # Each signal stops the run the same way; the analysis after it is the same for all
    # (Ctrl-C's run has it: the others record only).
    proc, results = start_run(tmp_path, None, SCENARIO, *([] if analysed else ["--no-analysis"]))
    wait_for_messages(results, proc)
    if whole_group:
        os.killpg(proc.pid, signum)
    else:
        os.kill(proc.pid, signum)
    stdout, stderr = proc.communicate(timeout=240)
    stderr = stdout + stderr
    assert proc.returncode == code, stderr
    assert f"interrupted ({signal.Signals(signum).name})" in stderr
    assert "Traceback" not in stderr and "without results" not in stderr
    assert not redis_servers_of(proc), "the broker was not stopped"
    (run_dir,) = results.iterdir()
    assert load_context(run_dir).status == "interrupted"
    if analysed:
        (row,) = read_summary(results)
        assert int(row["sent"]) > 0 and int(row["lost"]) >= 0
    else:
        assert "what was recorded is kept" in stderr and "kept and analysed" not in stderr
        assert list(run_dir.glob("raw/seconds/*.parquet")), "the records were not kept"


@pytest.mark.parametrize("when", ["1s-after-the-first", "during-the-analysis"])
def test_a_second_ctrl_c_stops_the_analysis_and_leaves_no_spark_jvm(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, when: str, spark: Any, run_temp: Path
) -> None:
    """The first Ctrl-C stops the run and promises the analysis; a second one — while the
    run stops, while Spark starts or while it analyses — skips or stops it: one line on
    how to analyse later, no stack trace (Python or Java), no Spark JVM or scratch left."""
    mark = f"brokerbench-test-{os.getpid()}-{time.monotonic_ns()}"
    monkeypatch.setenv("BROKERBENCH_TEST_MARK", mark)  # inherited by the Spark JVM
    temp = run_temp
    scratch_before = set(temp.glob("brokerbench-spark-*"))
    proc, results = start_run(tmp_path)
    wait_for_messages(results, proc)
    os.killpg(proc.pid, signal.SIGINT)
    seen = ""
    if when == "during-the-analysis":
        assert proc.stdout is not None
        while "analysing with Spark" not in seen:
            line = proc.stdout.readline()
            assert line, seen
            seen += line
        time.sleep(4)
    else:
        time.sleep(1)
    os.killpg(proc.pid, signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)  # the pipes close: nothing holds them
    output = seen + stdout + stderr
    assert proc.returncode == 130, output
    (run_dir,) = results.iterdir()
    hint = f"not analysed; analyse it with: brokerbench report {run_dir}"
    assert [line for line in stderr.splitlines() if hint in line], output
    assert "Traceback" not in output and "Exception" not in output, output
    assert not re.search(r"^\s+at [\w.$]+\(", output, re.MULTILINE), output  # a Java frame
    deadline = time.monotonic() + 20  # the watchdog may take a moment to see it exit
    while _marked(mark) and time.monotonic() < deadline:
        time.sleep(0.2)
    left = [_command(pid) for pid in _marked(mark)]
    assert left == [], "a process of the run outlived it"
    assert set(temp.glob("brokerbench-spark-*")) <= scratch_before, "Spark's scratch was left"
    if when == "1s-after-the-first":  # what was recorded is kept: it is analysed later
        from analysis.job import analyse

        (row,) = analyse(spark, run_dir)
        assert int(row["sent"]) > 0


def _command(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ")[:200].decode()
    except OSError:
        return f"{pid} (gone)"


def _marked(mark: str) -> list[int]:
    """The processes other than this one whose environment holds
    ``BROKERBENCH_TEST_MARK=mark``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:
            continue
        if f"BROKERBENCH_TEST_MARK={mark}".encode() in environ and not _zombie(int(entry.name)):
            found.append(int(entry.name))
    return found


def test_a_closed_terminal_does_not_leave_the_run_or_the_broker_behind(tmp_path: Path) -> None:
    proc, results = start_run(tmp_path, None, SCENARIO.replace('"40s"', '"12s"'))
    wait_for_messages(results, proc)
    brokers = redis_servers_of(proc)
    assert brokers
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()  # the reader goes away: every later write hits a broken pipe
    proc.stderr.close()
    proc.wait(timeout=240)
    time.sleep(1)
    alive = [pid for pid in brokers if Path(f"/proc/{pid}").exists() and not _zombie(pid)]
    assert alive == [], "the broker outlived its run"


def test_a_killed_coordinator_leaves_no_broker_worker_or_work_directory(
    tmp_path: Path, run_temp: Path
) -> None:
    """SIGKILL cannot be caught: the watchdog ends the brokers and deletes their data."""
    before = set(run_temp.glob("brokerbench-redis-*"))
    proc, results = start_run(tmp_path)
    wait_for_messages(results, proc)
    children = subprocess.run(["pgrep", "-P", str(proc.pid)], capture_output=True, text=True)
    pids = [int(pid) for pid in children.stdout.split()]
    brokers = redis_servers_of(proc)
    workdirs = set(run_temp.glob("brokerbench-redis-*")) - before
    assert brokers and workdirs and len(pids) > len(brokers)  # brokers, nodes, the watchdog
    proc.kill()
    proc.communicate(timeout=30)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and (_alive(pids) or any(d.exists() for d in workdirs)):
        time.sleep(0.2)
    assert _alive(pids) == [], "a process outlived the killed coordinator"
    assert not [d for d in workdirs if d.exists()], "the broker's data was left behind"
    (run_dir,) = results.iterdir()  # it could not write its end: readers tell it is gone
    record = load_context(run_dir)
    assert record.status == "running" and record.coordinator is not None
    assert record.coordinator.pid == proc.pid
    assert (record.ended, record.state) == ("interrupted", "interrupted (the coordinator is gone)")


def _alive(pids: list[int]) -> list[int]:
    return [pid for pid in pids if Path(f"/proc/{pid}").exists() and not _zombie(pid)]


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
    except OSError:
        return False


def test_a_full_disk_is_one_line_per_file_and_never_a_false_loss(tmp_path: Path) -> None:
    from tests.test_accounting import fill, tmpfs

    with tmpfs(tmp_path / "fs", "size=32m") as fs:
        results = fs / "results"
        proc, _ = start_run(tmp_path, results, SCENARIO.replace('"40s"', '"15s"'))
        before = wait_for_messages(results, proc)
        filler = fill(fs)  # the disk fills up while messages flow
        stdout, stderr = proc.communicate(timeout=240)
        output = before + stdout + stderr
        assert proc.returncode == 1, output
        assert "Traceback" not in output
        full = [line for line in output.splitlines() if "disk full" in line]
        assert full, output
        assert all(re.search(r"disk full writing /\S+", line) for line in full), full
        assert not list(results.glob("*/raw/*/.*.tmp")), "a partial file was left behind"
        for row in _summaries(results):  # if the analysis found room to write one
            assert row["lost"] in ("", "0"), row

        filler.unlink()  # room again: the analysis says what it cannot know
        (run_dir,) = results.iterdir()
        done = brokerbench("report", str(run_dir))
        assert done.returncode == 0, done.stderr
        (row,) = read_summary(results)
        assert row["lost"] == "" and row["delivery"].startswith("incomplete: "), row
        assert "incomplete" in done.stdout and "Traceback" not in done.stderr


def _summaries(results: Path) -> list[dict[str, str]]:
    return read_summary(results) if list(results.glob("*/analysis/summary.csv")) else []


def test_a_read_only_results_directory_is_one_line_before_anything_starts(
    tmp_path: Path,
) -> None:
    from tests.test_accounting import tmpfs

    scenario = tmp_path / "failure.toml"
    scenario.write_text(SCENARIO)
    with tmpfs(tmp_path / "ro", "ro", "size=1m") as ro:
        done = brokerbench("run", str(scenario), "--results", str(ro), timeout=120)
    assert done.returncode == 2, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line == (
        f"brokerbench: {ro}: cannot write results there (permission denied (read-only file "
        "system)); make it writable or choose another with --results"
    )
    assert "starting" not in done.stdout  # no broker was started


def test_an_interrupted_run_reports_what_was_not_drained_and_no_loss(tmp_path: Path) -> None:
    proc, results = start_run(tmp_path)
    wait_for_messages(results, proc)
    os.killpg(proc.pid, signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=240)
    assert proc.returncode == 130, stderr
    (row,) = read_summary(results)
    assert int(row["sent"]) > 0 and row["lost"] == "0" and int(row["not_drained"]) >= 0
    header = next(line for line in stdout.splitlines() if "send msgs/s" in line)
    if int(row["not_drained"]) > 0:
        assert row["delivery"] == (
            "not drained: the run was interrupted before receivers drained the queue"
        )
        assert "lost  not drained" in header
    else:  # every confirmed message had been received when the run stopped
        assert row["delivery"] == "drained" and "not drained" not in header


@pytest.mark.postgresql
@pytest.mark.parametrize("after", [0.05, 0.5])
def test_a_coordinator_killed_during_start_up_leaves_no_work_directory(
    tmp_path: Path, after: float, run_temp: Path
) -> None:
    """Killed while PostgreSQL is being initialised (initdb, its password files written):
    every directory was the watchdog's before anything was written into it."""
    pattern = ("brokerbench-postgres*", "brokerbench-postgresql-*")
    temp = run_temp
    before = {p for glob in pattern for p in temp.glob(glob)}
    text = 'name = "pg"\n[broker]\nsystem = "postgresql"\n[load]\nduration = "5s"\n'
    proc, _ = start_run(tmp_path, text=text)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith("starting PostgreSQL"), line
    time.sleep(after)
    proc.kill()  # the coordinator alone, as the out-of-memory killer would
    proc.communicate(timeout=30)
    deadline = time.monotonic() + 20
    left: set[Path] = set()
    while time.monotonic() < deadline:
        left = {p for glob in pattern for p in temp.glob(glob)} - before
        if not left:
            break
        time.sleep(0.2)
    assert not left, f"left behind: {sorted(left)}"
