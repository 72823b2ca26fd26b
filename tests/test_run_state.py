"""How a run ended, as its readers tell it: a context recorded as "running" whose coordinator
is gone (SIGKILL, the out-of-memory killer, a full disk when it came to write its end) is
an interrupted run — for the analysis (not drained, not lost), ``report``'s table and page,
and ``compare`` — not one in progress."""

from __future__ import annotations

import csv
import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from analysis import transforms as tf
from analysis.columns import SUMMARY_COLUMNS
from analysis.compare import compare_runs, text_report
from analysis.console import run_summary
from analysis.records import point_records
from analysis.report import write_html
from tests.test_accounting import context, records, row
from workload.model.record import CoordinatorRecord, RunContext

GONE = "interrupted (the coordinator is gone)"


@pytest.fixture
def ended_process() -> CoordinatorRecord:
    """The record of a process of this host that has ended."""
    process = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=-1)
    record = CoordinatorRecord.of_process(process.pid)
    assert record.gone() is False  # still running: a run in progress
    assert process.stdin is not None
    process.stdin.close()
    process.wait(timeout=30)
    return record


def running(coordinator: CoordinatorRecord | None, points: int = 1) -> RunContext:
    entry = {} if coordinator is None else {"coordinator": coordinator.model_dump()}
    return RunContext.of(context("running", points=points, **entry))


def test_a_running_run_whose_coordinator_is_gone_reads_interrupted(
    ended_process: CoordinatorRecord,
) -> None:
    assert ended_process.gone() is True
    record = running(ended_process)
    assert record.coordinator_gone and record.ended == "interrupted"
    assert record.state == GONE


def test_a_run_whose_coordinator_still_runs_is_running() -> None:
    record = running(CoordinatorRecord.this_process())
    assert not record.coordinator_gone
    assert (record.ended, record.state) == ("running", "running")


def test_a_pid_given_to_another_process_since_is_not_taken_for_the_coordinator() -> None:
    mine = CoordinatorRecord.this_process()
    assert mine.started_ticks is not None
    earlier = mine.model_copy(update={"started_ticks": mine.started_ticks - 1})
    assert earlier.gone() is True
    assert running(earlier).state == GONE


def test_a_machine_restarted_since_ends_every_run_of_it() -> None:
    rebooted = CoordinatorRecord.this_process().model_copy(update={"boot": "another-boot"})
    assert rebooted.gone() is True


def test_a_coordinator_on_another_host_cannot_be_told() -> None:
    elsewhere = CoordinatorRecord(host=f"not-{socket.gethostname()}", pid=4242, started_ticks=1)
    assert elsewhere.gone() is None
    record = running(elsewhere)
    assert record.ended == "running" and not record.coordinator_gone
    assert record.state == (
        f"running, or interrupted: its coordinator (pid 4242 on not-{socket.gethostname()}) "
        "cannot be seen from here"
    )


def test_a_finished_run_reads_as_it_ended_whatever_its_coordinator(
    ended_process: CoordinatorRecord,
) -> None:
    for status in ("complete", "failed", "interrupted"):
        entry = {"coordinator": ended_process.model_dump()}
        record = RunContext.of(context(status, **entry))
        assert (record.ended, record.state, record.coordinator_gone) == (status, status, False)


def test_a_run_that_records_no_coordinator_stays_as_recorded() -> None:
    """A run on AWS (nothing writes its end yet) or an older record."""
    record = running(None)
    assert not record.records_its_end
    assert (record.ended, record.state) == ("running", "running")
    assert "coordinator" not in record.dump()


def test_the_coordinator_is_recorded_and_read_back(tmp_path: Path) -> None:
    from workload.model.record import load_context, write_context

    record = running(CoordinatorRecord.this_process())
    write_context(tmp_path, record)
    assert load_context(tmp_path).coordinator == record.coordinator


def test_the_analysis_counts_a_gone_coordinators_last_point_not_drained_not_lost(
    ended_process: CoordinatorRecord,
) -> None:
    got = point_records(running(ended_process, points=3), records(points=2))
    assert [(p.point, p.state) for p in got] == [(0, tf.DRAINED), (1, tf.STOPPED), (2, tf.NOT_RUN)]
    assert got[1].delivery == (
        f"not drained: the run was {GONE} before receivers drained the queue"
    )


def test_report_says_so_in_its_table_and_on_its_page(
    ended_process: CoordinatorRecord, tmp_path: Path
) -> None:
    record = running(ended_process)
    note = next(line for line in run_summary(record, [row(0)]).splitlines() if "note" in line)
    assert note == (
        f"  note: the run did not finish: {GONE}, with no end recorded — what was not "
        "received is not drained, not lost"
    )
    page = write_html(tmp_path, record.dump(), [row(0)]).read_text()
    assert f"status <b>{GONE}</b>" in page
    alive = run_summary(running(CoordinatorRecord.this_process()), [row(0)])
    assert "note: the run is still running: these are its figures so far" in alive
    assert "note: the run" not in run_summary(running(None), [row(0)])


def test_compare_says_which_run_did_not_finish(
    ended_process: CoordinatorRecord, tmp_path: Path
) -> None:
    contexts = {
        "a": {"status": "complete"},
        "b": {"status": "running", "coordinator": ended_process.model_dump()},
    }
    for name, recorded in contexts.items():
        run = tmp_path / name
        (run / "analysis").mkdir(parents=True)
        (run / "context.json").write_text(json.dumps(recorded))
        with (run / "analysis" / "summary.csv").open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=SUMMARY_COLUMNS)
            writer.writeheader()
            writer.writerow({c: "" for c in SUMMARY_COLUMNS} | {"threads": "1"})
    lines = text_report(compare_runs(tmp_path / "a", tmp_path / "b")).splitlines()
    assert lines[:2] == ["baseline:  a", f"contender: b ({GONE})"]
