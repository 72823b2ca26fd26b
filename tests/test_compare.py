"""``brokerbench compare``: matching sweep points, changes and the direction of "better"."""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path

import pytest

from analysis.columns import SUMMARY_COLUMNS
from analysis.compare import (
    METRICS,
    Verdict,
    compare_rows,
    compare_runs,
    load_summary,
    text_report,
    write_csv,
)
from analysis.compare_cli import register
from workload.model.errors import UserError

#: The metrics every run has (the faults' only where a point declared some).
EVERY_RUN = [m for m in METRICS if not m.faults]


def row(threads: int, **values: object) -> dict[str, str]:
    base = {c: "" for c in SUMMARY_COLUMNS}
    base.update(broker="kafka", threads=str(threads), sender_nodes="1", receiver_nodes="1")
    base.update(message_size="100")
    base.update({k: str(v) for k, v in values.items()})
    return base


def change(comparison, threads: int, column: str):
    (found,) = [
        c
        for c in comparison.changes
        if c.metric.column == column and c.point.startswith(f"threads={threads} ")
    ]
    return found


def test_throughput_up_is_better_latency_up_is_worse() -> None:
    comparison = compare_rows(
        [row(1, send_msgs_per_s=1000, send_latency_window_p95_ms=10)],
        [row(1, send_msgs_per_s=1500, send_latency_window_p95_ms=12)],
    )
    rate = change(comparison, 1, "send_msgs_per_s")
    assert (rate.absolute, rate.relative, rate.verdict) == (500, 0.5, Verdict.BETTER)
    latency = change(comparison, 1, "send_latency_window_p95_ms")
    assert latency.absolute == 2
    assert latency.relative == pytest.approx(0.2)
    assert latency.verdict is Verdict.WORSE


def test_lower_latency_and_fewer_lost_are_better() -> None:
    comparison = compare_rows(
        [row(5, processing_latency_window_p95_ms=40, lost=3, receive_msgs_per_s=900)],
        [row(5, processing_latency_window_p95_ms=20, lost=0, receive_msgs_per_s=500)],
    )
    assert change(comparison, 5, "processing_latency_window_p95_ms").verdict is Verdict.BETTER
    lost = change(comparison, 5, "lost")
    assert (lost.absolute, lost.relative, lost.verdict) == (-3, -1.0, Verdict.BETTER)
    assert change(comparison, 5, "receive_msgs_per_s").verdict is Verdict.WORSE


def test_small_changes_zero_baseline_and_missing_values() -> None:
    comparison = compare_rows(
        [row(1, send_msgs_per_s=1000, duplicated=0, errors=0)],
        [row(1, send_msgs_per_s=1010, duplicated=4, send_latency_window_p95_ms=3)],
    )
    assert change(comparison, 1, "send_msgs_per_s").verdict is Verdict.SAME
    dup = change(comparison, 1, "duplicated")
    assert (dup.absolute, dup.relative, dup.verdict) == (4, None, Verdict.WORSE)
    assert change(comparison, 1, "errors").verdict is Verdict.UNKNOWN
    assert change(comparison, 1, "send_latency_window_p95_ms").verdict is Verdict.UNKNOWN


def test_points_are_matched_by_load_not_position() -> None:
    comparison = compare_rows(
        [row(1, send_msgs_per_s=100), row(5, send_msgs_per_s=500), row(25, send_msgs_per_s=9)],
        [row(5, send_msgs_per_s=250), row(1, send_msgs_per_s=100), row(50, send_msgs_per_s=1)],
    )
    assert change(comparison, 5, "send_msgs_per_s").relative == -0.5
    assert change(comparison, 1, "send_msgs_per_s").verdict is Verdict.SAME
    assert len(comparison.changes) == 2 * len(EVERY_RUN)
    assert comparison.only_baseline == ["threads=25 senders=1 receivers=1 size=100"]
    assert comparison.only_contender == ["threads=50 senders=1 receivers=1 size=100"]
    text = text_report(comparison)
    assert "only in baseline:  threads=25 senders=1" in text
    assert "+50.0%" not in text and "-50.0%" in text


def test_failover_gaps_and_what_faults_did_compare_where_a_point_had_faults() -> None:
    faults = {"faults": "kill leader at 6 s until 12 s (n0)", "fault_redelivered": 0}
    comparison = compare_rows(
        [row(1, **faults, send_gap_s=9, receive_gap_s=9, fault_duplicated=0), row(2)],
        [row(1, **faults, send_gap_s=3, receive_gap_s=3, fault_duplicated=40), row(2)],
    )
    assert change(comparison, 1, "send_gap_s").verdict is Verdict.BETTER
    assert change(comparison, 1, "receive_gap_s").absolute == -6
    assert change(comparison, 1, "fault_duplicated").verdict is Verdict.WORSE
    assert change(comparison, 1, "fault_redelivered").verdict is Verdict.SAME
    assert change(comparison, 1, "unavailable").verdict is Verdict.UNKNOWN
    shown = {c.metric.column for c in comparison.changes if c.point.startswith("threads=2 ")}
    assert "lost" in shown and "send_gap_s" not in shown  # no faults at that point
    text = text_report(comparison)
    line = next(x for x in text.splitlines() if "failover gap, sends" in x)
    assert line.split()[-4:] == ["3", "-6", "-66.7%", "better"]


