"""The stack configuration (``stacks/Pulumi.<stack>.yaml``, namespace ``brokerbench``), typed.

Every key of the ``brokerbench:`` namespace is parsed once into :class:`StackSettings`;
unknown or misspelt keys are rejected with the list of known ones, and keys that are
valid alone but not together (:func:`combination_problems`) with a line naming the key.
Deprecated keys are accepted and ignored, each said in one line (:func:`deprecations`).
Everything past :func:`settings_from_config` works on the model, never on raw config
strings.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic.alias_generators import to_camel

NAMESPACE = "brokerbench"
#: The tags every resource of a run carries: its stack and its run (``cloud down`` and the
#: other ``cloud`` commands find a run's machines, application and bucket by both).
STACK_TAG = f"{NAMESPACE}:stack"
RUN_TAG = f"{NAMESPACE}:run"
ROOT = Path(__file__).resolve().parent.parent
RUN_ID = re.compile(r"^[a-z0-9][a-z0-9-]{0,47}$")
MIN_IOPS = 3000
#: gp3 throughput in MiB/s: 125 included, up to 1000 provisioned (the default here).
GP3_MIN_THROUGHPUT = 125
GP3_MAX_THROUGHPUT = 1000
GP3_DEFAULT_THROUGHPUT = GP3_MAX_THROUGHPUT
#: AWS allows gp3 at most 0.25 MiB/s of throughput per provisioned IOPS.
GP3_IOPS_PER_MIBPS = 4
#: The public subnet of the NAT gateway: the smallest subnet AWS allows.
NAT_SUBNET_PREFIX = 28
#: The machine image every machine boots (user-data is written for it): Debian 12 for
#: x86_64, published by Debian's AWS account. ``brokerbench cloud ami`` finds its newest.
DEBIAN_OWNER = "136693071363"
DEBIAN_IMAGE = "debian-12-amd64-*"


#: Keys still accepted but ignored (field name → why); a stack that sets one is told so
#: in one line (:func:`deprecations`).
DEPRECATED = {
    "managed_queue": "the system's cloud recipe says whether the stack creates a managed service",
}


class StackConfigError(ValueError):
    """The stack configuration is invalid; one line per problem."""

    def __init__(self, lines: list[str]) -> None:
        super().__init__("\n".join(lines))
        self.lines = lines


class StackSettings(BaseModel):
    """What one stack deploys: a system, a scenario, sizes and access."""

    model_config = ConfigDict(
        extra="forbid", frozen=True, alias_generator=to_camel, populate_by_name=True
    )

    system: str = Field(description="Broker system name from the registry.")
    scenario: Path = Field(description="Scenario TOML, relative to the repository root.")
    run_id: str | None = Field(
        None,
        description="Run id (lower-case letters, digits, '-'), one per run; default: made by "
        "pulumi up (scenario, UTC time, 4 random hex digits) and kept in the stack's file.",
    )
    roles: dict[str, int] | None = Field(
        None, description="Broker nodes by role, replacing the system's reference topology."
    )
    broker_instance_type: str = Field(
        "r6i.8xlarge",
        description="Instance type of the broker machines; default one with sustained network "
        "and EBS bandwidth (infra/instances.py).",
    )
    client_instance_type: str = Field(
        "c6i.8xlarge",
        description="Instance type of the client machines; default one with sustained network "
        "bandwidth (infra/instances.py).",
    )
    placement_group: bool = Field(
        True,
        description="Launch every machine in one placement group of the cluster strategy "
        "(false: when AWS has no capacity for the whole fleet in one).",
    )
    data_volume_gib: int = Field(200, ge=8, le=16384)
    data_volume_type: Literal["gp3", "io2"] = "gp3"
    data_volume_throughput: int | None = Field(
        default_factory=lambda data: (
            GP3_DEFAULT_THROUGHPUT if data.get("data_volume_type") == "gp3" else None
        ),
        ge=GP3_MIN_THROUGHPUT,
        le=GP3_MAX_THROUGHPUT,
        description="Data volume throughput in MiB/s, gp3 only; default 1000 (none for io2).",
    )
    data_volume_iops: int = Field(
        default_factory=lambda data: max(
            MIN_IOPS, GP3_IOPS_PER_MIBPS * (data.get("data_volume_throughput") or 0)
        ),
        ge=MIN_IOPS,
        le=64000,
        description="Data volume IOPS; default 3000, for gp3 4 per MiB/s of throughput if more.",
    )
    root_volume_gib: int = Field(30, ge=8, le=1024)
    admin_cidr: str | None = Field(
        None, description="CIDR allowed to reach the nodes (SSH); none by default."
    )
    key_name: str | None = Field(None, description="EC2 key pair for SSH (with adminCidr).")
    ami: str | None = Field(
        None,
        description="AMI id of Debian 12 (amd64), pinned: required at deploy; "
        "brokerbench cloud ami --region R prints the current one.",
    )
    availability_zone: str | None = None
    vpc_cidr: str = "10.42.0.0/16"
    subnet_cidr: str = "10.42.1.0/24"
    managed_queue: bool | None = Field(
        None,
        description="Deprecated and ignored: the system's cloud recipe declares its managed "
        "service.",
    )
    wheel: Path | None = Field(
        None, description="brokerbench wheel to install on clients; default: built at deploy."
    )
    allow_dirty: bool = Field(
        False,
        description="Deploy a working tree that differs from its commit (the manifest says "
        "so); by default pulumi up refuses it.",
    )
    analysis_module: str = Field(
        "analysis.job", description="Python module the EMR job runs (as __main__)."
    )
    emr_release: str = "emr-7.5.0"
    emr_image: str | None = Field(
        None, description="EMR Serverless custom image (ECR URI) with Python ≥ 3.11."
    )
    emr_python: str = Field(
        "/usr/bin/python3.11",
        description="Python of the analysis job on the custom image (PYSPARK_PYTHON); "
        "with the packed environment it is the environment's own.",
    )
    emr_python_home: Path | None = Field(
        None,
        description="A relocatable CPython >= 3.11 for x86_64 Linux the packed analysis "
        "environment is built from; default: the newest uv python install keeps.",
    )
    emr_max_vcpu: int = Field(64, ge=4, le=4000)
    broker_wait_minutes: int = Field(30, ge=1, le=24 * 60)
    ttl_hours: int = Field(
        12,
        ge=0,
        le=7 * 24,
        description="Hours after boot when every machine stops itself (instance stopped, "
        "not terminated), if the run's end has not stopped it; 0: never.",
    )
    max_usd: float | None = Field(
        None,
        gt=0,
        description="Cost cap: pulumi up and cloud plan refuse a stack whose machines may "
        "cost more (their price per hour × ttlHours) before they stop themselves.",
    )

    @field_validator("run_id")
    @classmethod
    def _run_id(cls, value: str | None) -> str | None:
        if value is not None and not RUN_ID.match(value):
            raise ValueError(
                f"{value!r}: use 1-48 lower-case letters, digits and '-', starting alphanumeric"
            )
        return value

    @field_validator("roles")
    @classmethod
    def _roles(cls, value: dict[str, int] | None) -> dict[str, int] | None:
        if value is not None and any(n < 0 for n in value.values()):
            raise ValueError("node counts must be ≥ 0")
        return value

    @field_validator("admin_cidr")
    @classmethod
    def _admin_cidr(cls, value: str | None) -> str | None:
        if value is None:
            return None
        network = ipaddress.ip_network(value, strict=False)
        if network.prefixlen == 0:
            raise ValueError("the whole internet may not reach the nodes; give your own CIDR")
        return str(network)

    @field_validator("vpc_cidr", "subnet_cidr")
    @classmethod
    def _cidr(cls, value: str) -> str:
        return str(ipaddress.ip_network(value, strict=True))

    def scenario_path(self) -> Path:
        return self.scenario if self.scenario.is_absolute() else ROOT / self.scenario


def settings_from_config(values: Mapping[str, Any], source: str = "stack config") -> StackSettings:
    """Parse the ``brokerbench:*`` keys of a stack's config (strings or structured values)."""
    prefix = f"{NAMESPACE}:"
    data: dict[str, Any] = {}
    for key, value in values.items():
        if key.startswith(prefix):
            data[key[len(prefix) :]] = _decode(value)
    known = {field.alias or name for name, field in StackSettings.model_fields.items()}
    unknown = sorted(set(data) - known)
    if unknown:
        raise StackConfigError(
            [
                f"{source}: {prefix}{key}: unknown key (misspelt?); known: {', '.join(sorted(known))}"
                for key in unknown
            ]
        )
    try:
        settings = StackSettings.model_validate(data)
    except ValidationError as exc:
        raise StackConfigError(
            [
                f"{source}: {prefix}{'.'.join(str(p) for p in e['loc'])}: "
                f"{e['msg'].removeprefix('Value error, ')}"
                for e in exc.errors()
            ]
        ) from None
    problems = combination_problems(settings)
    if problems:
        raise StackConfigError([f"{source}: {line}" for line in problems])
    return settings


