"""Security and shape checks of a declared stack, as plain functions over resource inputs.

Each validator takes the resources a Pulumi program declared — their type token, name and
inputs in the engine's (camelCase) form, as Pulumi's test mocks or ``pulumi preview --json``
show them — and returns one line per problem (empty when the stack is fine). They know
AWS semantics, not this project's components, so they also judge hand-made bad examples.
The user-data a machine boots with is checked as text in :mod:`infra.userdata_checks`, the
identities and the generated secrets in :mod:`infra.access_checks`.
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from infra.instances import bandwidth_problems as type_bandwidth_problems

WORLD = {"0.0.0.0/0", "::/0"}
#: gp3: IOPS included when none are given, and the most throughput (MiB/s) per IOPS.
GP3_BASELINE_IOPS = 3000
GP3_MIBPS_PER_IOPS = 0.25


@dataclass(frozen=True)
class Options:
    """The resource options of a declared resource that decide what an update or a
    ``pulumi destroy`` does to it (as the engine receives them)."""

    #: On replacement, delete the old resource before creating the new one.
    delete_before_replace: bool = False
    #: ``pulumi destroy`` (or a replacement) leaves the resource in the cloud.
    retain_on_delete: bool = False


@dataclass(frozen=True)
class Declared:
    """One declared resource: type token, logical name, inputs; id/outputs when known."""

    type: str
    name: str
    inputs: dict[str, Any]
    id: str = ""
    outputs: dict[str, Any] = field(default_factory=dict)
    options: Options = field(default_factory=Options)

    def refers_to(self, value: Any) -> bool:
        return bool(value) and value in (self.id, self.outputs.get("bucket"), self.name)


def of_type(resources: Iterable[Declared], *suffixes: str) -> list[Declared]:
    """Resources whose type token ends with one of ``suffixes`` (e.g. ``"ec2/instance:Instance"``)."""
    return [r for r in resources if r.type.endswith(suffixes)]


# -- network -----------------------------------------------------------------------------


def ingress_problems(resources: Iterable[Declared], admin_cidr: str | None = None) -> list[str]:
    """Ingress only from the security group itself, or from ``admin_cidr`` when given."""
    resources = list(resources)
    problems = []
    for rule, cidrs, peers in _ingress_rules(resources):
        for cidr in cidrs:
            if cidr in WORLD or _is_world(cidr):
                problems.append(f"{rule}: ingress open to the world ({cidr})")
            elif admin_cidr is None or cidr != admin_cidr:
                problems.append(f"{rule}: ingress from {cidr}, which is not the admin CIDR")
        if not cidrs and not peers:
            problems.append(f"{rule}: ingress rule with neither a peer group nor a CIDR")
    return problems


def _is_world(cidr: str) -> bool:
    try:
        return ipaddress.ip_network(cidr, strict=False).prefixlen == 0
    except ValueError:
        return False


def _ingress_rules(resources: list[Declared]) -> list[tuple[str, list[str], list[str]]]:
    rules: list[tuple[str, list[str], list[str]]] = []
    for r in of_type(resources, "vpc/securityGroupIngressRule:SecurityGroupIngressRule"):
        cidrs = [r.inputs[k] for k in ("cidrIpv4", "cidrIpv6") if r.inputs.get(k)]
        if r.inputs.get("prefixListId"):
            cidrs.append(f"prefix list {r.inputs['prefixListId']}")
        peers = (
            [r.inputs["referencedSecurityGroupId"]]
            if r.inputs.get("referencedSecurityGroupId")
            else []
        )
        rules.append((r.name, cidrs, peers))
    for r in of_type(resources, "ec2/securityGroupRule:SecurityGroupRule"):
        if r.inputs.get("type") == "ingress":
            cidrs = list(r.inputs.get("cidrBlocks") or []) + list(
                r.inputs.get("ipv6CidrBlocks") or []
            )
            peers = (
                [r.inputs["sourceSecurityGroupId"]] if r.inputs.get("sourceSecurityGroupId") else []
            )
            peers += ["self"] if r.inputs.get("self") else []
            rules.append((r.name, cidrs, peers))
    for r in of_type(resources, "ec2/securityGroup:SecurityGroup"):
        for i, entry in enumerate(r.inputs.get("ingress") or []):
            cidrs = list(entry.get("cidrBlocks") or []) + list(entry.get("ipv6CidrBlocks") or [])
            peers = list(entry.get("securityGroups") or []) + (
                ["self"] if entry.get("self") else []
            )
            rules.append((f"{r.name}.ingress[{i}]", cidrs, peers))
    return rules


def availability_zone_problems(resources: Iterable[Declared]) -> list[str]:
    """All subnets (hence all instances) in exactly one availability zone."""
    resources = list(resources)
    subnets = of_type(resources, "ec2/subnet:Subnet")
    zones: set[str | None] = {s.inputs.get("availabilityZone") for s in subnets}
    problems = []
    if len(subnets) == 0:
        problems.append("no subnet declared")
    if None in zones:
        problems.append("a subnet has no explicit availability zone")
    if len(zones - {None}) > 1:
        problems.append(
            f"subnets span {len(zones)} availability zones: {sorted(str(z) for z in zones)}"
        )
    subnet_ids = {s.id for s in subnets} | {s.name for s in subnets}
    for instance in of_type(resources, "ec2/instance:Instance"):
        if instance.inputs.get("subnetId") not in subnet_ids:
            problems.append(f"{instance.name}: not in a subnet of this stack")
        zone = instance.inputs.get("availabilityZone")
        if zone and zone not in zones:
            problems.append(f"{instance.name}: in availability zone {zone}")
    return problems


def public_ip_problems(resources: Iterable[Declared], admin_cidr: str | None = None) -> list[str]:
    """No machine has a public address unless ``admin_cidr`` is given (the operator's SSH
    needs one): no instance or launch template asks for one, no subnet that hosts instances
    assigns them on launch, no Elastic IP is attached to a machine."""
    if admin_cidr is not None:
        return []
    resources = list(resources)
    machines = of_type(resources, "ec2/instance:Instance")
    problems = [
        f"{r.name}: asks for a public IP (associatePublicIpAddress)"
        for r in machines
        if _is_true(r.inputs.get("associatePublicIpAddress"))
    ]
    for r in of_type(resources, "ec2/launchTemplate:LaunchTemplate"):
        for i, interface in enumerate(r.inputs.get("networkInterfaces") or []):
            if _is_true(interface.get("associatePublicIpAddress")):
                problems.append(f"{r.name}.networkInterfaces[{i}]: asks for a public IP")
    for subnet in of_type(resources, "ec2/subnet:Subnet"):
        if not _is_true(subnet.inputs.get("mapPublicIpOnLaunch")):
            continue
        hosted = sorted(
            m.name for m in machines if m.inputs.get("subnetId") in (subnet.id, subnet.name)
        )
        if hosted:
            problems.append(
                f"{subnet.name}: assigns public IPs on launch (mapPublicIpOnLaunch) and hosts "
                f"{len(hosted)} machine(s): {', '.join(hosted)}"
            )
    for r in of_type(resources, "ec2/eip:Eip", "ec2/eipAssociation:EipAssociation"):
        if any(
            r.inputs.get(k)
            for k in ("instance", "instanceId", "networkInterface", "networkInterfaceId")
        ):
            problems.append(f"{r.name}: attaches an Elastic IP to a machine")
    return problems


def _is_true(value: Any) -> bool:
    """A flag as the engine shows it: a bool, or a string in launch templates."""
    return value is True or str(value).lower() == "true"


# -- instances ---------------------------------------------------------------------------


def metadata_problems(resources: Iterable[Declared]) -> list[str]:
    """Every instance requires IMDSv2 session tokens (``http_tokens = "required"``)."""
    problems = []
    for r in of_type(resources, "ec2/instance:Instance", "ec2/launchTemplate:LaunchTemplate"):
        options = r.inputs.get("metadataOptions") or {}
        if options.get("httpEndpoint") == "disabled":
            continue
        if options.get("httpTokens") != "required":
            problems.append(
                f"{r.name}: IMDSv1 allowed (metadataOptions.httpTokens is not 'required')"
            )
        if int(options.get("httpPutResponseHopLimit") or 1) > 1:
            problems.append(f"{r.name}: metadata hop limit above 1")
    return problems


def volume_problems(resources: Iterable[Declared]) -> list[str]:
    """Root and data volumes encrypted; a gp3 data volume (an instance's ``ebsBlockDevices``
    or an ``aws.ebs.Volume``) declares its throughput — else it is held to the 125 MiB/s
    baseline — and no more than AWS allows for its IOPS (0.25 MiB/s per IOPS)."""
    problems = []
    for r in of_type(resources, "ec2/instance:Instance"):
        root = r.inputs.get("rootBlockDevice") or {}
        if not root.get("encrypted"):
            problems.append(f"{r.name}: root volume not encrypted")
        for device in r.inputs.get("ebsBlockDevices") or []:
            label = f"{r.name}: volume {device.get('deviceName')}"
            if not device.get("encrypted"):
                problems.append(f"{label} not encrypted")
            problems += _gp3_problems(label, device.get("volumeType"), device)
    for r in of_type(resources, "ebs/volume:Volume"):
        if not r.inputs.get("encrypted"):
            problems.append(f"{r.name}: volume not encrypted")
        problems += _gp3_problems(r.name, r.inputs.get("type"), r.inputs)
    return problems


def _gp3_problems(label: str, volume_type: Any, spec: dict[str, Any]) -> list[str]:
    if volume_type != "gp3":
        return []
    throughput = spec.get("throughput")
    if not throughput:
        return [f"{label}: gp3 without a throughput (held to the 125 MiB/s baseline)"]
    iops = int(spec.get("iops") or GP3_BASELINE_IOPS)
    if int(throughput) > iops * GP3_MIBPS_PER_IOPS:
        return [
            f"{label}: gp3 throughput {throughput} MiB/s is more than {iops} IOPS allow "
            f"({GP3_MIBPS_PER_IOPS} MiB/s per IOPS)"
        ]
    return []


#: Inputs of an instance whose change makes AWS replace it (a new instance, a new id).
INSTANCE_REPLACED_ON = ("ami", "privateIp", "subnetId", "availabilityZone")


def replaced_instances(before: Iterable[Declared], after: Iterable[Declared]) -> list[str]:
    """The instances an update from ``before`` to ``after`` replaces: the same logical name
    with a changed input that forces a new instance (user-data only where it is declared
    to replace on change)."""
    old = {r.name: r for r in of_type(before, "ec2/instance:Instance")}
    replaced = []
    for new in of_type(after, "ec2/instance:Instance"):
        previous = old.get(new.name)
        if previous is None:
            continue
        keys = list(INSTANCE_REPLACED_ON)
        if _is_true(new.inputs.get("userDataReplaceOnChange")):
            keys.append("userData")
        if any(previous.inputs.get(k) != new.inputs.get(k) for k in keys):
            replaced.append(new.name)
    return replaced


def fixed_address_problems(resources: Iterable[Declared]) -> list[str]:
    """An instance at a fixed private address must be deleted before its replacement is
    created: Pulumi's default order (create, then delete) asks AWS for an address the old
    instance still holds, and AWS refuses it (``InvalidIPAddress.InUse``)."""
    return [
        f"{r.name}: fixed private address {r.inputs['privateIp']} but no "
        "delete_before_replace: a replacement fails with InvalidIPAddress.InUse"
        for r in of_type(resources, "ec2/instance:Instance")
        if r.inputs.get("privateIp") and not r.options.delete_before_replace
    ]


def bandwidth_problems(resources: Iterable[Declared]) -> list[str]:
    """Every instance of a type whose network and EBS bandwidth are sustained, not "up to"
    a figure reached on credits (:mod:`infra.instances`)."""
    return [
        f"{r.name}: {line}"
        for r in of_type(resources, "ec2/instance:Instance")
        for line in type_bandwidth_problems(str(r.inputs.get("instanceType")))
    ]


def placement_problems(resources: Iterable[Declared]) -> list[str]:
    """Every instance in one placement group of the ``cluster`` strategy, which the stack
    declares: its machines sit close together in one availability zone, on the network
    with the lowest latency and the highest bandwidth between them."""
    resources = list(resources)
    groups = {
        g.outputs.get("name") or g.inputs.get("name") or g.name: g
        for g in of_type(resources, "ec2/placementGroup:PlacementGroup")
    }
    problems = [
        f"{g.name}: placement strategy {g.inputs.get('strategy')!r}, not 'cluster'"
        for g in groups.values()
        if g.inputs.get("strategy") != "cluster"
    ]
    instances = of_type(resources, "ec2/instance:Instance")
    used = {r.inputs.get("placementGroup") for r in instances}
    for r in instances:
        group = r.inputs.get("placementGroup")
        if not group:
            problems.append(f"{r.name}: in no placement group")
        elif group not in groups:
            problems.append(f"{r.name}: placement group {group!r} is not declared by the stack")
    if len(used - {None, ""}) > 1:
        problems.append(f"machines in {len(used)} placement groups, not one")
    return problems


# -- storage -----------------------------------------------------------------------------


def bucket_problems(resources: Iterable[Declared]) -> list[str]:
    """Every bucket: default encryption, all four public-access blocks, versioning, no public ACL."""
    resources = list(resources)
    problems = []
    for bucket in of_type(resources, "s3/bucket:Bucket", "s3/bucketV2:BucketV2"):

        def related(*suffixes: str, bucket: Declared = bucket) -> list[Declared]:
            return [
                r for r in of_type(resources, *suffixes) if bucket.refers_to(r.inputs.get("bucket"))
            ]

        sse = related(
            "s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration",
            "s3/bucketServerSideEncryptionConfigurationV2:BucketServerSideEncryptionConfigurationV2",
        )
        algorithms = {
            (rule.get("applyServerSideEncryptionByDefault") or {}).get("sseAlgorithm")
            for config in sse
            for rule in config.inputs.get("rules") or []
        }
        if not algorithms & {"AES256", "aws:kms", "aws:kms:dsse"}:
            problems.append(f"{bucket.name}: no default server-side encryption")
        blocks = related("s3/bucketPublicAccessBlock:BucketPublicAccessBlock")
        flags = (
            "blockPublicAcls",
            "blockPublicPolicy",
            "ignorePublicAcls",
            "restrictPublicBuckets",
        )
        if not any(all(b.inputs.get(f) is True for f in flags) for b in blocks):
            problems.append(f"{bucket.name}: public access not fully blocked")
        versioning = related(
            "s3/bucketVersioning:BucketVersioning", "s3/bucketVersioningV2:BucketVersioningV2"
        )
        if not any(
            (v.inputs.get("versioningConfiguration") or {}).get("status") == "Enabled"
            for v in versioning
        ):
            problems.append(f"{bucket.name}: versioning not enabled")
        if str(bucket.inputs.get("acl") or "private").startswith("public"):
            problems.append(f"{bucket.name}: public ACL {bucket.inputs['acl']}")
        for policy in related("s3/bucketPolicy:BucketPolicy"):
            for statement in statements(policy.inputs.get("policy")):
                if statement.get("Effect") == "Allow" and statement.get("Principal") in (
                    "*",
                    {"AWS": "*"},
                ):
                    problems.append(f"{policy.name}: allows anyone")
    return problems


#: Resources that hold content in a bucket rather than configure it (a run's artifacts).
BUCKET_CONTENT = ("s3/bucketObject:BucketObject", "s3/bucketObjectv2:BucketObjectv2")


def kept_bucket_problems(resources: Iterable[Declared]) -> list[str]:
    """A bucket kept on ``pulumi destroy`` (``retain_on_delete``) keeps every resource that
    configures it too — public-access block, ownership controls, policy, versioning,
    encryption, lifecycle …: each is a resource of its own, and one left out is deleted
    from the kept bucket, leaving it without that protection."""
    resources = list(resources)
    problems = []
    for bucket in of_type(resources, "s3/bucket:Bucket", "s3/bucketV2:BucketV2"):
        if not bucket.options.retain_on_delete:
            continue
        for r in resources:
            if (
                r is not bucket
                and r.type.startswith("aws:s3/")
                and not r.type.endswith(BUCKET_CONTENT)
                and bucket.refers_to(r.inputs.get("bucket"))
                and not r.options.retain_on_delete
            ):
                problems.append(
                    f"{r.name}: configures the kept bucket {bucket.name} but is deleted "
                    "on pulumi destroy (no retain_on_delete)"
                )
    return problems


def statements(document: Any) -> list[dict[str, Any]]:
    if not document:
        return []
    if isinstance(document, str):
        document = json.loads(document)
    statements = document.get("Statement", [])
    return [statements] if isinstance(statements, dict) else list(statements)
