"""A broker node that dies without a declared fault (issue 42): the run fails and its point
is stopped early, so what was confirmed and not received is *not drained* — counted so, and
only so, in the summary, the terminal table and the console's Faults lines (it was
``unavailable`` 0 next to ``not_drained`` 8, and "whole point: lost 0, unavailable 0" left
the 8 out). At a drained point the split into lost and unavailable stands as before.
"""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

from analysis.console import run_summary
from analysis.job import fault_effects
from analysis.summary_row import SummaryRow
from workload.engine.node_records import write_node
from workload.engine.recording import WorkerRecorder
from workload.model.faults import PointTimeline, undeclared_death, write_timeline

CONTEXT = {"broker": {"title": "Redis"}}
NS = 1_000_000_000
T0 = 1_800_000_000  # the first second with a confirmed send


def died(tmp_path: Path, fails_over: bool = False) -> Path:
    """A run whose one point saw n0 die, undeclared, at 4.25 s: one sender worker confirming
    10 messages a second for 7 s (seq 0–69), one receiver getting each batch a second later
    but the last 5."""
    sender = WorkerRecorder("sender", 0, 0)
    receiver = WorkerRecorder("receiver", 0, 0)
    for s in range(7):
        now, seq = (T0 + s) * NS, 10 * s
        sender.batch_sent(now, now - 1000, now - 1000, seq, seq + 9, 1000)
        got = [q for q in range(seq, seq + 10) if q < 65]
        receiver.received_batch(
            now + NS, [0] * len(got), [0] * len(got), got, [now] * len(got), 0, [100] * len(got)
        )
    run = tmp_path / "run"
    write_node(run, "r", 0, "sender", 0, [sender])
    write_node(run, "r", 0, "receiver", 0, [receiver])
    death = undeclared_death(0, "n0", (T0 + 4) * NS + NS // 4, T0 * NS, fails_over)
    write_timeline(run, PointTimeline(point=0, sending_ns=T0 * NS, faults=[death]))
    return run


def fault_columns(run_dir: Path, accounted: dict[str, Any]) -> dict[str, Any]:
    """The analysis job's faults step at point 0 of a local run, after Spark's accounting."""
    run: Any = SimpleNamespace(location=SimpleNamespace(s3=False, local=run_dir))
    (found,) = fault_effects(run, {0: SummaryRow({"point": 0, **accounted})}).values()
    return dict(found)


def test_a_point_stopped_by_an_undeclared_death_counts_its_missing_messages_not_drained(
    tmp_path: Path,
) -> None:
    run = died(tmp_path)
    # The accounting of a point stopped early (analysis.transforms.accounting): lost 0,
    # every confirmed message not received not drained.
    columns = fault_columns(run, {"lost": 0, "not_drained": 5})
    assert columns["unavailable"] is None  # not claimed: they are not drained
    assert columns["lost"] == 0  # the accounting's 0 stands
    row = {
        "point": 0,
        "label": "single point",
        "sent": 70,
        "lost": 0,
        "not_drained": 5,
        "duplicated": 0,
        "redelivered": 0,
        "delivery": "not drained: the run failed before receivers drained the queue",
    } | columns
    text = run_summary(CONTEXT, [row])
    assert "    whole point: lost 0, unavailable –, not drained 5, duplicated 0, redelivered 0" in (
        text.splitlines()
    )
    # The table counts them the same way: a "not drained" column beside lost, holding 5.
    header = next(line for line in text.splitlines() if "lost" in line and "msgs/s" in line)
    titles = [t for t in header.split("  ") if t.strip()]
    assert [t.strip() for t in titles[-3:]] == ["lost", "not drained", "dup"]
    lines = text.splitlines()
    body = lines[lines.index(header) + 2].split("←")[0]
    assert body.split()[-3:] == ["0", "5", "0"]


def test_at_a_drained_point_missing_messages_are_lost_or_unavailable_as_before(
    tmp_path: Path,
) -> None:
    columns = fault_columns(died(tmp_path), {"lost": 5, "not_drained": 0})
    assert (columns["lost"], columns["unavailable"]) == (0, 5)  # nothing replaced n0
    row = {"point": 0, "label": "", "not_drained": 0, "duplicated": 0, "redelivered": 0}
    (line,) = [x for x in run_summary(CONTEXT, [row | columns]).splitlines() if "whole point:" in x]
    assert line == "    whole point: lost 0, unavailable 5, duplicated 0, redelivered 0"
    again = tmp_path / "again"
    again.mkdir()
    run = died(again, fails_over=True)
    columns = fault_columns(run, {"lost": 5, "not_drained": 0})
    assert (columns["lost"], columns["unavailable"]) == (5, 0)
