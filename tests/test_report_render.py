"""The HTML reports: the cross-system overview's charts, and both pages rendered by a real
headless browser (Debian's chromium; skipped only when the binary is absent), which runs
the inline plotly.js: the tests count the charts it drew, read their tick labels and take a
screenshot of each page."""

from __future__ import annotations

import csv
import json
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from analysis import charts
from analysis.columns import SUMMARY_COLUMNS
from analysis.overview import _series, load_runs, max_throughput, render, write_overview
from analysis.report import write_html
from workload.model.faults import FaultRecord, PointTimeline, write_timeline

NS = 1_000_000_000

CHROMIUM = shutil.which("chromium") or (
    "/usr/bin/chromium" if Path("/usr/bin/chromium").exists() else None
)


def context(run_id: str, system: str, title: str) -> dict:
    return {
        "run_id": run_id,
        "scenario": {"name": f"{system}-sweep", "measurement": {"window": "5s"}},
        "broker": {"system": system, "title": title, "caveats": ["a caveat"]},
        "points": [],
        "started": "2026-01-01T00:00:00Z",
        "finished": "2026-01-01T00:10:00Z",
        "status": "complete",
    }


def summary_row(
    point: int, threads: int, senders: int, send: float, receive: float, p95: float, p99: float = 0
):
    row = {c: "" for c in SUMMARY_COLUMNS}
    row.update(
        broker="x",
        point=str(point),
        label=f"threads={threads}",
        threads=str(threads),
        sender_nodes=str(senders),
        receiver_nodes="1",
        message_size="100",
        send_msgs_per_s=str(send),
        receive_msgs_per_s=str(receive),
        processing_latency_window_p95_ms=str(p95),
        processing_latency_run_p50_ms=str(p95 / 4),
        processing_latency_run_p99_ms=str(p99 or p95 * 1.5),
        processing_latency_run_p999_ms=str((p99 or p95 * 1.5) * 2),
        send_latency_window_p95_ms=str(p95 / 2),
        lost="0",
        duplicated="0",
        receivers_kept_up="True",
    )
    return row


