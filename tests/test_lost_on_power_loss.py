"""``lost_on_power_loss`` (docs/faults.md#power-loss) on synthetic records: the confirmed
messages a power cut destroyed, counted by identity against an independent count of the
same records, taken out of lost or not drained so that every confirmed message never
received is counted once; and what the tables and the durability line say of it."""

from __future__ import annotations

from typing import Any

import pytest

from analysis import transforms as tf
from analysis.power_loss import PowerLoss, cut_seconds, power_losses, split
from analysis.summary_row import SummaryRow
from analysis.summary_table import durability_line, fault_lines, text_table
from brokers.durability import Durability
from workload.model.faults import FaultRecord, PointTimeline
from workload.model.record import RunContext

NS = 1_000_000_000
CUT_S = 1_000_004  # the second the power was cut in


def record(action: str = "power-loss", began_s: float | None = CUT_S + 0.5) -> FaultRecord:
    began = int(began_s * NS) if began_s is not None else None
    return FaultRecord(
        index=0, action=action, selector="all", at_s=4.5, until_s=5.5, node="all", began_ns=began
    )


def test_the_cut_second_is_the_last_performed_power_loss_of_each_point() -> None:
    timelines = [
        PointTimeline(point=0, faults=[record()]),
        PointTimeline(point=1, faults=[record(began_s=CUT_S - 3), record(began_s=CUT_S + 2.9)]),
        PointTimeline(point=2, faults=[record("kill")]),  # no power cut
        PointTimeline(point=3, faults=[record(began_s=None)]),  # never performed
    ]
    assert cut_seconds(timelines) == {0: CUT_S, 1: CUT_S + 2}


def row(**cells: Any) -> SummaryRow:
    return SummaryRow({"broker": "redis", "point": 0, "label": "", **cells})


def test_the_cut_takes_its_messages_out_of_lost_or_not_drained() -> None:
    drained, stopped = row(lost=7, not_drained=0), row(lost=0, not_drained=7)
    assert split(drained, tf.DRAINED, 5) == PowerLoss(2, 0, 5)
    assert split(stopped, tf.STOPPED, 7) == PowerLoss(0, 0, 7)
    # Incomplete records: nothing is claimed, as for lost.
    incomplete = row(lost=None, not_drained=None)
    assert split(incomplete, tf.INCOMPLETE, None) == PowerLoss(None, None, None)


# The raw records of one power-loss point, by sender worker: (seq_lo, seq_hi, second).
RANGES = {
    (0, 0): [(0, 99, CUT_S - 2), (100, 199, CUT_S - 1), (200, 249, CUT_S), (250, 299, CUT_S + 2)],
    (0, 1): [(0, 63, CUT_S - 1), (64, 130, CUT_S)],  # across a word of 64 identities
}
#: Never received: the last ~0.5 s before the cut (and its own second), and three
#: confirmed after the node was back.
MISSING = {(0, 0): {*range(150, 250), 260, 261, 299}, (0, 1): {*range(60, 131)}}


