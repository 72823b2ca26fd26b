"""The summary's column names (one declaration, scopes in the names, older summaries read
with today's names), its typed row, and the HdrHistogram percentile-distribution export."""

from __future__ import annotations

from pathlib import Path

import pytest

from analysis.columns import (
    SUMMARY_COLUMNS,
    SummaryRow,
    read_summary_csv,
    run_column,
    upgrade,
    window_column,
)
from analysis.hdr import Bucket, hgrm
from workload.layout import LAYOUT


def test_every_latency_column_names_its_scope() -> None:
    latency = [c for c in SUMMARY_COLUMNS if "latency" in c or "delay" in c]
    assert latency and all("_window_" in c or "_run_" in c for c in latency)
    assert len(SUMMARY_COLUMNS) == len(set(SUMMARY_COLUMNS))
    assert window_column("processing_latency") == "processing_latency_window_p95_ms"
    assert run_column("send_delay", "p999") in SUMMARY_COLUMNS


def test_an_older_summary_reads_with_todays_names() -> None:
    old = {"processing_latency_p95_ms": "5", "processing_latency_p99_ms": "9", "lost": "0"}
    assert upgrade(old) == {
        "processing_latency_window_p95_ms": "5",
        "processing_latency_run_p99_ms": "9",
        "lost": "0",
    }
    today = {"processing_latency_window_p95_ms": "5", "send_delay_run_p99_ms": "1"}
    assert upgrade(today) == today


def test_a_summary_row_holds_exactly_the_declared_columns() -> None:
    row = SummaryRow({"point": 2, "sent": "10", "lost": ""})
    assert list(row) == SUMMARY_COLUMNS
    assert row.point == 2 and row.figure("sent") == 10.0
    assert row.figure("lost") is None and row["received"] is None
    with pytest.raises(ValueError, match=r"not a column of summary\.csv: lsot"):
        SummaryRow({"point": 0, "lsot": 1})


def test_an_older_summary_file_reads_as_rows_with_todays_columns(tmp_path: Path) -> None:
    path = tmp_path / "summary.csv"
    path.write_text("point,processing_latency_p95_ms,lost\n0,5,0\n")
    (row,) = read_summary_csv(path)
    assert row.point == 0 and row.figure(window_column("processing_latency")) == 5.0
    assert row["duplicated"] is None


def test_hgrm_lists_each_bucket_with_its_percentile_and_count() -> None:
    text = hgrm([Bucket(20, 1, 2.0), Bucket(10, 3, 1.0), Bucket(30, 0, 9.0)])
    lines = text.splitlines()
    assert lines[0].split() == ["Value", "Percentile", "TotalCount", "1/(1-Percentile)"]
    first, last = lines[2].split(), lines[3].split()
    assert first == ["1.000", "0.750000000000", "3", "4.00"]
    assert last == ["2.000", "1.000000000000", "4"]
    mean = float(lines[4].split("=")[1].split(",")[0])
    assert mean == pytest.approx(1.25)
    assert lines[5].startswith("#[Max     =        2.000, Total count    =            4]")


def test_an_empty_histogram_gives_no_file_text_and_names_are_per_point_and_metric() -> None:
    assert hgrm([]) == ""
    assert LAYOUT.hdr(0, "processing_latency") == "analysis/hdr/point-1-processing_latency.hgrm"
