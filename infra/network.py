"""The benchmark network: one VPC in one availability zone, the nodes' subnet, one
security group.

The nodes' subnet is private: machines get no public address and reach the internet
(package mirrors, AWS APIs) through a NAT gateway in a small public subnet of its own; S3
traffic (artifacts, results) goes through a gateway VPC endpoint instead, so it crosses
neither the NAT gateway nor the internet. Only when an admin CIDR is configured, so that the
operator can SSH in, is the nodes' subnet public: it routes straight to the internet
gateway, the machines get public addresses, and there is no NAT gateway.

Inside the group every node reaches every other on any port (brokers, replication,
clients). From outside, nothing gets in unless an admin CIDR is configured, and then only
SSH. Egress is open so that nodes can install packages and reach S3.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from infra.settings import nat_subnet_cidr


@dataclass(frozen=True)
class NetworkArgs:
    vpc_cidr: str
    subnet_cidr: str
    availability_zone: pulumi.Input[str]
    #: The stack's region (names the S3 endpoint's service).
    region: str
    #: CIDR allowed to SSH to the nodes; None = no ingress from outside the group, and
    #: nodes without public addresses.
    admin_cidr: str | None = None
    tags: dict[str, str] | None = None

    @property
    def public_nodes(self) -> bool:
        """Whether the nodes get public addresses (only to let the admin CIDR reach them)."""
        return self.admin_cidr is not None


class Network(pulumi.ComponentResource):
    vpc_id: pulumi.Output[str]
    #: The nodes' subnet, known once its routes and the S3 endpoint exist.
    subnet_id: pulumi.Output[str]
    security_group_id: pulumi.Output[str]
    availability_zone: pulumi.Output[str]
    #: None when the nodes are public (admin CIDR) and need no NAT gateway.
    nat_gateway_id: pulumi.Output[str] | None
    #: Whether the machines in the subnet should ask for public addresses.
    public_nodes: bool

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
            map_public_ip_on_launch=args.public_nodes,
            tags={**tags, "Name": f"{name}-subnet"},
            opts=child,
        )
        if args.public_nodes:
            default_route = aws.ec2.RouteTableRouteArgs(
                cidr_block="0.0.0.0/0", gateway_id=gateway.id
            )
            self.nat_gateway_id = None
        else:
            nat = self._nat_gateway(name, args, vpc, gateway, tags, child)
            default_route = aws.ec2.RouteTableRouteArgs(
                cidr_block="0.0.0.0/0", nat_gateway_id=nat.id
            )
            self.nat_gateway_id = nat.id
        self.vpc_id = vpc.id
        # Machines take the subnet from here: they wait for its routes (with the NAT
        # gateway) and the S3 endpoint, so that they never boot without a way out.
        self.subnet_id = self._routed_subnet(name, args, vpc, subnet, default_route, tags, child)
        self.security_group_id = self._security_group(name, args, vpc, tags, child).id
        self.availability_zone = subnet.availability_zone
        self.public_nodes = args.public_nodes
        self.register_outputs(
            {
                "vpc_id": self.vpc_id,
                "subnet_id": self.subnet_id,
                "security_group_id": self.security_group_id,
                "availability_zone": self.availability_zone,
                "nat_gateway_id": self.nat_gateway_id,
            }
        )

    @staticmethod
    def _routed_subnet(
        name: str,
        args: NetworkArgs,
        vpc: aws.ec2.Vpc,
        subnet: aws.ec2.Subnet,
        default_route: aws.ec2.RouteTableRouteArgs,
        tags: dict[str, str],
        child: pulumi.ResourceOptions,
    ) -> pulumi.Output[str]:
        """The nodes' routes: ``default_route`` out (internet or NAT gateway) and the S3
        gateway endpoint; the subnet's id, known once both are in place."""
        routes = aws.ec2.RouteTable(
            f"{name}-routes",
            vpc_id=vpc.id,
            routes=[default_route],
            tags={**tags, "Name": f"{name}-routes"},
            opts=child,
        )
        association = aws.ec2.RouteTableAssociation(
            f"{name}-routes-subnet", subnet_id=subnet.id, route_table_id=routes.id, opts=child
        )
        endpoint = aws.ec2.VpcEndpoint(
            f"{name}-s3",
            vpc_id=vpc.id,
            service_name=f"com.amazonaws.{args.region}.s3",
            vpc_endpoint_type="Gateway",
            route_table_ids=[routes.id],
            tags={**tags, "Name": f"{name}-s3"},
            opts=child,
        )
        return pulumi.Output.all(subnet.id, association.id, endpoint.id).apply(
            lambda ids: str(ids[0])
        )

    @staticmethod
    def _security_group(
        name: str,
        args: NetworkArgs,
        vpc: aws.ec2.Vpc,
        tags: dict[str, str],
        child: pulumi.ResourceOptions,
    ) -> aws.ec2.SecurityGroup:
        """The nodes' group: any traffic inside it, SSH from the admin CIDR (if any), any
        egress."""
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
        return group

    @staticmethod
    def _nat_gateway(
        name: str,
        args: NetworkArgs,
        vpc: aws.ec2.Vpc,
        gateway: aws.ec2.InternetGateway,
        tags: dict[str, str],
        child: pulumi.ResourceOptions,
    ) -> aws.ec2.NatGateway:
        """A NAT gateway with an Elastic IP in a /28 public subnet routed to the internet
        gateway (a CIDR of the VPC that does not overlap the nodes' subnet)."""
        public = aws.ec2.Subnet(
            f"{name}-public",
            vpc_id=vpc.id,
            cidr_block=nat_subnet_cidr(args.vpc_cidr, args.subnet_cidr),
            availability_zone=args.availability_zone,
            map_public_ip_on_launch=False,
            tags={**tags, "Name": f"{name}-public"},
            opts=child,
        )
        public_routes = aws.ec2.RouteTable(
            f"{name}-public-routes",
            vpc_id=vpc.id,
            routes=[aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0", gateway_id=gateway.id)],
            tags={**tags, "Name": f"{name}-public-routes"},
            opts=child,
        )
        aws.ec2.RouteTableAssociation(
            f"{name}-public-routes-subnet",
            subnet_id=public.id,
            route_table_id=public_routes.id,
            opts=child,
        )
        address = aws.ec2.Eip(
            f"{name}-nat-ip", domain="vpc", tags={**tags, "Name": f"{name}-nat-ip"}, opts=child
        )
        return aws.ec2.NatGateway(
            f"{name}-nat",
            allocation_id=address.allocation_id,
            subnet_id=public.id,
            connectivity_type="public",
            tags={**tags, "Name": f"{name}-nat"},
            opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=[gateway])),
        )
