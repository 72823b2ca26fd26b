"""The report charts (analysis/charts.py): the knee rule, the percentile spectrum's
arithmetic, and what each figure holds — traces, axis types, ticks."""

from __future__ import annotations

import subprocess
import sys

import pytest

from analysis import charts, point_charts
from analysis.charts import spectrum
from analysis.context_tables import where_it_ran
from analysis.curve import CurvePoint, Level, curve_points, knee, levels, no_knee, offered_load
from analysis.hdr import Bucket
from analysis.point_charts import Window
from analysis.summary_table import SCOPES, html_columns
from workload.model.record import PointEntry, PointLoad
from workload.model.sections import LoadSection


def curve(*steps: tuple[float, float | None]) -> list[Level]:
    """Levels at loads 1, 2, … from (receive msgs/s, p99 ms)."""
    return [
        Level(float(i + 1), (f"l{i}",), rate, {"p50": None, "p99": p99, "p999": None})
        for i, (rate, p99) in enumerate(steps)
    ]


def point(label: str, load: float, rate: float | None, p99: float | None, **kw) -> CurvePoint:
    latency = {"p50": p99 / 2 if p99 else None, "p99": p99, "p999": p99 * 2 if p99 else None}
    return CurvePoint(label, load, rate, latency, **kw)


# The knee rule.


def test_closed_loop_knee_is_where_throughput_stops_growing_by_ten_percent() -> None:
    # 1 → 4 → 8 senders: +300 %, then +5 % (more senders only queue).
    assert knee(curve((1000, 1.0), (4000, 1.2), (4200, 5.0), (4300, 20.0))) == 1


def test_open_loop_knee_is_where_latency_grows_faster_than_throughput() -> None:
    # The open-loop Redis run of the development machine: 4× the throughput for 2.05× the
    # p99 still pays; +50 % for 213× the p99 does not.
    steps = curve((1000, 9.6), (4000, 9.6), (16000, 19.7), (24000, 4199.0))
    assert knee(steps) == 2


def test_a_step_may_double_the_p99_but_not_more_unless_throughput_grew_more() -> None:
    assert knee(curve((1000, 1.0), (1200, 1.99), (1500, 2.0))) is None  # < 2× each
    assert knee(curve((500, 0.8), (1000, 1.0), (1200, 2.0))) == 1  # +20 % for 2×: no
    assert knee(curve((500, 0.8), (1000, 1.0), (3000, 2.9))) is None  # 3× for 2.9×: yes
    assert knee(curve((500, 0.8), (1000, 1.0), (3000, 3.0))) == 1  # 3× for 3×: no


def test_no_knee_when_every_step_pays_or_there_is_no_curve() -> None:
    steps = curve((1000, 1.0), (2000, 1.1), (4000, 1.3))
    assert knee(steps) is None and "did not reach saturation" in no_knee(steps)
    assert knee(curve((1000, 1.0))) is None
    assert knee([]) is None


def test_no_knee_from_two_levels_or_from_a_first_step_that_did_not_pay() -> None:
    # The PostgreSQL demo: two levels, throughput +1.9 % and p99 falling.
    two = curve((10200, 110.0), (10394, 58.0))
    assert knee(two) is None and no_knee(two).startswith("only 2 load levels")
    flat = curve((10200, 110.0), (10394, 58.0), (10400, 60.0))
    assert knee(flat) is None and no_knee(flat).startswith("the first step already did not pay")


def test_levels_without_a_p99_are_skipped_by_the_knee_rule() -> None:
    # Level 2 has no p99: the step is 1 → 3 (+10 % exactly, 3× the p99: no).
    assert knee(curve((500, 0.8), (1000, 1.0), (5000, None), (1100, 3.0))) == 1
    assert knee(curve((1000, None), (1000, 0.8), (2000, 1.0), (2050, 1.0))) == 2


def test_a_first_level_without_throughput_does_not_hide_the_next() -> None:
    assert knee(curve((0.0, 1.0), (1000, 1.5), (1010, 1.5))) == 1


def test_levels_order_by_load_merge_repeats_at_their_median_and_split_series() -> None:
    points = [
        point("t=4", 4, 4000, 2.0),
        point("t=1", 1, 1000, 1.0),
        point("t=4", 4, 5000, 4.0),
        point("t=4", 4, 4500, 9.0),
        point("t=2 none received", 2, None, None),
        point("t=1", 1, 800, 1.0, series="message_size=1000"),
    ]
    found = levels(points)
    assert list(found) == ["", "message_size=1000"]
    main = found[""]
    assert [level.load for level in main] == [1, 4]
    assert main[1].labels == ("t=4",)
    assert main[1].receive_msgs_per_s == 4500 and main[1].p99 == 4.0
    assert found["message_size=1000"][0].receive_msgs_per_s == 800


