"""The HTML reports: the cross-system overview's charts, and both pages rendered by a real
headless browser (Debian's chromium; skipped only when the binary is absent)."""

from __future__ import annotations

import csv
import json
import shutil
import subprocess
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from analysis.job import SUMMARY_COLUMNS
from analysis.overview import load_runs, max_throughput, render, write_overview
from analysis.report import write_html

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


def summary_row(point: int, threads: int, senders: int, send: float, receive: float, p95: float):
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
        [summary_row(0, 1, 1, 1000, 990, 20), summary_row(1, 5, 2, 8000, 7900, 45)],
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
    page = render(runs)
    assert page.count("<svg") == 5  # max-throughput bars + 4 charts by load
    assert "Redis Streams @ 10: 11,000.00 msgs/s" in page  # 5 threads × 2 sender nodes
    assert "Kafka @ 1: 20.00 ms" in page
    assert 'href="redis-1/analysis/report.html"' in page


def test_same_system_twice_is_told_apart(tmp_path: Path) -> None:
    for run_id in ("a", "b"):
        write_run(tmp_path, run_id, "kafka", "Kafka", [summary_row(0, 1, 1, 10, 10, 1)])
    assert [r.name for r in load_runs(tmp_path)] == ["Kafka · a", "Kafka · b"]
    assert write_overview(tmp_path / "a") == tmp_path / "a" / "report.html"
    assert write_overview(tmp_path / "nothing") is None


def render_in_chromium(page: Path, tmp_path: Path) -> str:
    """Screenshot ``page`` and return the DOM as the browser parsed it."""
    assert CHROMIUM is not None
    common = [
        CHROMIUM,
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--no-first-run",
        f"--user-data-dir={tempfile.mkdtemp(dir=tmp_path)}",
    ]
    shot = tmp_path / f"{page.stem}.png"
    subprocess.run(
        [*common, f"--screenshot={shot}", "--window-size=1280,2000", page.as_uri()],
        capture_output=True,
        timeout=120,
        check=True,
    )
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert shot.stat().st_size > 10_000  # charts and tables drew something
    dom = subprocess.run(
        [*common, "--dump-dom", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    return dom


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
def test_reports_render_in_headless_chromium(results: Path, tmp_path: Path) -> None:
    run_dir = results / "kafka-1"
    windows = run_dir / "analysis" / "windows"
    windows.mkdir()
    pq.write_table(
        pa.table(
            {
                "point": [0, 0, 0, 1, 1, 1],
                "window_start": [10, 11, 12, 30, 31, 32],
                "send_msgs_per_s": [900.0, 1000.0, 1100.0, 7000.0, 8000.0, 9000.0],
                "receive_msgs_per_s": [880.0, 990.0, 1080.0, 6900.0, 7900.0, 8800.0],
                "processing_latency_p95": [18.0, 20.0, 22.0, 40.0, 45.0, 50.0],
                "send_latency_p95": [9.0, 10.0, 11.0, 20.0, 22.0, 25.0],
            }
        ),
        windows / "part-0.parquet",
    )
    rows = list(csv.DictReader((run_dir / "analysis" / "summary.csv").open()))
    run_page = write_html(run_dir, context("kafka-1", "kafka", "Kafka"), rows)
    overview = write_overview(results)
    assert overview is not None

    dom = render_in_chromium(run_page, tmp_path)
    assert "<h1>Kafka — kafka-sweep</h1>" in dom
    assert dom.count("<polyline") == 8  # 2 points × (2 rate + 2 latency series)

    dom = render_in_chromium(overview, tmp_path)
    assert dom.count("<svg") == 5
    assert dom.count("<rect") == 2
    assert "Redis Streams" in dom


def test_run_report_flags_receivers_that_did_not_keep_up(tmp_path: Path) -> None:
    slow = summary_row(0, 5, 1, 5000, 3000, 900) | {"receivers_kept_up": "False"}
    fine = summary_row(1, 1, 1, 100, 100, 5)
    page = write_html(tmp_path, context("r", "kafka", "Kafka"), [slow, fine]).read_text()
    assert page.count("<td class=warn>no</td>") == 1
    assert page.count("<td>yes</td>") == 1
    assert "<details>" in page  # the long run context is folded
