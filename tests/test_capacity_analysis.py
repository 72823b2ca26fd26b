"""A capacity search in the analysis: every probe judged again from the analysis's figures
by the search's own rule, the capacity bracket in the terminal summary and in compare."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from analysis.capacity import capacity, probe_columns
from analysis.columns import SUMMARY_COLUMNS
from analysis.compare import Verdict, compare_runs, text_report
from analysis.console import run_summary


def search_context(slo_ms: float = 20.0, complete: bool = True) -> dict:
    probes = [
        {"point": i, "rate": rate, "rate_per_worker": rate, "holds": holds, "reason": ""}
        for i, (rate, holds) in enumerate(((500, True), (8000, False), (2000, True), (4000, None)))
    ]
    return {
        "broker": {"system": "redis", "title": "Redis"},
        "search": {
            "spec": {"low": 500, "high": 8000},
            "slo_p99_ms": slo_ms,
            "sender_workers": 1,
            "probes": probes,
            "outcome": "within_precision" if complete else "incomplete",
            "complete": complete,
        },
    }


def analysed(point: int, send: float, receive: float, p99: float, errors: int = 0) -> dict:
    return {
        "point": point,
        "send_msgs_per_s": send,
        "receive_msgs_per_s": receive,
        "processing_latency_run_p99_ms": p99,
        "errors": errors,
    }


FIGURES = {
    0: analysed(0, 500, 500, 3.0),
    1: analysed(1, 6100, 3000, 900.0),
    2: analysed(2, 2000, 1990, 25.0),  # the run judged it held; the analysis reads p99 25 ms
    3: analysed(3, 4000, 4000, 5.0),
}


def rows_of(context: dict) -> list[dict]:
    judged = probe_columns(context, FIGURES)
    return [
        {**FIGURES[p], **judged[p], "label": f"rate={judged[p]['target_msgs_per_s']:g}"}
        for p in FIGURES
    ]


def test_each_probe_is_judged_from_the_analysis_figures_by_the_search_rule() -> None:
    judged = probe_columns(search_context(), FIGURES)
    assert judged[0] == {
        "target_msgs_per_s": 500,
        "slo_holds": True,
        "slo_reason": "p99 3 ms ≤ SLO 20 ms",
    }
    assert judged[1]["slo_holds"] is False
    assert "senders reached only 76 % of the target rate" in judged[1]["slo_reason"]
    assert "receivers did not keep up" in judged[1]["slo_reason"]
    assert judged[2] == {
        "target_msgs_per_s": 2000,
        "slo_holds": False,
        "slo_reason": "p99 25 ms > SLO 20 ms",
    }
    assert judged[3]["slo_holds"] is None and judged[3]["slo_reason"].startswith("not judged")
    assert probe_columns({"broker": {}}, FIGURES) == {}


def test_the_capacity_bracket_comes_from_the_analysed_verdicts() -> None:
    context = search_context()
    found = capacity(context, rows_of(context))
    assert found is not None
    assert (found.holding, found.failing, found.probes) == (500, 2000, 4)
    assert found.line() == "capacity at SLO p99 ≤ 20 ms: ≥ 500 and < 2,000 msgs/s (4 probes)"
    assert run_summary(context, rows_of(context)).splitlines()[-1] == found.line()
    unfinished = search_context(complete=False)
    assert "the search did not finish" in capacity(unfinished, rows_of(unfinished)).line()


def write_run(directory: Path, context: dict, rows: list[dict]) -> Path:
    (directory / "analysis").mkdir(parents=True)
    (directory / "context.json").write_text(json.dumps(context))
    with (directory / "analysis" / "summary.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=SUMMARY_COLUMNS, extrasaction="ignore")
        writer.writeheader()
        for row in rows:
            writer.writerow(
                {**row, "threads": 1, "sender_nodes": 1, "receiver_nodes": 2, "message_size": 100}
            )
    return directory


def test_compare_puts_the_two_capacities_side_by_side_with_their_brackets(tmp_path: Path) -> None:
    context = search_context()
    a = write_run(tmp_path / "a", context, rows_of(context))
    better = [
        dict(r, slo_holds="True") if r["target_msgs_per_s"] == 2000 else r for r in rows_of(context)
    ]
    better[1] = dict(better[1], slo_holds="False")
    b = write_run(tmp_path / "b", context, better)
    comparison = compare_runs(a, b)
    first = comparison.changes[0]
    assert first.point == "capacity search" and first.metric.unit == "msgs/s"
    assert (first.baseline, first.contender) == (500, 2000)
    assert first.verdict is Verdict.BETTER  # [500, 2,000) and [2,000, 8,000) do not overlap
    assert "capacity at SLO p99 ≤ 20 ms" in text_report(comparison)
    assert "500 [500–2,000]" in text_report(comparison)


def test_table_and_report_show_each_probe_target_and_verdict_and_the_capacity(
    tmp_path: Path,
) -> None:
    from analysis.report import write_html
    from analysis.summary_table import text_table

    context = search_context()
    context.update(run_id="r", scenario={"name": "redis-capacity", "measurement": {}})
    context["points"] = [
        {
            "point": p["point"],
            "label": f"rate={p['rate']}",
            "varied": {"rate": p["rate"]},
            "load": {"threads": 1, "sender_nodes": 1, "rate": p["rate"]},
        }
        for p in context["search"]["probes"]
    ]
    rows = [
        {**r, "threads": 1, "sender_nodes": 1, "receiver_nodes": 2, "receivers_kept_up": "True"}
        for r in rows_of(context)
    ]
    table = text_table("Redis", rows).splitlines()
    assert "target msgs/s" in table[1]
    assert table[4].split()[:5] == ["1", "1", "1", "2", "8,000"]  # threads from `threads`
    assert table[4].endswith("p99 900 ms > SLO 20 ms")
    assert "fails the SLO: senders reached only 76 %" in table[4]
    assert "holds the SLO: p99 3 ms ≤ SLO 20 ms" in table[3]
    page = write_html(tmp_path, context, rows).read_text()
    assert "<h2>Capacity at SLO</h2>" in page
    assert "capacity at SLO p99 ≤ 20 ms: ≥ 500 and &lt; 2,000 msgs/s (4 probes)" in page
    chart = page[page.index("Latency against throughput") :]
    assert "SLO p99 \\u2264 20 ms" in chart or "SLO p99 ≤ 20 ms" in chart  # the SLO line


def test_a_bracket_the_shared_host_set_is_not_presented_as_the_brokers() -> None:
    context = search_context()
    rows = rows_of(context)
    for r in rows:  # the lowest failing probe (2,000 msgs/s) ran on a full machine
        r["limited_by"] = "shared host" if r["target_msgs_per_s"] == 2000 else "none saturated"
    found = capacity(context, rows)
    assert found is not None and found.line() == (
        "capacity at SLO p99 ≤ 20 ms: ≥ 500 and < 2,000 msgs/s (4 probes) — not the broker's "
        "limit: host-bound: broker and clients share this machine; run them apart"
    )
    for r in rows:
        r["limited_by"] = "broker CPU"
    assert "not the broker's limit" not in capacity(context, rows).line()