def unpinned_ami(region: str) -> str:
    """The one line for a stack without ``ami``: the image is pinned, never looked up."""
    return (
        f"{NAMESPACE}:ami is not set: pin the machine image, e.g. pulumi config set "
        f"{NAMESPACE}:ami $(brokerbench cloud ami --region {region})"
    )


def deprecations(settings: StackSettings) -> list[str]:
    """One line per deprecated key the settings set: ignored, why, and to remove it."""
    prefix = f"{NAMESPACE}:"
    return [
        f"{prefix}{to_camel(name)} is deprecated and ignored: {why}; remove it from the stack"
        for name, why in DEPRECATED.items()
        if name in settings.model_fields_set
    ]


def combination_problems(settings: StackSettings) -> list[str]:
    """Keys that are valid one by one but not together, one line per problem naming the key:
    the data volume's throughput against its type and IOPS, the subnet against the VPC and,
    with private nodes (no admin CIDR), room in the VPC for the NAT gateway's subnet."""
    prefix = f"{NAMESPACE}:"
    problems = []
    throughput, iops = settings.data_volume_throughput, settings.data_volume_iops
    if throughput is not None and settings.data_volume_type != "gp3":
        problems.append(
            f"{prefix}dataVolumeThroughput: only gp3 volumes take a throughput; "
            f"{prefix}dataVolumeType is {settings.data_volume_type}"
        )
    elif throughput is not None and throughput * GP3_IOPS_PER_MIBPS > iops:
        default = "" if "data_volume_throughput" in settings.model_fields_set else " (the default)"
        problems.append(
            f"{prefix}dataVolumeThroughput: {throughput} MiB/s{default} needs "
            f"{prefix}dataVolumeIops ≥ {throughput * GP3_IOPS_PER_MIBPS} (gp3 allows at most "
            f"0.25 MiB/s per IOPS), but it is {iops}: raise {prefix}dataVolumeIops or set "
            f"{prefix}dataVolumeThroughput to at most {iops // GP3_IOPS_PER_MIBPS}"
        )
    try:
        if settings.admin_cidr is None:
            nat_subnet_cidr(settings.vpc_cidr, settings.subnet_cidr)
        else:
            _subnet_in_vpc(settings.vpc_cidr, settings.subnet_cidr)
    except StackConfigError as exc:
        problems += exc.lines
    return problems


