"""The machines: the broker cluster (nodes by role, with data volumes) and the client
fleet (sender and receiver machines).

Every machine sits in the benchmark subnet at its planned private address, in the stack's
cluster placement group (when it has one), has a public
address only when the network says so (an admin CIDR is configured), requires IMDSv2
session tokens, has encrypted volumes, and is replaced when its user-data changes (a new
run gets fresh machines). A replacement deletes the old machine before it creates the new
one: the new one takes the same private address, which AWS refuses while the old one holds
it (``InvalidIPAddress.InUse``).
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from infra.plan import BrokerNode, ClientNode

DATA_DEVICE = "/dev/sdf"


@dataclass(frozen=True)
class DataVolume:
    size_gib: int
    type: str = "gp3"
    iops: int = 3000
    #: MiB/s, gp3 only; None leaves AWS's default (gp3: the 125 MiB/s baseline).
    throughput: int | None = None


@dataclass(frozen=True)
class MachineDefaults:
    """What every machine of a stack shares."""

    ami: pulumi.Input[str]
    subnet_id: pulumi.Input[str]
    security_group_id: pulumi.Input[str]
    root_volume_gib: int
    tags: dict[str, str]
    key_name: str | None = None
    #: A public address for every machine: only when an admin CIDR must reach them.
    public_ip: bool = False
    #: The placement group (cluster strategy) every machine of the stack launches in.
    placement_group: pulumi.Input[str] | None = None


def _machines(
    name: str,
    parent: pulumi.Resource,
    args: BrokerClusterArgs | ClientFleetArgs,
    data_volume: DataVolume | None = None,
    depends_on: list[pulumi.Resource] | None = None,
) -> dict[str, aws.ec2.Instance]:
    """Node name → its machine ``<name>-<node name>``, one for each of ``args.nodes``."""
    defaults = args.defaults
    volumes = []
    if data_volume is not None:
        volumes.append(
            aws.ec2.InstanceEbsBlockDeviceArgs(
                device_name=DATA_DEVICE,
                volume_size=data_volume.size_gib,
                volume_type=data_volume.type,
                iops=data_volume.iops,
                throughput=data_volume.throughput,
                encrypted=True,
                delete_on_termination=True,
            )
        )
    machines = {}
    for node in args.nodes:
        machines[node.name] = aws.ec2.Instance(
            f"{name}-{node.name}",
            ami=defaults.ami,
            instance_type=args.instance_type,
            subnet_id=defaults.subnet_id,
            vpc_security_group_ids=[defaults.security_group_id],
            private_ip=node.address,
            placement_group=defaults.placement_group,
            associate_public_ip_address=defaults.public_ip,
            key_name=defaults.key_name,
            iam_instance_profile=args.profile,
            user_data=args.user_data[node.name],
            user_data_replace_on_change=True,
            # A machine that powers itself off (its time to live) stops; it is not terminated.
            instance_initiated_shutdown_behavior="stop",
            metadata_options=aws.ec2.InstanceMetadataOptionsArgs(
                http_endpoint="enabled", http_tokens="required", http_put_response_hop_limit=1
            ),
            root_block_device=aws.ec2.InstanceRootBlockDeviceArgs(
                volume_size=defaults.root_volume_gib,
                volume_type="gp3",
                encrypted=True,
                delete_on_termination=True,
            ),
            ebs_block_devices=volumes,
            tags={**defaults.tags, "Name": f"{name}-{node.name}", "brokerbench:role": node.role},
            opts=pulumi.ResourceOptions(
                parent=parent, depends_on=depends_on or [], delete_before_replace=True
            ),
        )
    return machines


def cluster_placement_group(name: str, tags: dict[str, str]) -> aws.ec2.PlacementGroup:
    """One placement group of the ``cluster`` strategy for every machine of the stack: AWS
    places them close together in one availability zone, where the network between them
    has its lowest latency and its full per-flow bandwidth."""
    return aws.ec2.PlacementGroup(name, strategy="cluster", tags=tags)


@dataclass(frozen=True)
class BrokerClusterArgs:
    nodes: tuple[BrokerNode, ...]
    #: Node name → its cloud-config.
    user_data: dict[str, pulumi.Input[str]]
    instance_type: str
    data_volume: DataVolume
    defaults: MachineDefaults
    #: Instance profile of the broker machines (it reads the stack's secrets).
    profile: pulumi.Input[str] | None = None


class BrokerCluster(pulumi.ComponentResource):
    """The broker machines of the system's topology (none for a managed service)."""

    private_ips: pulumi.Output[dict[str, str]]

    def __init__(
        self, name: str, args: BrokerClusterArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("brokerbench:infra:BrokerCluster", name, None, opts)
        self.instances = _machines(name, self, args, data_volume=args.data_volume)
        self.private_ips = pulumi.Output.all(
            **{n: i.private_ip for n, i in self.instances.items()}
        ).apply(dict)
        self.register_outputs({"private_ips": self.private_ips})


@dataclass(frozen=True)
class ClientFleetArgs:
    nodes: tuple[ClientNode, ...]
    user_data: dict[str, pulumi.Input[str]]
    instance_type: str
    profile: pulumi.Input[str]
    defaults: MachineDefaults
    #: Started only after these exist (the uploaded artifacts, the brokers).
    after: tuple[pulumi.Resource, ...] = ()


class ClientFleet(pulumi.ComponentResource):
    """Sender and receiver machines, enough for the scenario's largest sweep point."""

    def __init__(
        self, name: str, args: ClientFleetArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("brokerbench:infra:ClientFleet", name, None, opts)
        self.instances = _machines(name, self, args, depends_on=list(args.after))
        self.register_outputs({"nodes": sorted(self.instances)})
