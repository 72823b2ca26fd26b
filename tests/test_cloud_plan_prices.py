"""``brokerbench cloud plan``'s prices in every region the shipped table prices, a region or
an instance type it does not price (one line, no figure), and the table's age warning at an
injected date. Fast: the stack file and the price table only, no AWS call."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from analysis.prices import PriceTable, load_prices
from infra.settings import StackConfig, load_stack_config, stack_path
from workload.shell import cloud_plan

REGIONS = ["us-east-1", "us-west-2", "eu-west-1", "eu-central-1", "ap-southeast-1"]


def kafka_in(region: str) -> StackConfig:
    """The ``kafka`` stack (3 × r6i.8xlarge brokers, 12 × c6i.8xlarge clients, a sweep of 9
    points of 2 min) deployed in ``region``."""
    return load_stack_config(stack_path("kafka")).model_copy(update={"region": region})


@pytest.mark.parametrize("region", REGIONS)
def test_a_run_in_each_priced_region_has_a_price_and_a_sweep_cost(region: str) -> None:
    prices = load_prices()
    lines = cloud_plan.plan_report(kafka_in(region), None).lines
    hourly = 3 * prices.hourly(region, "r6i.8xlarge") + 12 * prices.hourly(region, "c6i.8xlarge")
    assert any(
        line.startswith(f"fleet: 15 machines, {hourly:.2f} USD/hour on demand in {region} ")
        for line in lines
    )
    # 9 points × (120 s + 90 s) = 31.5 min
    sweep = next(line for line in lines if line.startswith("sweep of "))
    assert f"31.5 min, {hourly * 9 * 210 / 3600:.2f} USD" in sweep
    assert not any("no price" in line for line in lines)


def test_eu_west_1_worked_by_hand() -> None:
    lines = cloud_plan.plan_report(kafka_in("eu-west-1"), None).lines
    # 3 × 2.256 + 12 × 1.4592 = 24.2784 USD/h; 31.5 min of it = 12.7462 USD
    assert any(line.startswith("fleet: 15 machines, 24.28 USD/hour on demand") for line in lines)
    assert any("31.5 min, 12.75 USD" in line for line in lines)


def test_a_region_the_table_does_not_price_is_one_line_per_role_and_no_figure() -> None:
    prices = load_prices()
    lines = cloud_plan.plan_report(kafka_in("eu-north-1"), None).lines
    unpriced = [line for line in lines if "no price:" in line]
    assert len(unpriced) == 3  # broker, sender, receiver
    assert unpriced[0].endswith(
        f"no price: no on-demand prices for region eu-north-1 in table {prices.version} "
        f"(it prices {', '.join(REGIONS)})"
    )
    assert "fleet: 15 machines, price per hour unknown" in lines
    sweep = next(line for line in lines if line.startswith("sweep of "))
    assert "31.5 min (booting" in sweep  # no cost figure, and no 0
    assert not any("worst case" in line for line in lines)


def test_a_type_missing_from_a_region_is_one_line_and_the_fleet_is_unpriced() -> None:
    prices = PriceTable(
        "t-2025-01",
        "USD",
        {"us-east-1": {"m5.large": 0.096, "c5.large": 0.085}, "eu-west-1": {"m5.large": 0.107}},
    )
    roles = [
        cloud_plan.MachineRole("broker", 3, "m5.large"),
        cloud_plan.MachineRole("sender", 2, "c5.large"),
    ]
    lines, hourly = cloud_plan.fleet_lines(roles, prices, "us-east-1")
    assert hourly == pytest.approx(3 * 0.096 + 2 * 0.085)
    lines, hourly = cloud_plan.fleet_lines(roles, prices, "eu-west-1")
    assert hourly is None
    assert lines == [
        "  broker         3 × m5.large     0.1070 USD/h each",
        "  sender         2 × c5.large     no price: no on-demand price for c5.large in "
        "eu-west-1 in table t-2025-01",
        "fleet: 5 machines, price per hour unknown",
    ]


def test_the_age_warning_fires_a_year_after_the_tables_month() -> None:
    table = PriceTable("aws-on-demand-2025-04", "USD", {})
    # published in April 2025: quiet within the year, said to be old after it
    assert cloud_plan.prices_age_line(table, datetime(2026, 3, 31, tzinfo=UTC)) is None
    line = cloud_plan.prices_age_line(table, datetime(2026, 11, 29, tzinfo=UTC))
    assert line == (
        "prices: table aws-on-demand-2025-04 is 1.7 years old: today's prices may differ "
        "(analysis/prices/ takes a newer table)"
    )
    # the shipped table's own month is read the same way
    shipped = load_prices()
    year, month = int(shipped.version[-7:-3]), int(shipped.version[-2:])
    assert cloud_plan.prices_age_line(shipped, datetime(year, month, 28, tzinfo=UTC)) is None
    assert cloud_plan.prices_age_line(shipped, datetime(year + 1, month, 28, tzinfo=UTC))
