"""Cost per million messages from the versioned on-demand price table."""

from __future__ import annotations

import pytest

from analysis.prices import PriceTable, cost_per_million, fleet_cost, load_prices


def test_newest_table_has_the_reference_instance_types() -> None:
    prices = load_prices()
    assert prices.currency == "USD"
    assert prices.hourly("us-east-1", "r5.2xlarge") == 0.504
    assert prices.hourly("us-east-1", "c5.2xlarge") == 0.34
    assert load_prices(prices.version) == prices


def test_cost_per_million_worked_by_hand() -> None:
    prices = PriceTable("t", "USD", {"r": {"big": 1.0, "small": 0.25}})
    # 3 × 1.00 + 4 × 0.25 = 4 USD per hour; half an hour = 2 USD; 4 million messages.
    assert fleet_cost(prices, "r", {"big": 3, "small": 4}, 0.5) == 2.0
    assert cost_per_million(prices, "r", {"big": 3, "small": 4}, 0.5, 4_000_000) == 0.5
    assert cost_per_million(prices, "r", {"big": 3}, 0.5, 0) is None


def test_unknown_instance_or_version_is_named() -> None:
    with pytest.raises(KeyError, match=r"x9\.huge in us-east-1"):
        load_prices().hourly("us-east-1", "x9.huge")
    with pytest.raises(FileNotFoundError, match="1999"):
        load_prices("1999")
