"""The two demos' reports as a newcomer reads them, rendered by headless chromium: each
point has several latency windows whose rates agree with the table's, two load levels make
no knee, the page says what a confirmed message survives, and every place numbers the
points alike.

The demos (``workload/scenarios/{postgresql,redis}-demo.toml``) run 24 s per point in
10 s windows sliding by 5 s; to keep the suite short this runs each with its shape (a
single node, threads 1 and 4, several windows per point) scaled down to 6 s per point in
windows of a second — which tile the period, so that their rates, weighted by the whole
seconds each counts, must give the table's exactly.
"""

from __future__ import annotations

import csv
import re
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from analysis.job import analyse
from analysis.report import write_html
from brokers import registry
from tests.conftest import SCENARIOS, LocalBrokers
from tests.support import run_against
from tests.test_report_render import CHROMIUM, NO_CHART_ERRORS, drawn, page_dom
from workload.model.record import load_context

pytestmark = [pytest.mark.slow, pytest.mark.spark]

#: The demo's measurement scaled down: 6 s per point, 1 s warm-up, 1 s windows (at 4 s, a
#: point of 4 threads on a busy machine had its senders all sending for 2 whole seconds only:
#: one window after the warm-up).
SHORTER = {
    "load": {"duration": "6s", "idle_timeout": "1s"},
    "measurement": {"warmup": "1s", "window": "1s", "step": "1s"},
}

#: What each demo's report says of durability (single nodes, default settings).
DURABILITY = {
    "postgresql": "single node, not replicated (replication=synchronous, "
    "synchronous_standby_names empty); fsync per commit; confirmed = committed locally",
    "redis": "single node, not replicated; fsync every second (appendfsync everysec): a "
    "confirmed message can be lost on a crash; confirmed = executed by the master, in "
    "memory (AOF not yet fsynced)",
}


@pytest.mark.skipif(CHROMIUM is None, reason="chromium is not installed (apt-get install chromium)")
@pytest.mark.parametrize(
    "system",
    [
        pytest.param("postgresql", marks=pytest.mark.postgresql),
        pytest.param("redis", marks=pytest.mark.redis),
    ],
)
def test_a_demo_report_reads_true(
    system: str, local_brokers: LocalBrokers, spark: Any, tmp_path: Path
) -> None:
    broker = local_brokers.get(registry.get(system), "single")
    run_dir = run_against(SCENARIOS / f"{system}-demo.toml", broker.endpoints, tmp_path, SHORTER)
    rows = analyse(spark, run_dir)
    with (run_dir / "analysis" / "summary.csv").open() as f:
        table = {int(r["point"]): r for r in csv.DictReader(f)}
    assert sorted(table) == [0, 1]
    assert [table[p]["threads"] for p in (0, 1)] == ["1", "4"]

    # Several windows per point, whose rates over their whole seconds are the table's.
    windows = pq.read_table(run_dir / "analysis" / "windows").to_pylist()
    for point, row in table.items():
        mine = [w for w in windows if w["point"] == point and w["rate_seconds"]]
        assert len(mine) > 1, f"point {point}: {len(mine)} window(s) with rates"
        for rate in ("send_msgs_per_s", "receive_msgs_per_s"):
            weighted = sum(w[rate] * w["rate_seconds"] for w in mine)
            mean = weighted / sum(w["rate_seconds"] for w in mine)
            assert mean == pytest.approx(float(row[rate]), rel=0.005), (point, rate)

    # The points are numbered alike in the table, the context, the .hgrm files and the page.
    assert [p.point for p in load_context(run_dir).points] == [0, 1]
    hgrm = sorted(p.name for p in (run_dir / "analysis" / "hdr").glob("*processing_latency*"))
    assert hgrm == ["point-0-processing_latency.hgrm", "point-1-processing_latency.hgrm"]

    page = write_html(run_dir, load_context(run_dir).dump(), rows)
    dom = page_dom(page, tmp_path)
    assert NO_CHART_ERRORS in dom
    assert drawn(dom, "chart") >= 2 + 2 * 3  # curve, spectra, and per point its charts
    assert re.findall(r"<h3>Point (\d+): threads=\d+</h3>", dom) == ["0", "1"]
    assert f"<b>Durability:</b> {DURABILITY[system]}" in dom
    assert dom.count(">knee</text>") == 0  # two load levels: no knee
    assert "no knee — only 2 load levels: a knee needs at least 3" in dom
    assert ">processing latency (ms), log scale: not from 0</text>" in dom