def independent_count() -> tuple[int, int, int]:
    """(confirmed, never received, never received and confirmed by the cut's second) by
    walking every identity of the ranges above — not the code under test."""
    confirmed = missing = at_cut = 0
    for key, ranges in RANGES.items():
        for lo, hi, second in ranges:
            for seq in range(lo, hi + 1):
                confirmed += 1
                if seq in MISSING[key]:
                    missing += 1
                    at_cut += second <= CUT_S
    return confirmed, missing, at_cut


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.parametrize("state", [tf.STOPPED, tf.DRAINED])
def test_lost_on_power_loss_counts_each_missing_identity_once(spark: Any, state: str) -> None:
    from analysis.raw_tables import spark_schema
    from workload.model.results import RECEIVED_SCHEMA, SENT_RANGES_SCHEMA

    ranges = spark.createDataFrame(
        [("r", 0, n, w, lo, hi, s) for (n, w), rs in RANGES.items() for lo, hi, s in rs]
        + [("r", 1, 0, 0, 0, 9, CUT_S)],  # a point without a cut: not counted
        spark_schema(SENT_RANGES_SCHEMA),
    )
    got = [
        ("r", 0, n, w, seq, CUT_S + 9, 1, None, 100)
        for (n, w), rs in RANGES.items()
        for lo, hi, _ in rs
        for seq in range(lo, hi + 1)
        if seq not in MISSING[n, w]
    ]
    got += [("r", 0, 0, 0, 5, CUT_S + 9, 1, None, 100)]  # a duplicate changes nothing
    received = spark.createDataFrame(got, spark_schema(RECEIVED_SCHEMA)).repartition(3)
    states = spark.createDataFrame([("r", 0, state)], "run_id string, point int, state string")
    (accounted,) = tf.accounting(tf.delivery(ranges, received), states).collect()
    before = row(lost=accounted["lost"], not_drained=accounted["not_drained"])
    found = power_losses(
        spark,
        (ranges, received),
        [PointTimeline(point=0, faults=[record()])],
        {0: state, 1: tf.DRAINED},
        {0: before, 1: row(point=1, lost=0, not_drained=0)},
    )
    confirmed, missing, at_cut = independent_count()
    assert accounted["confirmed"] == confirmed and (missing, at_cut) == (174, 171)
    (figures,) = found.values()
    assert figures.lost_on_power_loss == at_cut
    assert figures.lost + figures.not_drained + figures.lost_on_power_loss == missing
    # What the cut did not lose (confirmed two seconds after it) stays what it was.
    if state == tf.DRAINED:
        assert (figures.lost, figures.not_drained) == (missing - at_cut, 0)
    else:
        assert (figures.lost, figures.not_drained) == (0, missing - at_cut)


DURABILITY = Durability(
    False,
    "single node, not replicated",
    False,
    "fsync every second: a confirmed message can be lost on a crash",
    "appended to the AOF",
)


def context(node: str | int = "all") -> RunContext:
    return RunContext.of(
        {
            "broker": {"system": "redis", "durability": DURABILITY.record()},
            "scenario": {"faults": [{"at": 4.5, "action": "power-loss", "node": node}]},
        }
    )


def test_the_durability_line_says_what_the_power_cut_measured() -> None:
    rows = [row(sent=18_523, lost=0, lost_on_power_loss=1_103)]
    assert durability_line(context(), rows) == (
        "claimed: single node, not replicated; fsync every second: a confirmed message can "
        "be lost on a crash; confirmed = appended to the AOF — measured: 1,103 of 18,523 "
        "confirmed messages lost on a power cut of every node"
    )
    two = [*rows, row(point=1, sent=1_000, lost_on_power_loss=0)]
    assert durability_line(context(0), two).endswith(
        "measured: 1,103 of 19,523 confirmed messages lost on 2 power cuts of node 0"
    )
    # Without a power cut the line is the claim alone, as before.
    assert durability_line(context(), [row(sent=10, lost=0)]) == DURABILITY.line


def test_the_table_and_the_faults_block_show_it_where_a_point_had_a_cut() -> None:
    cut = row(
        sent=18_523, received=17_420, lost=0, duplicated=0, lost_on_power_loss=1_103,
        faults="power-loss all at 4.5 s until 5.5 s (all)", delivery="drained",
    )  # fmt: skip
    table = text_table("Redis", [cut], durability_line(context(), [cut]))
    assert "lost (power cut)" in table.splitlines()[2] and "1,103" in table
    assert "— measured: 1,103 of 18,523" in table.splitlines()[1]
    assert "lost on power loss 1,103" in fault_lines(cut)[-1]
    plain = row(sent=10, received=10, lost=0, duplicated=0, delivery="drained")
    assert "power cut" not in text_table("Redis", [plain])