def write_run(results: Path, run_id: str, system: str, title: str, rows: list[dict]) -> Path:
    run_dir = results / run_id
    (run_dir / "analysis").mkdir(parents=True)
    (run_dir / "context.json").write_text(json.dumps(context(run_id, system, title)))
    with (run_dir / "analysis" / "summary.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=SUMMARY_COLUMNS)
        writer.writeheader()
        writer.writerows(rows)
    return run_dir


@pytest.fixture
def results(tmp_path: Path) -> Path:
    write_run(
        tmp_path,
        "kafka-1",
        "kafka",
        "Kafka",
        # 8× the throughput for 13× the p99 — but two levels make no knee.
        [summary_row(0, 1, 1, 1000, 990, 20, 30), summary_row(1, 5, 2, 8000, 7900, 45, 400)],
    )
    write_run(
        tmp_path,
        "redis-1",
        "redis",
        "Redis Streams",
        [summary_row(0, 1, 1, 3000, 3000, 4), summary_row(1, 5, 2, 12000, 11000, 9)],
    )
    (tmp_path / "not-analysed").mkdir()
    (tmp_path / "not-analysed" / "context.json").write_text("{}")
    return tmp_path


def test_overview_reads_analysed_runs_and_charts_them(results: Path) -> None:
    runs = load_runs(results)
    assert [r.name for r in runs] == ["Kafka", "Redis Streams"]
    assert max_throughput(runs) == {"Kafka": 7900.0, "Redis Streams": 11000.0}
    # 5 threads × 2 sender nodes = 10 sending threads.
    assert _series(runs, "receive_msgs_per_s")["Redis Streams"] == [(1, 3000.0), (10, 11000.0)]
    page = render(runs)
    # Max-throughput bars, latency–throughput curves, 5 charts by load.
    assert page.count('class="plotly-graph-div"') == 7
    assert page.count(charts.plotly_script()) == 1  # plotly.js once, inline
    assert not re.search(r"<script[^>]*\bsrc=|<link\b", page)  # nothing from the network
    assert 'href="redis-1/analysis/report.html"' in page


def test_same_system_twice_is_told_apart(tmp_path: Path) -> None:
    for run_id in ("a", "b"):
        write_run(tmp_path, run_id, "kafka", "Kafka", [summary_row(0, 1, 1, 10, 10, 1)])
    assert [r.name for r in load_runs(tmp_path)] == ["Kafka · a", "Kafka · b"]
    assert write_overview(tmp_path / "a") == tmp_path / "a" / "report.html"
    assert write_overview(tmp_path / "nothing") is None


LATENCIES = ("processing_latency", "send_latency", "send_delay")
QUANTILE_FACTORS = {"p50": 1, "p95": 2, "p99": 4, "p999": 9, "max": 30}


def write_series(run_dir: Path, open_loop: set[int]) -> None:
    """Latency windows and whole-run histograms of points 0 and 1 (send delay only where a
    point ran open loop), as the analysis job writes them."""
    windows: dict[str, list] = {"run_id": [], "point": [], "window_start": [], "window_seconds": []}
    windows |= {"send_msgs_per_s": [], "receive_msgs_per_s": []}
    windows |= {f"{m}_{q}": [] for m in LATENCIES for q in ("p50", "p95", "p99", "p999", "max")}
    histograms: dict[str, list] = {
        k: [] for k in ("run_id", "point", "metric", "bucket", "count", "value_ms")
    }
    for point, scale in ((0, 1.0), (1, 8.0)):
        for i in range(6):
            windows["run_id"].append(run_dir.name)
            windows["point"].append(point)
            windows["window_start"].append(1_700_000_000 + 100 * point + i)
            windows["window_seconds"].append(5)
            windows["send_msgs_per_s"].append(1000.0 * scale + 10 * i)
            windows["receive_msgs_per_s"].append(990.0 * scale + 10 * i)
            for m, base in zip(LATENCIES, (2.0, 0.5, 0.05), strict=True):
                present = m != "send_delay" or point in open_loop
                for q, factor in QUANTILE_FACTORS.items():
                    windows[f"{m}_{q}"].append(base * factor * scale if present else None)
        for m, base in zip(LATENCIES, (2.0, 0.5, 0.05), strict=True):
            if m == "send_delay" and point not in open_loop:
                continue
            for bucket, count in ((-1, 1), (100, 5000), (150, 3000), (200, 400), (300, 5)):
                histograms["run_id"].append(run_dir.name)
                histograms["point"].append(point)
                histograms["metric"].append(m)
                histograms["bucket"].append(bucket)
                histograms["count"].append(count)
                histograms["value_ms"].append(0.0 if bucket < 0 else base * scale * bucket / 100)
    for name, table in (("windows", windows), ("histograms", histograms)):
        directory = run_dir / "analysis" / name
        directory.mkdir()
        pq.write_table(pa.table(table), directory / "part-0.parquet")


def chromium_command(tmp_path: Path) -> list[str]:
    """Headless chromium with a profile of its own under ``tmp_path``, nothing fetched."""
    assert CHROMIUM is not None
    return [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        "--virtual-time-budget=5000",
        f"--user-data-dir={tempfile.mkdtemp(dir=tmp_path)}",
    ]


def page_dom(page: Path, tmp_path: Path) -> str:
    """The DOM of ``page`` after its scripts ran (plotly draws the charts into it)."""
    return subprocess.run(
        [*chromium_command(tmp_path), "--dump-dom", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout


def render_in_chromium(page: Path, tmp_path: Path) -> str:
    """Screenshot ``page`` and return its DOM after its scripts ran (:func:`page_dom`)."""
    common = chromium_command(tmp_path)
    shot = tmp_path / f"{page.parent.parent.name}-{page.stem}.png"
    subprocess.run(
        [*common, f"--screenshot={shot}", "--window-size=1400,4000", page.as_uri()],
        capture_output=True,
        timeout=120,
        check=True,
    )
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert shot.stat().st_size > 50_000  # charts and tables drew something
    return page_dom(page, tmp_path)


def drawn(dom: str, prefix: str) -> int:
    """How many of the page's figures plotly drew (it marks their divs ``js-plotly-plot``
    and puts its ``main-svg`` in them)."""
    plots = re.findall(rf'<div id="{prefix}-\d+" class="plotly-graph-div js-plotly-plot"', dom)
    assert dom.count('class="main-svg"') >= len(plots)
    return len(plots)


#: What ``#chart-errors`` looks like when no chart failed.
NO_CHART_ERRORS = '<ul id="chart-errors" class="warn" hidden=""></ul>'


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
def test_reports_render_in_headless_chromium(results: Path, tmp_path: Path) -> None:
    run_dir = results / "kafka-1"
    write_series(run_dir, open_loop={1})
    rows = list(csv.DictReader((run_dir / "analysis" / "summary.csv").open()))
    run_page = write_html(run_dir, context("kafka-1", "kafka", "Kafka"), rows)
    overview = write_overview(results)
    assert overview is not None

    dom = render_in_chromium(run_page, tmp_path)
    assert "<h1>Kafka — kafka-sweep</h1>" in dom
    assert NO_CHART_ERRORS in dom
    # The latency–throughput curve, the spectra of both points overlaid, then per point:
    # throughput, processing latency, send call and (point 1, open loop) send delay over
    # time, and its spectrum.
    assert drawn(dom, "chart") == 2 + 4 + 5
    assert dom.count(">99.9%</text>") == 3  # the spectra's percentile axes
    assert dom.count(">99.999%</text>") == 3
    assert dom.count(">knee</text>") == 0  # two load levels: no knee
    assert "no knee — only 2 load levels: a knee needs at least 3" in dom
    # Axis titles with units, each saying whether it starts at 0.
    assert ">receive throughput (msgs/s), from 0</text>" in dom
    assert ">processing latency (ms), log scale: not from 0</text>" in dom

    dom = render_in_chromium(overview, tmp_path)
    assert NO_CHART_ERRORS in dom
    assert drawn(dom, "overview") == 7
    assert ">Redis Streams</text>" in dom  # a legend entry


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
def test_a_page_without_plotly_js_shows_that_its_charts_failed(
    results: Path, tmp_path: Path
) -> None:
    run_dir = results / "kafka-1"
    write_series(run_dir, open_loop=set())
    rows = list(csv.DictReader((run_dir / "analysis" / "summary.csv").open()))
    page = write_html(run_dir, context("kafka-1", "kafka", "Kafka"), rows)
    page.write_text(page.read_text().replace(charts.plotly_script(), ""))
    dom = render_in_chromium(page, tmp_path)
    assert drawn(dom, "chart") == 0
    assert NO_CHART_ERRORS not in dom
    assert "a chart could not be drawn: Uncaught ReferenceError: Plotly is not defined" in dom


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
def test_a_fault_run_draws_its_faults_on_every_time_series_chart(
    results: Path, tmp_path: Path
) -> None:
    run_dir = results / "kafka-1"
    write_series(run_dir, open_loop=set())
    start = 1_700_000_000  # point 0's first window: 0 s on its charts
    faults = [
        FaultRecord(
            index=0, action="kill", selector="leader", at_s=8, until_s=11, node="n2"
        ).model_copy(
            update={"leader": True, "began_ns": (start + 2) * NS, "ended_ns": (start + 5) * NS}
        ),
        FaultRecord(index=1, action="pause", selector="1", at_s=13, node="n1").model_copy(
            update={"began_ns": (start + 7) * NS}
        ),
    ]
    write_timeline(run_dir, PointTimeline(point=0, sending_ns=(start - 6) * NS, faults=faults))
    rows = list(csv.DictReader((run_dir / "analysis" / "summary.csv").open()))
    rows[0] |= {"faults": "kill leader at 8 s until 11 s (n2); pause 1 at 13 s (n1)"}
    rows[0] |= {"send_gap_s": "3.2", "receive_gap_s": "4.0", "fault_duplicated": "7", "lost": "2"}
    page = write_html(run_dir, context("kafka-1", "kafka", "Kafka"), rows)

    dom = render_in_chromium(page, tmp_path)
    assert NO_CHART_ERRORS in dom
    # Point 0's throughput, processing and send call latency charts (closed loop: no send
    # delay); each with a band and a line per fault, the line labelled.
    for label in ("kill n2 (leader)", "pause n1 (not the leader)"):
        assert dom.count(f'data-unformatted="{label}"') == 3
    # On each chart's own time axis: the kill 2–5 s, the pause from 7 s to the end (10 s).
    bands = re.findall(r'fill-rule="evenodd" d="M([\d.]+),[\d.]+H([\d.]+)V', dom)
    lines = re.findall(r'fill-rule="evenodd" d="M([\d.]+),[\d.]+L([\d.]+),', dom)
    assert len(bands) == len(lines) == 2 * 3
    for (kill, back), (pause, end) in zip(bands[::2], bands[1::2], strict=True):
        second = (float(back) - float(kill)) / 3
        assert (float(pause) - float(kill)) / second == pytest.approx(5, abs=0.02)
        assert (float(end) - float(pause)) / second == pytest.approx(3, abs=0.02)
    assert [x for x, _ in lines] == [x for x, _ in bands]  # a line at each action
    assert "failover gap: no confirmed send for 3.2 s, no receive for 4.0 s" in dom
    assert "whole point: lost 2, unavailable –, duplicated 0, redelivered –" in dom
    assert "(at 2.0 s on the charts)" in dom and "(at 7.0 s on the charts)" in dom


def test_run_report_flags_receivers_that_did_not_keep_up(tmp_path: Path) -> None:
    slow = summary_row(0, 5, 1, 5000, 3000, 900) | {"receivers_kept_up": "False"}
    fine = summary_row(1, 1, 1, 100, 100, 5)
    page = write_html(tmp_path, context("r", "kafka", "Kafka"), [slow, fine]).read_text()
    assert page.count("<td class=warn>no</td>") == 1
    assert page.count("<td>yes</td>") == 1
    assert "<details>" in page  # the long run context is folded


def test_a_knee_the_clients_or_the_machine_set_is_labelled_so() -> None:
    from analysis.curve import curve_points, knee_text
    from analysis.summary_row import SummaryRow

    def shaped(point: int, threads: int, receive: float, p99: float, limit: str) -> SummaryRow:
        return SummaryRow(
            {**summary_row(point, threads, 1, receive, receive, p99 / 2, p99), "limited_by": limit}
        )

    rows = [
        shaped(0, 1, 1000, 10.0, "none saturated"),
        shaped(1, 2, 2000, 12.0, "shared host"),
        shaped(2, 4, 2050, 80.0, "shared host"),
    ]
    text = knee_text(curve_points(rows, []))
    assert "knee at <b>threads=2</b>" in text
    assert "Not the broker's limit — host-bound" in text
    own = [shaped(0, 1, 1000, 10.0, "none saturated"), shaped(1, 2, 2000, 12.0, "broker CPU"),
           shaped(2, 4, 2050, 80.0, "broker CPU")]  # fmt: skip
    assert "Not the broker" not in knee_text(curve_points(own, []))
