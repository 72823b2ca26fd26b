"""The power-loss table of docs/durability.md (tests/benchmarks/durability_doc.py) on made-up
results: each run's loss, the send rate, and whether claim and measurement agree — said
plainly where they do not. No server is started."""

from __future__ import annotations

from typing import Any

from tests.benchmarks import durability_doc


def run(lost: int | None, confirmed: int = 1_000, rate: float = 500.0, **more: Any) -> dict:
    return {
        "confirmed": confirmed,
        "lost_on_power_loss": lost,
        "send_msgs_per_s": rate,
        **more,
    }


def entry(fsync_per_message: bool, *runs: dict, scenario: str = "x-power-loss") -> dict:
    return {
        "scenario": scenario,
        "system": "X",
        "setting": "a setting",
        "fsync": "fsync per write" if fsync_per_message else "fsync every second",
        "fsync_per_message": fsync_per_message,
        "date": "2026-11-29",
        "commit": "abcdef0",
        "dirty": False,
        "runs": list(runs),
    }


def test_a_loss_where_an_fsync_is_claimed_is_said_to_disagree() -> None:
    said = durability_doc.verdict(entry(True, run(0), run(12)))
    assert said.startswith("**disagree**") and "lost 12" in said
    assert durability_doc.verdict(entry(True, run(0), run(0))).startswith("agree")


def test_without_an_fsync_claimed_some_all_or_no_loss_is_told_apart() -> None:
    assert "lost some" in durability_doc.verdict(entry(False, run(3), run(0)))
    assert "lost every confirmed message" in durability_doc.verdict(
        entry(False, run(1_000), run(900, confirmed=900))
    )
    assert durability_doc.verdict(entry(False, run(0))).startswith("no loss measured")


def test_each_run_is_shown_with_a_lower_bound_and_a_failed_run_says_why() -> None:
    shown = durability_doc.losses(
        entry(
            False,
            run(1_103, confirmed=18_523),
            run(7, written_through_bytes=4096),
            run(None, error="exit 1"),
        )
    )
    assert shown == "1,103 of 18,523; ≥ 7 of 1,000; no figure (exit 1)"
    rates = entry(False, run(1, rate=400), run(1, rate=600), run(1, rate=500))
    assert durability_doc.send_rate(rates) == "500 (400–600)"


def test_a_scenario_measured_again_replaces_its_entry_and_the_page_renders() -> None:
    old = {"format": 1, "scenarios": [entry(False, run(5)), entry(True, run(0), scenario="y")]}
    merged = durability_doc.merge(old, [entry(False, run(9))])
    assert [e["scenario"] for e in merged["scenarios"]] == ["x-power-loss", "y"]
    assert merged["scenarios"][0]["runs"][0]["lost_on_power_loss"] == 9
    page = f"head\n{durability_doc.BEGIN}\nold\n{durability_doc.END}\ntail\n"
    updated = durability_doc.update_page(page, merged)
    assert updated.startswith("head\n") and updated.endswith("tail\n")
    assert "| X | a setting (`x-power-loss`) | 500 | fsync every second | 9 of 1,000 |" in updated
