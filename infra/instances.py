"""What an instance type's network and EBS bandwidth are, and whether they last.

Smaller EC2 instance types publish their network and EBS bandwidth as "up to" a figure:
they reach it on credits (EBS for 30 minutes a day) and fall back to a baseline of a
fraction of it once the credits are spent, so a sweep that runs longer than its credits
measures a slower machine at its end than at its start. Larger types of the same families
publish a figure without "up to": their bandwidth is sustained. :data:`BANDWIDTH` lists the
types the stacks use or the price table prices, with EC2's published figures;
:func:`bandwidth_problems` says why a type is not fit for a long sweep.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Bandwidth:
    """An instance type's published network (Gbit/s) and EBS (Mbit/s) bandwidth; each
    ``*_sustained`` False when the figure is "up to" (burst on credits)."""

    network_gbps: float
    network_sustained: bool
    ebs_mbps: int
    ebs_sustained: bool

    @property
    def sustained(self) -> bool:
        return self.network_sustained and self.ebs_sustained

    def describe(self) -> str:
        network = f"{'' if self.network_sustained else 'up to '}{self.network_gbps:g} Gbit/s"
        ebs = f"{'' if self.ebs_sustained else 'up to '}{self.ebs_mbps:,} Mbit/s"
        return f"network {network}, EBS {ebs}"


def _burst(network: float, ebs: int) -> Bandwidth:
    return Bandwidth(network, False, ebs, False)


#: Published bandwidth of instance types (EC2 instance type specifications, x86_64).
BANDWIDTH: dict[str, Bandwidth] = {
    "t3.medium": _burst(5, 2085),
    "t3.large": _burst(5, 2780),
    "m5.large": _burst(10, 4750),
    "m5.xlarge": _burst(10, 4750),
    "m5.2xlarge": _burst(10, 4750),
    "m5.4xlarge": Bandwidth(10, False, 4750, True),
    "m5.8xlarge": Bandwidth(10, True, 6800, True),
    "c5.large": _burst(10, 4750),
    "c5.xlarge": _burst(10, 4750),
    "c5.2xlarge": _burst(10, 4750),
    "c5.4xlarge": Bandwidth(10, False, 4750, True),
    "c5.9xlarge": Bandwidth(12, True, 9500, True),
    "r5.large": _burst(10, 4750),
    "r5.xlarge": _burst(10, 4750),
    "r5.2xlarge": _burst(10, 4750),
    "r5.4xlarge": Bandwidth(10, False, 4750, True),
    "r5.8xlarge": Bandwidth(10, True, 6800, True),
    "i3.large": Bandwidth(10, False, 425, True),
    "i3.xlarge": Bandwidth(10, False, 850, True),
    "i3.2xlarge": Bandwidth(10, False, 1700, True),
    "m6i.8xlarge": Bandwidth(12.5, True, 10000, True),
    "c6i.8xlarge": Bandwidth(12.5, True, 10000, True),
    "r6i.8xlarge": Bandwidth(12.5, True, 10000, True),
}


def bandwidth_problems(instance_type: str) -> list[str]:
    """Why ``instance_type`` may drift in a long sweep (empty when its bandwidth lasts)."""
    bandwidth = BANDWIDTH.get(instance_type)
    if bandwidth is None:
        return [f"{instance_type}: bandwidth unknown (not in infra/instances.py); "
                "it may be a burstable type"]  # fmt: skip
    if bandwidth.sustained:
        return []
    return [
        f"{instance_type}: {bandwidth.describe()}: burstable, a long sweep slows down when "
        "its credits run out"
    ]
