"""What ``pulumi up`` refuses before it declares anything, under Pulumi's mocks: a sweep
longer than the machines' time to live, a fleet whose worst case is above the stack's cost
cap, and instance types the chosen availability zone does not offer."""

from __future__ import annotations

from pathlib import Path

import pytest

from analysis.prices import load_prices
from infra import checks
from infra.mocking import ZONES, deploy
from infra.program import build
from infra.settings import StackConfigError
from infra.source import SourceState
from tests.test_infra_source import COMMIT, entry_point
from tests.test_infra_stacks import REGION, deployable, no_packed_python, with_recipes

pytestmark = pytest.mark.filterwarnings(
    "ignore:.*has been deprecated in favor of:DeprecationWarning"  # pulumi_aws's own aliases
)
__all__ = ["no_packed_python"]  # the fixture, autouse here too
CLEAN = SourceState(COMMIT, False, 1_700_000_000)


@pytest.fixture
def wheel(tmp_path: Path) -> Path:
    path = tmp_path / "brokerbench-0.1.0-py3-none-any.whl"
    path.write_bytes(b"PK\x05\x06" + b"\0" * 18)
    return path


def test_up_refuses_a_sweep_longer_than_the_ttl(
    tmp_path: Path, wheel: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    soak = tmp_path / "postgresql-soak.toml"
    soak.write_text(
        'name = "postgresql-soak"\n\n[broker]\nsystem = "postgresql"\n'
        'topology = "cluster"\n\n[load]\nduration = "6h"\n'
    )
    with pytest.raises(StackConfigError) as refused:
        entry_point(
            monkeypatch, wheel, CLEAN,
            **{"brokerbench:scenario": str(soak), "brokerbench:ttlHours": "1"},
        )  # fmt: skip
    assert refused.value.lines == [
        "brokerbench:ttlHours 1: the sweep of postgresql-soak takes about 6.0 h, so the "
        "machines would stop themselves before it ends: pulumi config set brokerbench:ttlHours 7"
    ]


def test_up_holds_the_stacks_cost_cap(wheel: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    prices = load_prices()
    hourly = 3 * prices.hourly("us-east-1", "r6i.8xlarge") + 12 * prices.hourly(
        "us-east-1", "c6i.8xlarge"
    )
    with pytest.raises(StackConfigError) as refused:
        entry_point(monkeypatch, wheel, CLEAN, **{"brokerbench:maxUsd": "100"})
    assert refused.value.lines == [
        f"cost cap 100 USD: the machines may cost up to {hourly * 12:.2f} USD ({hourly:.2f} "
        "USD/h × brokerbench:ttlHours 12) before they stop themselves: lower "
        "brokerbench:ttlHours to 4 or raise the cap"
    ]
    # within the cap (a shorter ttl bounds the machines' cost), up deploys
    fits = {"brokerbench:maxUsd": "100", "brokerbench:ttlHours": "4"}
    assert checks.of_type(entry_point(monkeypatch, wheel, CLEAN, **fits), "ec2/instance:Instance")


def test_the_machines_go_to_a_zone_that_offers_their_types(
    wheel: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with_recipes(monkeypatch)
    settings = deployable("redis")
    kinds = {settings.broker_instance_type, settings.client_instance_type}
    offered = {ZONES[0]: {settings.client_instance_type}, ZONES[1]: kinds, ZONES[2]: kinds}
    _, resources = deploy(
        lambda: build(settings, "redis", REGION, wheel=wheel, source=CLEAN), offerings=offered
    )
    assert {
        s.inputs["availabilityZone"] for s in checks.of_type(resources, "ec2/subnet:Subnet")
    } == {ZONES[1]}
    pinned = settings.model_copy(update={"availability_zone": ZONES[0]})
    with pytest.raises(StackConfigError) as refused:
        deploy(lambda: build(pinned, "redis", REGION, wheel=wheel, source=CLEAN), offerings=offered)
    assert refused.value.lines == [
        f"c6i.8xlarge and r6i.8xlarge not offered in {ZONES[0]}: set "
        f"brokerbench:availabilityZone to one of {ZONES[1]}, {ZONES[2]}"
    ]
    nowhere = {zone: {settings.client_instance_type} for zone in ZONES}
    with pytest.raises(StackConfigError, match="no zone of the region offers them all"):
        deploy(
            lambda: build(settings, "redis", REGION, wheel=wheel, source=CLEAN), offerings=nowhere
        )