def write_run(directory: Path, rows: list[dict[str, str]]) -> Path:
    (directory / "analysis").mkdir(parents=True)
    (directory / "context.json").write_text(json.dumps({"run_id": directory.name}))
    with (directory / "analysis" / "summary.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=SUMMARY_COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    return directory


def test_cli_prints_table_and_writes_csv(tmp_path: Path, capsys) -> None:
    a = write_run(tmp_path / "run-a", [row(1, send_msgs_per_s=1000, send_latency_window_p95_ms=8)])
    b = write_run(tmp_path / "run-b", [row(1, send_msgs_per_s=2000, send_latency_window_p95_ms=4)])
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(["compare", str(a), str(b), "--csv", str(tmp_path / "c.csv")])
    assert args.handler(args) == 0
    out = capsys.readouterr().out
    assert "baseline:  run-a" in out and "contender: run-b" in out
    line = next(x for x in out.splitlines() if "send throughput" in x)
    assert line.split()[-4:] == ["2,000", "+1,000", "+100.0%", "better"]
    with (tmp_path / "c.csv").open() as f:
        written = {r["metric"]: r for r in csv.DictReader(f)}
    assert written["send_latency_window_p95_ms"]["verdict"] == "better"
    assert float(written["send_latency_window_p95_ms"]["relative"]) == -0.5
    assert written["send_latency_window_p95_ms"]["better"] == "lower"


def test_unanalysed_or_missing_run_is_a_one_line_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="not a run directory"):
        load_summary(tmp_path / "nothing")
    (tmp_path / "raw").mkdir()
    (tmp_path / "raw" / "context.json").write_text("{}")
    with pytest.raises(UserError, match="brokerbench report"):
        compare_runs(tmp_path / "raw", tmp_path / "raw")


def test_write_csv_round_trip(tmp_path: Path) -> None:
    comparison = compare_rows([row(1, lost=0)], [row(1, lost=0)])
    write_csv(comparison, tmp_path / "x.csv")
    with (tmp_path / "x.csv").open() as f:
        assert len(list(csv.DictReader(f))) == len(EVERY_RUN)


def test_compare_says_where_what_set_the_pace_differs() -> None:
    from analysis.summary_row import SummaryRow

    base = [
        SummaryRow(row(1, limited_by="none saturated")),
        SummaryRow(row(4, limited_by="broker CPU")),
    ]
    cont = [
        SummaryRow(row(1, limited_by="none saturated")),
        SummaryRow(row(4, limited_by="shared host")),
    ]
    comparison = compare_rows(base, cont)
    (found,) = comparison.limits
    assert found[1:] == ("broker CPU", "shared host") and found[0].startswith("threads=4 ")
    assert "what set the pace differs at threads=4" in text_report(
        comparison
    ) and "broker CPU (baseline) vs shared host (contender)" in text_report(comparison)


def test_compare_warns_when_the_runs_are_different_setups(tmp_path: Path) -> None:
    from analysis.compare import compare_runs

    for name, system, topology in (("a", "postgresql", "single"), ("b", "redis", "single")):
        run = tmp_path / name
        (run / "analysis").mkdir(parents=True)
        (run / "context.json").write_text(
            json.dumps({"broker": {"system": system, "topology": topology}})
        )
        with (run / "analysis" / "summary.csv").open("w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=SUMMARY_COLUMNS)
            writer.writeheader()
            writer.writerow(row(1, broker=system, send_msgs_per_s=1000))
    comparison = compare_runs(tmp_path / "a", tmp_path / "b")
    assert comparison.differences == ["system: postgresql vs redis"]
    assert "different setups — system: postgresql vs redis" in text_report(comparison)
    same = compare_runs(tmp_path / "a", tmp_path / "a")
    assert same.differences == [] and "different setups" not in text_report(same)


def test_a_disturbed_point_is_marked_in_the_comparison() -> None:
    """A point one side ran disturbed (others took over a tenth of the machine) says so."""
    comparison = compare_rows(
        [row(1, send_msgs_per_s=1000, disturbed=True), row(2, send_msgs_per_s=2000)],
        [row(1, send_msgs_per_s=900), row(2, send_msgs_per_s=2100, disturbed=False)],
        "base",
        "new",
    )
    assert [p.split(" ", 1)[0] for p in comparison.disturbed] == ["threads=1"]
    assert comparison.disturbed[0].endswith("(base)")
    report = text_report(comparison)
    assert "disturbed: threads=1" in report and "took over a tenth of the machine" in report
    assert "(new)" not in report.split("disturbed:", 1)[1]
