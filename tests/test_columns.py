"""The summary's columns (one declaration with every view's metadata, scopes in the names,
older summaries read with today's names), its typed row, and the HdrHistogram
percentile-distribution export. That docs/columns.md lists the columns as declared is
``tests/test_docs.py``'s to check."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from analysis import compare, overview, repeats, summary_table
from analysis.column_model import (
    Better,
    Columns,
    Scope,
    latency_columns,
    run_column,
    window_column,
)
from analysis.columns import COLUMNS, SUMMARY_COLUMNS
from analysis.hdr import Bucket, hgrm
from analysis.summary_row import Figures, SummaryRow, read_summary_csv, upgrade
from workload.model.layout import LAYOUT


def test_every_latency_column_names_its_scope() -> None:
    latency = [c for c in SUMMARY_COLUMNS if "latency" in c or "delay" in c]
    assert latency and all("_window_" in c or "_run_" in c for c in latency)
    assert len(SUMMARY_COLUMNS) == len(set(SUMMARY_COLUMNS))
    assert window_column("processing_latency") == "processing_latency_window_p95_ms"
    assert run_column("send_delay", "p999") in SUMMARY_COLUMNS


def test_every_column_is_declared_once_and_the_names_derive_from_the_declaration() -> None:
    names = [c.name for c in COLUMNS.values()]
    assert names == SUMMARY_COLUMNS == list(COLUMNS)
    assert all(COLUMNS[name].name == name for name in names)
    with pytest.raises(ValueError, match="declared twice"):
        Columns(COLUMNS["lost"], COLUMNS["sent"], COLUMNS["lost"])
    assert compare.Better is Better


def table_names() -> dict[str, list[str]]:
    """Every column a view shows, by view."""
    return {
        "report table": [key for key, _, _ in summary_table.TABLE],
        "report extras": [
            key
            for key, _, _ in (
                summary_table.TARGET,
                summary_table.COST,
                summary_table.NOT_DRAINED,
                summary_table.SEND_DELAY,
                *summary_table.RUN_EXTRAS.values(),
            )
        ],
        "repeats table": [key for key, _, _ in repeats.TABLE],
        "overview charts": [c.name for c in overview.CHARTS],
    }


def test_every_column_a_view_uses_is_declared_and_titled() -> None:
    for view, names in table_names().items():
        for name in names:
            assert name in COLUMNS, f"{view}: {name} is no column of summary.csv"
            assert COLUMNS[name].title, f"{view}: {name} has no title"
    for metric in compare.METRICS:
        assert COLUMNS[metric.column].long and COLUMNS[metric.column].better is not None
    assert all(name in COLUMNS for name in repeats.METRICS)


def test_views_show_what_the_columns_declare() -> None:
    assert summary_table.TABLE[4] == ("send_msgs_per_s", "send msgs/s", "{:,.0f}")
    assert summary_table.TABLE[6] == ("send_mb_per_s", "send MB/s", "{:,.2f}")
    assert summary_table.SEND_DELAY == (
        "send_delay_run_p99_ms",
        "send delay p99 ms [run]",
        "{:,.2f}",
    )
    assert summary_table.RUN_EXTRAS["p999"] == (
        "processing_latency_run_p999_ms",
        "proc p99.9 ms [run]",
        "{:,.1f}",
    )
    lost = next(m for m in compare.METRICS if m.column == "lost")
    assert (lost.title, lost.unit, lost.better, lost.faults) == (
        "lost messages",
        "msgs",
        Better.LOWER,
        False,
    )
    gap = next(m for m in compare.METRICS if m.column == "send_gap_s")
    assert (gap.title, gap.unit, gap.faults) == ("failover gap, sends", "s", True)
    assert [c.chart_title for c in overview.CHARTS[1:3]] == [
        "Receive throughput",
        "Processing latency p95 (worst window)",
    ]
    # A metric with no direction is refused by compare.
    with pytest.raises(ValueError, match="label: no better direction"):
        compare.Metric.of(COLUMNS["label"])


def test_latency_columns_are_titled_by_their_scope() -> None:
    for name in latency_columns():
        column = COLUMNS[name]
        assert column.scope is (Scope.WINDOW if "_window_" in name else Scope.RUN), name
        assert column.title.endswith(f" ms [{column.scope.value}]"), name
        assert (column.unit, column.better) == ("ms", Better.LOWER), name
    assert COLUMNS["processing_latency_run_p50_ms"].long == "processing p50, whole run"
    assert COLUMNS["send_delay_window_p95_ms"].title == "send delay p95 ms [window]"


def test_a_misspelt_column_fails_where_it_is_named() -> None:
    """A column is named through COLUMNS or as a field of a step's typed figures: a name
    that is no column fails at once — when it is looked up, when the figures' class is
    defined (at import), when a producer makes its figures, or when a row takes cells."""
    assert COLUMNS["broker_cpu_pct"].unit == "% of a core"
    with pytest.raises(KeyError, match=r"not a column of summary\.csv: broker_cpu_pcct"):
        _ = COLUMNS["broker_cpu_pcct"]
    with pytest.raises(KeyError, match=r"not a column of summary\.csv: brokr_cpu_pct"):

        @dataclass(frozen=True, eq=False)
        class Misspelt(Figures):
            brokr_cpu_pct: float

    from analysis.resources import Resources

    with pytest.raises(TypeError, match="broker_cpu_pcct"):
        Resources("none saturated", "", broker_cpu_pcct=1.0)  # type: ignore[call-arg]
    with pytest.raises(ValueError, match=r"not a column of summary\.csv: lsot"):
        SummaryRow({"point": 0}).merged({"lsot": 1})


def test_every_step_makes_figures_of_declared_columns() -> None:
    """Every typed figures class of the analysis job's steps (defined when their modules
    are imported) holds columns of summary.csv only, and reads as a mapping of them."""
    import analysis.job  # noqa: F401  (defines the steps' figures)

    kinds = [k for k in Figures.__subclasses__() if k.__module__.startswith("analysis.")]
    assert {k.__name__ for k in kinds} >= {"Resources", "FaultFigures", "Backlog", "Probe"}
    for kind in kinds:
        assert kind.columns and all(name in COLUMNS for name in kind.columns), kind
    from analysis.capacity import Probe

    probe = Probe(500.0, True, "p99 3 ms ≤ SLO 20 ms")
    assert dict(probe) == {
        "target_msgs_per_s": 500.0,
        "slo_holds": True,
        "slo_reason": probe.slo_reason,
    }
    assert SummaryRow({"point": 1}).merged(probe).slo_holds is True


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


def test_a_summary_row_reads_its_columns_as_attributes() -> None:
    row = SummaryRow({"point": "3", "send_msgs_per_s": "1200.5", "lost": 0})
    assert row.send_msgs_per_s == "1200.5" and row.lost == 0 and row.received is None
    assert row.point == 3  # typed: the index as a number
    with pytest.raises(AttributeError, match=r"not a column of summary\.csv: send_msgs_per_sec"):
        _ = row.send_msgs_per_sec
    assert not hasattr(row, "lsot")
    # No column hides behind a method of the row (only ``point``, which reads it typed).
    assert [c for c in SUMMARY_COLUMNS if hasattr(SummaryRow, c)] == ["point"]


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
    assert LAYOUT.hdr(0, "processing_latency") == "analysis/hdr/point-0-processing_latency.hgrm"
