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
        # Every resource of the network is named ``<name>-<suffix>``, a child of it.
        self._prefix, self._base_tags = name, dict(args.tags or {})
        self._child = pulumi.ResourceOptions(parent=self)

        vpc = aws.ec2.Vpc(
            f"{name}-vpc",
            cidr_block=args.vpc_cidr,
            enable_dns_hostnames=True,
            enable_dns_support=True,
            tags=self._tags("vpc"),
            opts=self._child,
        )
        gateway = aws.ec2.InternetGateway(
            f"{name}-igw", vpc_id=vpc.id, tags=self._tags("igw"), opts=self._child
        )
        subnet = aws.ec2.Subnet(
            f"{name}-subnet",
            vpc_id=vpc.id,
            cidr_block=args.subnet_cidr,
            availability_zone=args.availability_zone,
            map_public_ip_on_launch=args.public_nodes,
            tags=self._tags("subnet"),
            opts=self._child,
        )
        if args.public_nodes:
            self.nat_gateway_id = None
            way_out = aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0", gateway_id=gateway.id)
        else:
            self.nat_gateway_id = self._nat_gateway(args, vpc, gateway).id
            way_out = aws.ec2.RouteTableRouteArgs(
                cidr_block="0.0.0.0/0", nat_gateway_id=self.nat_gateway_id
            )
        self.vpc_id = vpc.id
        # Machines take the subnet from here: they wait for its routes (with the NAT
        # gateway) and the S3 endpoint, so that they never boot without a way out.
        self.subnet_id = self._routed_subnet(args, vpc, subnet, way_out)
        self.security_group_id = self._security_group(args, vpc).id
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

    def _tags(self, suffix: str) -> dict[str, str]:
        """The stack's tags, with the ``Name`` of the resource ``<name>-<suffix>``."""
        return {**self._base_tags, "Name": f"{self._prefix}-{suffix}"}

    def _route_table(
        self,
        suffix: str,
        vpc: aws.ec2.Vpc,
        subnet: aws.ec2.Subnet,
        route: aws.ec2.RouteTableRouteArgs,
    ) -> tuple[aws.ec2.RouteTable, aws.ec2.RouteTableAssociation]:
        """The route table ``<name>-<suffix>`` with ``route``, and its association with
        ``subnet``."""
        routes = aws.ec2.RouteTable(
            f"{self._prefix}-{suffix}",
            vpc_id=vpc.id,
            routes=[route],
            tags=self._tags(suffix),
            opts=self._child,
        )
        association = aws.ec2.RouteTableAssociation(
            f"{self._prefix}-{suffix}-subnet",
            subnet_id=subnet.id,
            route_table_id=routes.id,
            opts=self._child,
        )
        return routes, association

    def _routed_subnet(
        self,
        args: NetworkArgs,
        vpc: aws.ec2.Vpc,
        subnet: aws.ec2.Subnet,
        way_out: aws.ec2.RouteTableRouteArgs,
    ) -> pulumi.Output[str]:
        """The nodes' routes: ``way_out`` (internet or NAT gateway) and the S3 gateway
        endpoint; the subnet's id, known once both are in place."""
        routes, association = self._route_table("routes", vpc, subnet, way_out)
        endpoint = aws.ec2.VpcEndpoint(
            f"{self._prefix}-s3",
            vpc_id=vpc.id,
            service_name=f"com.amazonaws.{args.region}.s3",
            vpc_endpoint_type="Gateway",
            route_table_ids=[routes.id],
            tags=self._tags("s3"),
            opts=self._child,
        )
        return pulumi.Output.all(subnet.id, association.id, endpoint.id).apply(
            lambda ids: str(ids[0])
        )

    def _security_group(self, args: NetworkArgs, vpc: aws.ec2.Vpc) -> aws.ec2.SecurityGroup:
        """The nodes' group: any traffic inside it, SSH from the admin CIDR (if any), any
        egress."""
        name, child = self._prefix, self._child
        group = aws.ec2.SecurityGroup(
            f"{name}-nodes",
            vpc_id=vpc.id,
            description="brokerbench nodes: all traffic inside the group only",
            tags=self._tags("nodes"),
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

    def _nat_gateway(
        self, args: NetworkArgs, vpc: aws.ec2.Vpc, gateway: aws.ec2.InternetGateway
    ) -> aws.ec2.NatGateway:
        """A NAT gateway with an Elastic IP in a /28 public subnet routed to the internet
        gateway (a CIDR of the VPC that does not overlap the nodes' subnet)."""
        name, child = self._prefix, self._child
        public = aws.ec2.Subnet(
            f"{name}-public",
            vpc_id=vpc.id,
            cidr_block=nat_subnet_cidr(args.vpc_cidr, args.subnet_cidr),
            availability_zone=args.availability_zone,
            map_public_ip_on_launch=False,
            tags=self._tags("public"),
            opts=child,
        )
        self._route_table(
            "public-routes",
            vpc,
            public,
            aws.ec2.RouteTableRouteArgs(cidr_block="0.0.0.0/0", gateway_id=gateway.id),
        )
        address = aws.ec2.Eip(f"{name}-nat-ip", domain="vpc", tags=self._tags("nat-ip"), opts=child)
        return aws.ec2.NatGateway(
            f"{name}-nat",
            allocation_id=address.allocation_id,
            subnet_id=public.id,
            connectivity_type="public",
            tags=self._tags("nat"),
            opts=pulumi.ResourceOptions.merge(child, pulumi.ResourceOptions(depends_on=[gateway])),
        )
