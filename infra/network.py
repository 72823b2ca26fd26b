"""The benchmark network: one VPC, one public subnet in one availability zone, one
security group.

Inside the group every node reaches every other on any port (brokers, replication,
clients). From outside, nothing gets in unless an admin CIDR is configured, and then only
SSH. Egress is open so that nodes can install packages and reach S3.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_aws as aws


@dataclass(frozen=True)
class NetworkArgs:
    vpc_cidr: str
    subnet_cidr: str
    availability_zone: pulumi.Input[str]
    #: CIDR allowed to SSH to the nodes; None = no ingress from outside the group.
    admin_cidr: str | None = None
    tags: dict[str, str] | None = None


class Network(pulumi.ComponentResource):
    vpc_id: pulumi.Output[str]
    subnet_id: pulumi.Output[str]
    security_group_id: pulumi.Output[str]
    availability_zone: pulumi.Output[str]

    def __init__(
        self, name: str, args: NetworkArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("brokerbench:infra:Network", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        tags = dict(args.tags or {})

        vpc = aws.ec2.Vpc(
            f"{name}-vpc",
            cidr_block=args.vpc_cidr,
            enable_dns_hostnames=True,
            enable_dns_support=True,
            tags={**tags, "Name": f"{name}-vpc"},
            opts=child,
        )
        gateway = aws.ec2.InternetGateway(
            f"{name}-igw", vpc_id=vpc.id, tags={**tags, "Name": f"{name}-igw"}, opts=child
        )
        subnet = aws.ec2.Subnet(
            f"{name}-subnet",
            vpc_id=vpc.id,
            cidr_block=args.subnet_cidr,
            availability_zone=args.availability_zone,
            map_public_ip_on_launch=True,
            tags={**tags, "Name": f"{name}-subnet"},
            opts=child,
        )
        routes = aws.ec2.RouteTable(
            f"{name}-routes",
            vpc_id=vpc.id,
            routes=[aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0", gateway_id=gateway.id)],
            tags={**tags, "Name": f"{name}-routes"},
            opts=child,
        )
        aws.ec2.RouteTableAssociation(
            f"{name}-routes-subnet", subnet_id=subnet.id, route_table_id=routes.id, opts=child
        )
        group = aws.ec2.SecurityGroup(
            f"{name}-nodes",
            vpc_id=vpc.id,
            description="brokerbench nodes: all traffic inside the group only",
            tags={**tags, "Name": f"{name}-nodes"},
            opts=child,
        )
        aws.vpc.SecurityGroupIngressRule(
            f"{name}-within-group",
            security_group_id=group.id,
            referenced_security_group_id=group.id,
            ip_protocol="-1",
            description="any traffic between benchmark nodes",
            opts=child,
        )
        if args.admin_cidr:
            aws.vpc.SecurityGroupIngressRule(
                f"{name}-admin-ssh",
                security_group_id=group.id,
                cidr_ipv4=args.admin_cidr,
                ip_protocol="tcp",
                from_port=22,
                to_port=22,
                description="SSH from the configured admin CIDR",
                opts=child,
            )
        aws.vpc.SecurityGroupEgressRule(
            f"{name}-egress",
            security_group_id=group.id,
            cidr_ipv4="0.0.0.0/0",
            ip_protocol="-1",
            description="package mirrors, S3, AWS APIs",
            opts=child,
        )

        self.vpc_id = vpc.id
        self.subnet_id = subnet.id
        self.security_group_id = group.id
        self.availability_zone = subnet.availability_zone
        self.register_outputs(
            {
                "vpc_id": self.vpc_id,
                "subnet_id": self.subnet_id,
                "security_group_id": self.security_group_id,
                "availability_zone": self.availability_zone,
            }
        )