# The percentile spectrum.


def test_spectrum_places_each_bucket_at_its_cumulative_fraction() -> None:
    buckets = [
        Bucket(30, 9, 5.0),
        Bucket(10, 50, 1.0),
        Bucket(25, 0, 3.0),  # empty: not a step
        Bucket(40, 1, 9.0),
        Bucket(20, 40, 2.0),
    ]
    s = spectrum(buckets)
    # 100 samples: 50 at 1 ms (50 %), 40 at 2 ms (90 %), 9 at 5 ms (99 %), 1 at 9 ms (100 %).
    assert s.count == 100
    assert s.percent == [0.0, 50.0, 90.0, 99.0, 100.0]
    assert s.x == [1.0, 2.0, 10.0, 100.0, charts.SPECTRUM_CAP]  # 1/(1-p); 100 % at the cap
    assert s.value_ms == [1.0, 1.0, 2.0, 5.0, 9.0]  # starts with the minimum at 0 %


def test_spectrum_caps_the_tail_at_99_999_percent() -> None:
    # 10⁶ samples: 99.9 % at 1 ms (x = 1000), 99.9999 % at 2 ms (x = 10⁶ → the cap), the
    # max at 3 ms (the cap): the line ends at the right edge with a rise to the max.
    s = spectrum([Bucket(1, 999_000, 1.0), Bucket(2, 999, 2.0), Bucket(3, 1, 3.0)])
    assert s.x[1] == pytest.approx(1000)
    assert s.x[2:] == [charts.SPECTRUM_CAP, charts.SPECTRUM_CAP]
    assert s.percent[2] == pytest.approx(99.9999)
    assert s.value_ms[-1] == 3.0


def test_spectrum_of_negative_latencies_and_of_nothing() -> None:
    s = spectrum([Bucket(-1, 1, 0.0), Bucket(100, 3, 0.5)])
    assert s.value_ms == [0.0, 0.0, 0.5] and s.x == [1.0, 4 / 3, charts.SPECTRUM_CAP]
    assert spectrum([]).count == 0 and spectrum([Bucket(1, 0, 1.0)]).x == []


# The figures.


def test_latency_throughput_curve_has_a_line_per_quantile_and_marks_the_knee() -> None:
    points = [
        point("threads=1", 1000, 1000, 9.6),
        point("threads=4", 4000, 4000, 9.6),
        point("threads=16", 16000, 16000, 19.7),
        point("threads=48", 48000, 24000, 4199.0),
    ]
    fig = charts.latency_throughput(points)
    assert [t.name for t in fig.data] == ["p50", "p99", "p99.9", "knee"]
    assert fig.layout.yaxis.type == "log"
    assert fig.layout.xaxis.type == "log"  # 1,000 to 24,000 msgs/s
    p99 = fig.data[1]
    assert list(p99.x) == [1000, 4000, 16000, 24000] and list(p99.y) == [9.6, 9.6, 19.7, 4199.0]
    assert list(p99.customdata) == ["threads=1", "threads=4", "threads=16", "threads=48"]
    star = fig.data[3]
    assert (list(star.x), list(star.y)) == ([16000], [19.7])
    assert star.marker.symbol == "star"
    # Neither log axis starts at 0, and each says so.
    assert fig.layout.yaxis.title.text == "processing latency (ms), log scale: not from 0"
    assert fig.layout.xaxis.title.text == "receive throughput (msgs/s), log scale: not from 0"


def test_curve_of_several_runs_is_a_line_per_run_with_one_knee_legend() -> None:
    points = [
        point("a0", 0.5, 500, 0.8, series="Kafka"),
        point("a1", 1, 1000, 1.0, series="Kafka"),
        point("a2", 2, 1050, 5.0, series="Kafka"),
        point("b0", 0.5, 1000, 0.8, series="Redis"),
        point("b1", 1, 2000, 1.0, series="Redis"),
        point("b2", 2, 2100, 9.0, series="Redis"),
    ]
    fig = charts.latency_throughput(points, quantiles=("p99",))
    assert [t.name for t in fig.data] == ["Kafka", "knee", "Redis", "knee"]
    assert [t.showlegend for t in fig.data if t.name == "knee"] == [True, False]
    assert fig.layout.xaxis.type == "linear"  # 500 to 2,100: from 0, and said so
    assert fig.layout.xaxis.rangemode == "tozero"
    assert fig.layout.xaxis.title.text == "receive throughput (msgs/s), from 0"


