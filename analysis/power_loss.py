"""Confirmed messages a power cut destroyed: ``lost_on_power_loss`` (docs/faults.md#power-loss).

At a point with a ``power-loss`` fault that was performed (its record has ``began_ns``), a
confirmed message that was never received is *lost on power loss* when its send was
confirmed at or before the cut: the ``second`` of its ``sent_ranges`` row — the wall-clock
second the range was confirmed in — is at most the second of the cut's ``began_ns`` (of the
point's last cut, where it had several). Ranges are recorded per whole second, so the cut's
own second counts toward the cut: a message confirmed in it after the cut was confirmed by
a node whose disk could no longer make it durable (the cut comes before the SIGKILL), so
the cut lost it too. A confirmed message never received whose send was confirmed in a
later second — after the node came back, since every node it cut is down until ``until``
(at least a second later in the shipped scenarios) — is not the cut's doing: it is *lost*
at a point the receivers drained, *not drained* at one the run stopped early, as at any
point.

A power-loss point's drain cannot empty the queue when the cut lost messages (the
engine's count of what is queued is confirmed − received), so its drain limit stops it
and, without this step, its missing messages would all be *not drained*. Every confirmed
message never received is counted exactly once: as lost on power loss, lost, or not
drained (unavailable, the fault step's split of lost, follows). Where a point's records are
incomplete nothing is claimed (empty), as for lost; at a point without a power-loss fault
the column is empty.

The identities are matched as the accounting step matches them
(:func:`analysis.transforms.delivery`), over the ranges confirmed by the cut only.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from analysis import transforms as tf
from analysis.summary_row import Figures, SummaryRow
from workload.model.faults import PointTimeline

NS = 1_000_000_000
#: The fault action whose cut this step counts.
POWER_LOSS = "power-loss"


@dataclass(frozen=True, eq=False)
class PowerLoss(Figures):
    """A power-loss point's confirmed messages never received, split (None: not known)."""

    lost: int | None
    not_drained: int | None
    lost_on_power_loss: int | None


def cut_seconds(timelines: Iterable[PointTimeline]) -> dict[int, int]:
    """Per point with a performed power-loss fault: the wall-clock second of its last cut."""
    found = {}
    for timeline in timelines:
        began = [
            f.began_ns // NS
            for f in timeline.faults
            if f.action == POWER_LOSS and f.began_ns is not None
        ]
        if began:
            found[timeline.point] = max(began)
    return found


def missing_by_cut(
    spark: SparkSession, sent_ranges: DataFrame, received: DataFrame, cuts: Mapping[int, int]
) -> dict[int, int]:
    """Per point of ``cuts``: the confirmed messages whose range was confirmed at or before
    the point's cut second and that were never received."""
    if not cuts:
        return {}
    frame = spark.createDataFrame(sorted(cuts.items()), "point int, cut_second long")
    ranges = sent_ranges.join(F.broadcast(frame), on="point").where(
        F.col("second") <= F.col("cut_second")
    )
    mine = received.where(F.col("point").isin(list(cuts)))
    counts = tf.delivery(ranges.drop("cut_second"), mine)
    return {row["point"]: int(row["lost"]) for row in counts.select("point", "lost").collect()}


def split(row: SummaryRow, state: str, at_cut: int | None) -> PowerLoss:
    """One power-loss point's lost, not drained and lost on power loss, from its
    accounting (``row``: lost where the receivers drained it, not drained where the run
    stopped it early) and the messages the cut lost (``at_cut``; None: not counted)."""
    if state not in (tf.DRAINED, tf.STOPPED) or at_cut is None:
        return PowerLoss(row.lost, row.not_drained, None)
    if state == tf.DRAINED:
        return PowerLoss(int(row.lost) - at_cut, row.not_drained, at_cut)
    return PowerLoss(row.lost, int(row.not_drained) - at_cut, at_cut)


def power_losses(
    spark: SparkSession,
    frames: tuple[DataFrame, DataFrame],
    timelines: Iterable[PointTimeline],
    states: Mapping[int, str],
    rows: Mapping[int, SummaryRow],
) -> dict[int, PowerLoss]:
    """Per point with a performed power-loss fault: its columns (see the module), from the
    delivery tables (``frames``: sent ranges, received), its fault timeline, how its
    records stand and its row so far (the accounting step's lost and not drained)."""
    cuts = {p: s for p, s in cut_seconds(timelines).items() if p in rows}
    whole = {p: s for p, s in cuts.items() if states.get(p) in (tf.DRAINED, tf.STOPPED)}
    counted = missing_by_cut(spark, *frames, whole)
    return {
        p: split(rows[p], states.get(p, tf.NOT_RUN), counted.get(p, 0) if p in whole else None)
        for p in cuts
    }
