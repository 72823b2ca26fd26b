"""The account quotas a stack needs, checked against what the account allows less what
already runs in the region: the vCPUs of the *Running On-Demand Standard instances* quota,
VPCs, Elastic IPs. The limits come from Service Quotas, the use from EC2 (the vCPUs of the
pending and running instances of the standard families, the VPCs and the Elastic IPs of
the region); either failing leaves the quotas unchecked, with the reason."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from workload.model.errors import one_line

#: Instance families EC2's "Running On-Demand Standard" vCPU quota counts.
STANDARD_FAMILIES = ("a", "c", "d", "h", "i", "m", "r", "t", "z")
VCPUS, VPCS, ELASTIC_IPS = "L-1216C47A", "L-F678F1CE", "L-0263D0A3"


@dataclass(frozen=True)
class QuotaNeed:
    """What the stack needs of one Service Quotas quota (None: not known, see the notes)."""

    service: str
    code: str
    title: str
    need: int | None


@dataclass(frozen=True)
class QuotaCheck:
    """The needs against the account's quotas: ``checked`` False says why not."""

    checked: bool
    reason: str = ""
    #: Quota code → the account's value (only when checked).
    values: dict[str, float] | None = None
    #: Quota code → how much of it what runs in the region uses now.
    used: dict[str, float] = field(default_factory=dict)

    def verdicts(self, needs: list[QuotaNeed]) -> list[tuple[QuotaNeed, str, bool]]:
        """Each need with its line (need, use, quota) and whether it fits."""
        values = self.values or {}
        found = []
        for n in needs:
            if n.code not in values:
                continue
            used = self.used.get(n.code, 0.0)
            line = f"{n.title} ({n.code}): need {'?' if n.need is None else n.need}, "
            line += f"in use {used:g}, quota {values[n.code]:g}"
            fits = n.need is None or used + n.need <= values[n.code]
            found.append((n, line, fits))
        return found

    def problems(self, needs: list[QuotaNeed]) -> list[str]:
        return [
            f"quota too small: {n.title} ({n.code}): the stack needs {n.need}, "
            f"{self.used.get(n.code, 0.0):g} are in use in the region, the quota is "
            f"{(self.values or {})[n.code]:g}; stop what runs there or ask for more in "
            "Service Quotas"
            for n, _, fits in self.verdicts(needs)
            if not fits
        ]


def quota_client(region: str | None, service: str = "service-quotas") -> Any:
    """A client of ``service``, or a :class:`LookupError` saying why there is none."""
    import boto3

    session = boto3.Session(region_name=region)
    if session.get_credentials() is None:
        raise LookupError("no AWS credentials")
    if not session.region_name:
        raise LookupError("no region (aws:region in the stack, or --region)")
    return session.client(service)


def region_usage(ec2: Any) -> dict[str, float]:
    """What already runs in ``ec2``'s region, by quota code."""
    pages = ec2.get_paginator("describe_instances").paginate(
        Filters=[{"Name": "instance-state-name", "Values": ["pending", "running"]}]
    )
    types = [
        i["InstanceType"]
        for page in pages
        for r in page["Reservations"]
        for i in r["Instances"]
        if i["InstanceType"].startswith(STANDARD_FAMILIES)
    ]
    vcpus: dict[str, int] = {}
    kinds = sorted(set(types))
    for start in range(0, len(kinds), 100):
        answer = ec2.describe_instance_types(InstanceTypes=kinds[start : start + 100])
        for kind in answer["InstanceTypes"]:
            vcpus[kind["InstanceType"]] = int(kind["VCpuInfo"]["DefaultVCpus"])
    return {
        VCPUS: float(sum(vcpus.get(t, 0) for t in types)),
        VPCS: float(len(ec2.describe_vpcs()["Vpcs"])),
        ELASTIC_IPS: float(len(ec2.describe_addresses()["Addresses"])),
    }


def check_quotas(client: Any, needs: list[QuotaNeed], ec2: Any | None = None) -> QuotaCheck:
    """The account's value of every needed quota and, with ``ec2``, what runs uses of it;
    the first failure says why they are not checked."""
    values: dict[str, float] = {}
    for need in needs:
        try:
            answer = client.get_service_quota(ServiceCode=need.service, QuotaCode=need.code)
            values[need.code] = float(answer["Quota"]["Value"])
        except Exception as exc:  # credentials, permissions, network: one line, not a trace
            return QuotaCheck(False, f"{need.code}: {one_line(str(exc))}")
    try:
        used = region_usage(ec2) if ec2 is not None else {}
    except Exception as exc:
        return QuotaCheck(False, f"what runs in the region: {one_line(str(exc))}")
    return QuotaCheck(True, values=values, used=used)
