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
    with pytest.raises(KeyError, match=r"region eu-north-9 in table .* \(it prices us-east-1, "):
        load_prices().hourly("eu-north-9", "m5.large")
    with pytest.raises(FileNotFoundError, match="1999"):
        load_prices("1999")


def test_summary_prices_a_point_by_its_receive_rate() -> None:
    from analysis.job import point_cost
    from workload.model.record import RunContext

    load = {"threads": 1, "sender_nodes": 1, "receiver_nodes": 2, "message_size": 100}
    context = {
        "broker": {"system": "kafka"},
        "points": [{"point": 0, "label": "p", "load": load}],
        "cost": {"region": "us-east-1", "instances": {"m5.large": 10}},
    }
    cost = point_cost(RunContext.of(context), 1000.0)
    # 10 × $0.096/h = $0.96/h for 3.6 million messages an hour → $0.2667 per million
    assert cost is not None and abs(cost - 0.96 / 3.6) < 1e-9
    context["cost"]["region"] = "eu-west-1"  # 10 × $0.107/h = $1.07/h → $0.2972 per million
    cost = point_cost(RunContext.of(context), 1000.0)
    assert cost is not None and abs(cost - 1.07 / 3.6) < 1e-9
    context["cost"]["region"] = "eu-north-9"  # no prices there: no figure, no failure
    assert point_cost(RunContext.of(context), 1000.0) is None


def test_the_table_shows_cost_only_for_priced_runs() -> None:
    from analysis.summary_table import text_table

    row = {"threads": 1, "send_msgs_per_s": 10.0, "cost_per_million_usd": ""}
    assert "$ per M msgs" not in text_table("Kafka", [row])
    assert "0.2667" in text_table("Kafka", [{**row, "cost_per_million_usd": 0.96 / 3.6}])


def test_the_table_counts_the_vcpus_of_every_priced_type() -> None:
    prices = load_prices()
    assert prices.vcpus_of("r5.2xlarge") == 8
    assert prices.vcpus_of("t3.medium") == 2
    assert {t for region in prices.regions.values() for t in region} <= set(prices.vcpus)
    assert "shared tenancy" in prices.source and "2025" in prices.source
    with pytest.raises(KeyError, match=r"x9\.huge"):
        prices.vcpus_of("x9.huge")


REGIONS = ["us-east-1", "us-west-2", "eu-west-1", "eu-central-1", "ap-southeast-1"]


def test_the_newest_table_prices_every_type_in_five_regions_from_one_snapshot() -> None:
    prices = load_prices()
    assert list(prices.regions) == REGIONS
    for region in REGIONS:
        assert set(prices.regions[region]) == set(prices.vcpus), region
    # Spot checks against the published list.
    assert prices.hourly("eu-west-1", "m5.large") == 0.107
    assert prices.hourly("eu-central-1", "r6i.8xlarge") == 2.432
    assert prices.hourly("ap-southeast-1", "t3.medium") == 0.0528
    assert prices.hourly("us-west-2", "c6i.8xlarge") == 1.36
    # us-east-1's figures did not change since the June 2024 table, which archived runs
    # that name it still read.
    older = load_prices("aws-on-demand-2024-06")
    assert older.regions["us-east-1"] == prices.regions["us-east-1"]
    assert list(older.regions) == ["us-east-1"]


def test_within_a_family_a_region_prices_every_vcpu_alike() -> None:
    """Sizes of m5, c5, r5 and i3 cost the same per vCPU in a region: a mistyped figure in
    the table breaks that (t3's sizes differ by memory, the 8xlarge types are one each)."""
    prices = load_prices()
    for region, table in prices.regions.items():
        for family in ("m5", "c5", "r5", "i3"):
            per_vcpu = {
                t: table[t] / prices.vcpus_of(t) for t in table if t.split(".")[0] == family
            }
            assert len(per_vcpu) >= 3, (region, family)
            first = next(iter(per_vcpu.values()))
            assert all(abs(v - first) < 1e-9 for v in per_vcpu.values()), (region, per_vcpu)