def nat_subnet_cidr(vpc_cidr: str, subnet_cidr: str) -> str:
    """The small public subnet that holds the NAT gateway: the last /28 of the VPC, or its
    first when the nodes' subnet covers the last one (a subnet covering both ends of the VPC
    is the whole VPC, and then there is no room)."""
    vpc, nodes = _subnet_in_vpc(vpc_cidr, subnet_cidr)
    if vpc.prefixlen <= NAT_SUBNET_PREFIX:
        size = 2 ** (vpc.max_prefixlen - NAT_SUBNET_PREFIX)
        last = ipaddress.IPv4Network(f"{vpc.broadcast_address - (size - 1)}/{NAT_SUBNET_PREFIX}")
        first = next(vpc.subnets(new_prefix=NAT_SUBNET_PREFIX))
        for candidate in (last, first):
            if not candidate.overlaps(nodes):
                return str(candidate)
    raise StackConfigError(
        [
            f"{NAMESPACE}:vpcCidr: {vpc} has no room for the NAT gateway's "
            f"/{NAT_SUBNET_PREFIX} subnet beside {NAMESPACE}:subnetCidr {nodes}; "
            f"give a larger vpcCidr (e.g. a /16) or a smaller subnetCidr"
        ]
    )


def _subnet_in_vpc(
    vpc_cidr: str, subnet_cidr: str
) -> tuple[ipaddress.IPv4Network, ipaddress.IPv4Network]:
    """Both CIDRs as IPv4 networks, the nodes' subnet inside the VPC (else a config error)."""
    vpc, nodes = ipaddress.ip_network(vpc_cidr), ipaddress.ip_network(subnet_cidr)
    if not isinstance(vpc, ipaddress.IPv4Network):
        raise StackConfigError([f"{NAMESPACE}:vpcCidr: {vpc} is not an IPv4 CIDR"])
    if not isinstance(nodes, ipaddress.IPv4Network) or not nodes.subnet_of(vpc):
        raise StackConfigError(
            [f"{NAMESPACE}:subnetCidr: {nodes} is not inside {NAMESPACE}:vpcCidr {vpc}"]
        )
    return vpc, nodes


def _decode(value: Any) -> Any:
    """Pulumi hands structured config to programs as JSON text; plain values stay strings."""
    if isinstance(value, str) and value[:1] in "{[":
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


#: Where ``Pulumi.yaml`` keeps the stack files (``stackConfigDir``).
STACKS_DIR = ROOT / "stacks"


class StackConfig(BaseModel):
    """A stack's file as tooling reads it without Pulumi: its settings and region."""

    model_config = ConfigDict(frozen=True)

    name: str
    settings: StackSettings
    region: str | None = None


def load_stack_config(path: Path) -> StackConfig:
    """The settings and ``aws:region`` of a ``Pulumi.<stack>.yaml`` file, read as the
    program reads them (:func:`settings_from_config`)."""
    import yaml

    document = yaml.safe_load(path.read_text()) or {}
    config = document.get("config") or {}
    region = config.get("aws:region")
    name = path.name.removeprefix("Pulumi.").removesuffix(".yaml")
    settings = settings_from_config(config, source=path.name)
    return StackConfig(name=name, settings=settings, region=str(region) if region else None)


def stack_path(name: str, directory: Path | None = None) -> Path:
    """The file of stack ``name`` (a :class:`StackConfigError` naming the known stacks when
    there is none)."""
    directory = directory or STACKS_DIR
    path = directory / f"Pulumi.{name}.yaml"
    if "/" in name or not path.is_file():
        known = sorted(
            p.name.removeprefix("Pulumi.").removesuffix(".yaml")
            for p in directory.glob("Pulumi.*.yaml")
        )
        raise StackConfigError(
            [f"unknown stack {name!r}: no {path.name} in {directory}; stacks: {', '.join(known)}"]
        )
    return path