def test_window_charts_have_rates_and_five_percentiles_on_log_axes() -> None:
    windows = [
        Window(
            5.0 + i,
            5.0,
            1000.0 + i,
            990.0 + i,
            {
                "processing_latency": {"p50": 1.0, "p95": 2.0, "p99": 5.0, "p999": 9.0, "max": 50},
                "send_latency": {"p50": 0.1, "p95": 0.2, "p99": None, "p999": None, "max": 0.9},
                "send_delay": {q: None for q in ("p50", "p95", "p99", "p999", "max")},
            },
        )
        for i in range(3)
    ]
    rates = point_charts.throughput_over_time(windows)
    assert [t.name for t in rates.data] == ["send msgs/s", "receive msgs/s"]
    assert list(rates.data[0].x) == [5.0, 6.0, 7.0] and rates.layout.yaxis.type == "linear"
    assert rates.data[0].customdata[0] == "window 0–5 s"
    processing = point_charts.latency_over_time(windows, "processing_latency", "p")
    assert processing is not None
    assert [t.name for t in processing.data] == ["p50", "p95", "p99", "p99.9", "max"]
    assert processing.layout.yaxis.type == "log"
    assert processing.layout.xaxis.title.text.startswith("time since the start")
    send = point_charts.latency_over_time(windows, "send_latency", "s")
    assert send is not None and list(send.data[2].y) == [None, None, None]  # gaps, not zeros
    assert point_charts.latency_over_time(windows, "send_delay", "d") is None  # closed loop


def test_faults_are_bands_from_the_action_to_the_return_with_a_labelled_line() -> None:
    windows = [
        Window(5.0 + i, 5.0, 1000.0, 990.0, {"processing_latency": {"p50": 1.0, "max": 9.0}})
        for i in range(10)
    ]  # the chart ends at 14 s
    marks = [
        point_charts.FaultMark("kill n1 (not the leader)", 3.5, 8.0),
        point_charts.FaultMark("kill n2 (leader)", 11.25, None),
    ]
    for fig in (
        point_charts.throughput_over_time(windows, "t", marks),
        point_charts.latency_over_time(windows, "processing_latency", "p", marks),
    ):
        assert fig is not None
        bands = [s for s in fig.layout.shapes if s.type == "rect"]
        lines = [s for s in fig.layout.shapes if s.type == "line"]
        assert [(b.x0, b.x1) for b in bands] == [(3.5, 8.0), (11.25, 14.0)]  # to the end
        assert [(line.x0, line.x1) for line in lines] == [(3.5, 3.5), (11.25, 11.25)]
        assert {(s.xref, s.yref, s.y0, s.y1) for s in fig.layout.shapes} == {("x", "paper", 0, 1)}
        assert [(a.text, a.x) for a in fig.layout.annotations] == [
            ("kill n1 (not the leader)", 3.5),
            ("kill n2 (leader)", 11.25),
        ]
        assert fig.layout.annotations[1].hovertext == "kill n2 (leader) at 11.2 s, not back"
    assert not point_charts.throughput_over_time(windows).layout.shapes  # no faults, no marks


def test_spectrum_chart_has_percentile_ticks_and_a_line_per_histogram() -> None:
    fig = charts.spectrum_chart(
        {
            "Processing latency": [Bucket(10, 99, 1.0), Bucket(20, 1, 30.0)],
            "Send delay": [],
        },
        "spectrum",
    )
    assert fig is not None
    assert [t.name for t in fig.data] == ["Processing latency"]  # the empty one is left out
    assert fig.layout.xaxis.type == "log" and fig.layout.yaxis.type == "log"
    assert list(fig.layout.xaxis.ticktext) == ["0%", "90%", "99%", "99.9%", "99.99%", "99.999%"]
    assert list(fig.layout.xaxis.tickvals) == [1, 10, 100, 1e3, 1e4, 1e5]
    assert fig.data[0].line.shape == "vh"  # a bucket's value holds up to its percentile
    assert list(fig.data[0].customdata) == ["0% (min)", "99.0%", "100% (max)"]
    assert charts.spectrum_chart({"x": []}, "nothing") is None


def test_log_axes_are_labelled_with_whole_values() -> None:
    narrow = point_charts.latency_over_time(
        [Window(1.0, 1.0, 1.0, 1.0, {"m": {"p50": 0.3, "max": 4.0}})], "m", "t"
    )
    assert narrow is not None
    assert list(narrow.layout.yaxis.ticktext) == ["0.2", "0.5", "1", "2", "5"]
    wide = point_charts.latency_over_time(
        [Window(1.0, 1.0, 1.0, 1.0, {"m": {"p50": 0.3, "max": 400.0}})], "m", "t"
    )
    assert wide is not None and wide.layout.yaxis.dtick == 1  # a label per power of ten


def test_axis_type_is_log_only_for_positive_values_spanning_orders_of_magnitude() -> None:
    assert charts.axis_type([1, 10]) == "linear"
    assert charts.axis_type([1, 100, None]) == "log"
    assert charts.axis_type([0, 100]) == "linear"
    assert charts.axis_type([]) == "linear"


