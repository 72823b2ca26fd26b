"""Cost per million messages from on-demand instance prices.

Prices are a versioned table shipped with the package (``analysis/prices/<version>.json``,
USD per instance-hour by region and instance type; the version ends with the year and month
the prices were published, all regions of a table from one snapshot), read through
:mod:`importlib.resources` so that it is found wherever the package is imported from: a
source tree, an installed wheel, or the wheel itself on ``sys.path`` (Spark's
``--py-files`` on EMR). A run is priced only when its context says which instances ran for
how long. The newest table is used unless a version is named. The table also says how many
vCPUs each of its instance types has (the same in every region), what EC2's vCPU quotas
count.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib.resources import files

#: The folder of price tables inside the package (a directory or a folder in a zip).
TABLES = files("analysis") / "prices"


@dataclass(frozen=True)
class PriceTable:
    version: str
    currency: str
    regions: dict[str, dict[str, float]]
    #: Instance type → vCPUs.
    vcpus: dict[str, int] = field(default_factory=dict)
    #: Where the prices come from and when they were published.
    source: str = ""

    def hourly(self, region: str, instance_type: str) -> float:
        if region not in self.regions:
            raise KeyError(
                f"no on-demand prices for region {region or '(none)'} in table {self.version} "
                f"(it prices {', '.join(self.regions)})"
            )
        try:
            return self.regions[region][instance_type]
        except KeyError:
            raise KeyError(
                f"no on-demand price for {instance_type} in {region} in table {self.version}"
            ) from None

    def vcpus_of(self, instance_type: str) -> int:
        try:
            return self.vcpus[instance_type]
        except KeyError:
            raise KeyError(f"no vCPU count for {instance_type} in table {self.version}") from None


def load_prices(version: str | None = None) -> PriceTable:
    """The named price table, or the newest one (versions sort by date)."""
    paths = sorted((p for p in TABLES.iterdir() if p.name.endswith(".json")), key=lambda p: p.name)
    if version is not None:
        paths = [p for p in paths if p.name == f"{version}.json"]
    if not paths:
        raise FileNotFoundError(f"no price table {version or ''} in {TABLES}")
    data = json.loads(paths[-1].read_text())
    return PriceTable(
        data["version"],
        data["currency"],
        data["regions"],
        vcpus=data.get("vcpus", {}),
        source=data.get("source", ""),
    )


def fleet_cost(
    prices: PriceTable, region: str, instances: Mapping[str, int], hours: float
) -> float:
    """What ``instances`` (type → count) cost for ``hours``."""
    return sum(prices.hourly(region, t) * n for t, n in instances.items()) * hours


def cost_per_million(
    prices: PriceTable, region: str, instances: Mapping[str, int], hours: float, messages: int
) -> float | None:
    """Fleet cost per million messages; None when nothing was delivered."""
    if messages <= 0:
        return None
    return fleet_cost(prices, region, instances, hours) / messages * 1_000_000
