"""Repeated sweep points in the analysis: medians and ranges per point, ``repeats.csv``, the
terminal table, and ``compare`` using the measured range as its noise band."""

from __future__ import annotations

import csv
import io

from analysis import repeats
from analysis.compare import Verdict, compare_rows, noise_band, text_report
from analysis.console import run_summary
from tests.test_compare import change, row


def runs(threads: int, base: int, rates: list[float], p99: list[float]) -> list[dict[str, str]]:
    return [
        row(
            threads,
            point=str(base + 2 * i),
            base_point=str(base),
            repeat=str(i),
            label=f"threads={threads}",
            send_msgs_per_s=rate,
            processing_latency_run_p99_ms=latency,
        )
        for i, (rate, latency) in enumerate(zip(rates, p99, strict=True))
    ]


def test_each_point_gets_the_median_and_range_of_its_repeats() -> None:
    rows = runs(1, 0, [1000, 1200, 900], [5, 9, 7]) + runs(4, 1, [4000, 4100, 3900], [8, 8, 8])
    assert repeats.repeated(rows)
    one, four = repeats.summarise(rows)
    assert (one.base_point, one.runs, four.base_point) == (0, 3, 1)
    assert one.spreads["send_msgs_per_s"] == repeats.Spread(1000, 900, 1200, 3)
    assert one.spreads["processing_latency_run_p99_ms"].median == 7
    written = list(csv.DictReader(io.StringIO(repeats.repeats_csv([one, four]))))
    assert written[0]["send_msgs_per_s_median"] == "1000"
    assert (written[0]["send_msgs_per_s_min"], written[0]["send_msgs_per_s_max"]) == ("900", "1200")
    assert written[1]["lost_median"] == ""  # not recorded in these rows: empty, not 0


def test_single_runs_are_not_repeats() -> None:
    rows = [row(1, point="0", label="threads=1"), row(4, point="1", label="threads=4")]
    assert not repeats.repeated(rows)


def test_the_terminal_shows_medians_and_ranges_of_repeated_points() -> None:
    rows = runs(1, 0, [1000, 1200, 900], [5, 9, 7])
    text = run_summary({"broker": {"title": "Redis"}}, rows)
    assert "median (min–max) over the repeats of each point" in text
    line = text.splitlines()[-1]
    assert "threads=1" in line and " 3 " in line and "1,000 (900–1,200)" in line


def test_compare_uses_the_measured_range_as_noise_band() -> None:
    baseline = runs(1, 0, [1000, 1200, 900], [5, 9, 7])
    overlapping = runs(1, 0, [1100, 1300, 1150], [6, 8, 7])
    disjoint = runs(1, 0, [1500, 1600, 1550], [2, 3, 2])
    same = compare_rows(baseline, overlapping)
    # +15 % on the median, but within the runs' ranges: the same.
    throughput = change(same, 1, "send_msgs_per_s")
    assert throughput.baseline == 1000 and throughput.contender == 1150
    assert throughput.verdict is Verdict.SAME
    better = compare_rows(baseline, disjoint)
    assert change(better, 1, "send_msgs_per_s").verdict is Verdict.BETTER
    assert change(better, 1, "processing_latency_run_p99_ms").verdict is Verdict.BETTER
    assert noise_band(better).startswith("the measured range")
    report = text_report(better)
    assert "1,000 [900–1,200]" in report and "1,550 [1,500–1,600]" in report


def test_without_repeats_compare_keeps_a_fixed_band_and_says_so() -> None:
    one = compare_rows([row(1, send_msgs_per_s=1000)], [row(1, send_msgs_per_s=1010)])
    assert change(one, 1, "send_msgs_per_s").verdict is Verdict.SAME
    assert "no repeats" in noise_band(one)


def test_the_report_has_a_table_of_medians_and_ranges(tmp_path) -> None:
    from analysis.report import write_html

    rows = runs(1, 0, [1000, 1200, 900], [5, 9, 7]) + runs(4, 1, [4000, 4100, 3900], [8, 8, 8])
    context = {"run_id": "r", "broker": {"title": "Redis"}, "scenario": {"name": "s"}}
    page = write_html(tmp_path, context, rows).read_text()
    repeats_part = page[page.index("<h2>Repeats</h2>") :]
    assert "<td>1,000 (900–1,200)</td>" in repeats_part and "<td>3</td>" in repeats_part
    assert "<td>4,000 (3,900–4,100)</td>" in repeats_part