def test_bars_and_by_load_lines() -> None:
    bars = charts.bar_chart({"Kafka": 7900.0, "Redis": 11000.0}, "max", "msgs/s")
    assert list(bars.data[0].y) == ["Kafka", "Redis"] and list(bars.data[0].x) == [7900, 11000]
    assert list(bars.data[0].text) == ["7,900 msgs/s", "11,000 msgs/s"]
    lines = charts.by_load({"Kafka": [(10, 45.0), (1, 20.0)]}, "p95", "threads", "ms", log_y=True)
    assert list(lines.data[0].x) == [1, 10] and lines.layout.yaxis.type == "log"
    assert list(lines.layout.xaxis.tickvals) == [1, 10]


def test_figures_embed_without_plotly_js_which_a_page_carries_once() -> None:
    div = charts.embed(charts.bar_chart({"a": 1.0}, "t", "u"), "chart-7")
    assert 'id="chart-7"' in div and "Plotly.newPlot" in div
    assert len(div) < 100_000  # no plotly.js in it
    script = charts.plotly_script()
    assert script.startswith("<script") and len(script) > 1_000_000
    assert "https://" not in div


# What the report feeds the charts.


def test_offered_load_orders_open_loop_by_rate_and_closed_loop_by_batches_in_flight() -> None:
    assert offered_load(LoadSection(threads=4, sender_nodes=2, rate=1000)) == 8000
    assert offered_load(LoadSection(threads=4, sender_nodes=2, max_in_flight=8)) == 64
    assert offered_load(PointLoad.model_validate({"threads": "5", "sender_nodes": "1"})) == 5


def test_curve_points_take_the_load_from_the_context_and_other_swept_values_as_series() -> None:
    rows = [
        {
            "point": "0",
            "label": "a",
            "receive_msgs_per_s": "100",
            "processing_latency_run_p99_ms": "2",
        },
        {"point": "1", "label": "b", "receive_msgs_per_s": "", "threads": "3", "sender_nodes": "1"},
    ]
    point = {
        "point": 0,
        "label": "a",
        "varied": {"threads": 2, "message_size": 1000},
        "load": {"threads": 2, "sender_nodes": 1, "rate": 500},
    }
    a, b = curve_points(rows, [PointEntry.model_validate(point)], series="Kafka")
    assert (a.load, a.receive_msgs_per_s, a.latency_ms["p99"]) == (1000, 100.0, 2.0)
    assert a.series == "Kafka · message_size=1000"
    assert (b.load, b.receive_msgs_per_s, b.series) == (3, None, "Kafka")


def test_the_html_table_adds_whole_run_processing_percentiles_around_p99() -> None:
    titles = [title for _, title, _ in html_columns([{"point": "0"}])]
    at = titles.index("proc p99 ms [run]")
    assert titles[at - 1 : at + 3] == [
        "proc p50 ms [run]",
        "proc p99 ms [run]",
        "proc p99.9 ms [run]",
        "proc max ms [run]",
    ]


def test_where_it_ran_tells_a_local_host_from_an_aws_fleet() -> None:
    local = {
        "host": {"hostname": "vm", "cpus": 2, "memory_bytes": 8 * 2**30, "machine_type": "local"},
        "broker": {"deployment": "local"},
    }
    assert where_it_ran(local) == (
        "local run on vm, 2 cores, 8 GiB memory; the broker and every client node ran on "
        "this one host"
    )
    aws = {
        "host": {"hostname": "ip-10-0-0-5", "cpus": 8, "machine_type": "c7i.2xlarge"},
        "broker": {"deployment": "endpoints", "endpoints": ["10.0.0.9:9092"]},
        "cost": {"region": "eu-west-1", "instances": {"m7i.xlarge": 3, "c7i.2xlarge": 2}},
    }
    assert where_it_ran(aws) == (
        "AWS fleet in eu-west-1: 2 × c7i.2xlarge, 3 × m7i.xlarge; client machines c7i.2xlarge"
    )
    assert where_it_ran({}).startswith("not recorded")


def test_without_plotly_the_table_works_and_a_chart_names_the_extra_to_install() -> None:
    code = (
        "import sys; sys.modules['plotly'] = None\n"
        "from analysis.summary_table import text_table\n"
        "print(text_table('Redis', [{'point': '0', 'threads': '1'}]).splitlines()[0])\n"
        "from analysis import charts\n"
        "from workload.model.errors import UserError\n"
        "try:\n"
        "    charts.bar_chart({'a': 1.0}, 't', 'u')\n"
        "except UserError as exc:\n"
        "    print(exc)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert done.stdout.splitlines() == [
        f"Redis  ({SCOPES})",
        "the reports' charts need plotly, which is not installed: "
        "pip install 'brokerbench[analysis]'",
    ]
