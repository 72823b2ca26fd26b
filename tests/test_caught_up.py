"""The coordinator's early end of a clean point (workload.engine.caught_up): only once every
confirmed message is counted received and the counts held still; never at a point with a
fault, a death or an error, nor while a count is off by a duplicate or a missing message."""

from __future__ import annotations

from workload.engine.caught_up import QUIET_S, CaughtUp


def settle(watch: CaughtUp, **counts: int | bool) -> list[bool]:
    """What ``check`` says at 0, 1, …, 5 s with the same totals."""
    values: dict = {"senders_done": True, "clean": True, "redelivered": 0, "errors": 0}
    values.update(counts)
    return [watch.check(float(t), **values) for t in range(6)]


def test_a_clean_point_ends_once_its_counts_held_still() -> None:
    said = settle(CaughtUp.for_idle_timeout(60), sent=100, received=100)
    assert said == [False, False, True, True, True, True]  # QUIET_S = 2 s after the totals
    assert QUIET_S == 2.0
    # A redelivered message is received twice, and counted once.
    assert settle(CaughtUp(2), sent=100, received=103, redelivered=3)[2]
    # An idle timeout shorter than the quiet period is the quiet period.
    assert CaughtUp.for_idle_timeout(1).quiet_s == 1


def test_counts_that_do_not_settle_it_wait_for_the_idle_timeout() -> None:
    for counts in (
        {"sent": 100, "received": 99},  # one missing
        {"sent": 100, "received": 101},  # a duplicate the system did not flag
        {"sent": 0, "received": 0},  # nothing confirmed
        {"sent": 100, "received": 100, "errors": 1},
        {"sent": 100, "received": 100, "clean": False},  # a fault or a death
        {"sent": 100, "received": 100, "senders_done": False},
    ):
        assert not any(settle(CaughtUp(2), **counts)), counts


def test_the_quiet_period_starts_again_when_a_count_moves() -> None:
    watch = CaughtUp(2)
    common = {"senders_done": True, "clean": True, "redelivered": 0, "errors": 0}
    assert not watch.check(0.0, sent=10, received=10, **common)
    assert not watch.check(1.5, sent=10, received=10, **common)
    assert not watch.check(1.9, sent=11, received=11, **common)  # more came: again
    assert not watch.check(3.0, sent=11, received=11, **common)
    assert watch.check(3.9, sent=11, received=11, **common)
    assert not watch.check(4.0, sent=11, received=10, **common)  # never mind a stale view


def test_the_quiet_period_may_begin_before_the_senders_are_done() -> None:
    watch = CaughtUp(2)
    common = {"clean": True, "redelivered": 0, "errors": 0, "sent": 50, "received": 50}
    assert not watch.check(0.0, senders_done=False, **common)
    assert not watch.check(2.5, senders_done=False, **common)  # the senders still run
    assert watch.check(3.0, senders_done=True, **common)  # held still since 0 s
    # A sender's last count moves the totals: the quiet period starts again.
    watch = CaughtUp(2)
    assert not watch.check(0.0, senders_done=False, **common)
    assert not watch.check(2.5, senders_done=True, **{**common, "sent": 51})
    assert not watch.check(3.0, senders_done=True, **{**common, "sent": 51, "received": 51})
    assert watch.check(5.0, senders_done=True, **{**common, "sent": 51, "received": 51})
