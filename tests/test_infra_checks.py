"""The security validators on hand-made resources: each finds what it should, and nothing
in a correct example."""

from __future__ import annotations

import json
from typing import Any

from brokers.sqs.cloud import CLIENT_ACTIONS
from infra import access_checks, checks, userdata_checks
from infra.access import analysis_s3_policy, client_managed_policy, client_s3_policy
from infra.checks import Declared
from infra.plan import BucketLayout

SG = "aws:ec2/securityGroup:SecurityGroup"
INGRESS = "aws:vpc/securityGroupIngressRule:SecurityGroupIngressRule"
INSTANCE = "aws:ec2/instance:Instance"
BUCKET = "aws:s3/bucket:Bucket"
LAYOUT = BucketLayout("run-1", "brokerbench-0.1.0-py3-none-any.whl")


def r(type_: str, name: str, id_: str = "", **inputs: Any) -> Declared:
    return Declared(type_, name, inputs, id_ or f"{name}-id", dict(inputs))


def policy(*statements: dict[str, Any]) -> str:
    return json.dumps({"Version": "2012-10-17", "Statement": list(statements)})


# -- ingress -----------------------------------------------------------------------------


def test_world_open_ingress_is_found_in_every_rule_style() -> None:
    resources = [
        r(INGRESS, "rule", securityGroupId="sg", cidrIpv4="0.0.0.0/0", ipProtocol="tcp"),
        r(INGRESS, "rule6", securityGroupId="sg", cidrIpv6="::/0", ipProtocol="-1"),
        r(SG, "inline", ingress=[{"cidrBlocks": ["0.0.0.0/0"], "protocol": "tcp"}]),
        r(
            "aws:ec2/securityGroupRule:SecurityGroupRule",
            "old",
            type="ingress",
            cidrBlocks=["0.0.0.0/0"],
        ),
    ]
    problems = checks.ingress_problems(resources)
    assert len(problems) == 4 and all("open to the world" in p for p in problems)


def test_ingress_from_the_group_or_the_admin_cidr_is_fine() -> None:
    resources = [
        r(INGRESS, "self", securityGroupId="sg", referencedSecurityGroupId="sg", ipProtocol="-1"),
        r(INGRESS, "ssh", securityGroupId="sg", cidrIpv4="203.0.113.0/24", ipProtocol="tcp"),
        r(SG, "sg", ingress=[{"self": True, "protocol": "-1"}]),
    ]
    assert checks.ingress_problems(resources, admin_cidr="203.0.113.0/24") == []
    assert checks.ingress_problems(resources) == [
        "ssh: ingress from 203.0.113.0/24, which is not the admin CIDR"
    ]
    # egress is no ingress
    assert (
        checks.ingress_problems(
            [
                r(
                    "aws:vpc/securityGroupEgressRule:SecurityGroupEgressRule",
                    "out",
                    cidrIpv4="0.0.0.0/0",
                )
            ]
        )
        == []
    )


def test_prefix_lists_count_as_outside_sources() -> None:
    rule = r(INGRESS, "pl", securityGroupId="sg", prefixListId="pl-123", ipProtocol="tcp")
    assert checks.ingress_problems([rule]) == [
        "pl: ingress from prefix list pl-123, which is not the admin CIDR"
    ]


# -- zones, instances --------------------------------------------------------------------


def test_more_than_one_zone_is_found() -> None:
    subnets = [
        r("aws:ec2/subnet:Subnet", "a", availabilityZone="eu-west-1a"),
        r("aws:ec2/subnet:Subnet", "b", availabilityZone="eu-west-1b"),
    ]
    instance = r(INSTANCE, "i", subnetId="a-id")
    assert "span 2 availability zones" in checks.availability_zone_problems([*subnets, instance])[0]
    assert checks.availability_zone_problems([subnets[0], instance]) == []
    assert checks.availability_zone_problems([subnets[0], r(INSTANCE, "j", subnetId="other")]) == [
        "j: not in a subnet of this stack"
    ]


def test_imdsv1_and_unencrypted_volumes_are_found() -> None:
    good = r(INSTANCE, "good", metadataOptions={"httpTokens": "required", "httpPutResponseHopLimit": 1},
             rootBlockDevice={"encrypted": True}, ebsBlockDevices=[{"deviceName": "/dev/sdf", "encrypted": True}])  # fmt: skip
    optional = r(
        INSTANCE,
        "v1",
        metadataOptions={"httpTokens": "optional"},
        rootBlockDevice={"encrypted": True},
    )
    unset = r(INSTANCE, "unset", rootBlockDevice={}, ebsBlockDevices=[{"deviceName": "/dev/sdf"}])
    assert checks.metadata_problems([good]) == [] and checks.volume_problems([good]) == []
    assert [p.split(":")[0] for p in checks.metadata_problems([good, optional, unset])] == [
        "v1",
        "unset",
    ]
    assert checks.volume_problems([unset]) == [
        "unset: root volume not encrypted", "unset: volume /dev/sdf not encrypted",
    ]  # fmt: skip


# -- buckets -----------------------------------------------------------------------------


def safe_bucket() -> list[Declared]:
    return [
        r(BUCKET, "results", "results-x1"),
        r("aws:s3/bucketServerSideEncryptionConfiguration:BucketServerSideEncryptionConfiguration", "sse",
          bucket="results-x1", rules=[{"applyServerSideEncryptionByDefault": {"sseAlgorithm": "AES256"}}]),
        r("aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock", "block", bucket="results-x1",
          blockPublicAcls=True, blockPublicPolicy=True, ignorePublicAcls=True, restrictPublicBuckets=True),
        r("aws:s3/bucketVersioning:BucketVersioning", "versions", bucket="results-x1",
          versioningConfiguration={"status": "Enabled"}),
    ]  # fmt: skip


def test_a_private_encrypted_versioned_bucket_passes() -> None:
    assert checks.bucket_problems(safe_bucket()) == []


def test_each_missing_bucket_protection_is_found() -> None:
    bucket, sse, block, versions = safe_bucket()
    assert checks.bucket_problems([bucket, block, versions]) == [
        "results: no default server-side encryption"
    ]
    half_block = r(block.type, "block", bucket="results-x1", blockPublicAcls=True)
    assert checks.bucket_problems([bucket, sse, half_block, versions]) == [
        "results: public access not fully blocked"
    ]
    assert checks.bucket_problems([bucket, sse, block]) == ["results: versioning not enabled"]
    public = r(BUCKET, "results", "results-x1", acl="public-read")
    assert checks.bucket_problems([public, sse, block, versions]) == [
        "results: public ACL public-read"
    ]
    other = r(sse.type, "sse", bucket="another-bucket", rules=sse.inputs["rules"])
    assert "results: no default server-side encryption" in checks.bucket_problems(
        [bucket, other, block, versions]
    )
    open_policy = r("aws:s3/bucketPolicy:BucketPolicy", "pol", bucket="results-x1",
                    policy=policy({"Effect": "Allow", "Principal": "*", "Action": "s3:GetObject", "Resource": "*"}))  # fmt: skip
    assert checks.bucket_problems([*safe_bucket(), open_policy]) == ["pol: allows anyone"]


# -- IAM ---------------------------------------------------------------------------------


def role_policy(name: str, document: str) -> Declared:
    return r("aws:iam/rolePolicy:RolePolicy", name, role="role", policy=document)


def test_the_stacks_own_policies_are_least_privilege() -> None:
    emr = r("aws:iam/role:Role", "emr", assumeRolePolicy=policy(
        {"Effect": "Allow", "Principal": {"Service": "emr-serverless.amazonaws.com"},
         "Action": "sts:AssumeRole"}))  # fmt: skip
    analysis = r("aws:iam/rolePolicy:RolePolicy", "analysis", role="emr-id",
                 policy=analysis_s3_policy("bkt"))  # fmt: skip
    resources = [
        role_policy("client", client_s3_policy("bkt", LAYOUT)),
        analysis,
        emr,
        role_policy("managed", client_managed_policy("arn:aws:sqs:eu-west-1:1:q-abc", CLIENT_ACTIONS)),
        r("aws:iam/role:Role", "role", assumeRolePolicy=policy(
            {"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"}, "Action": "sts:AssumeRole"})),
    ]  # fmt: skip
    assert access_checks.iam_problems(resources, "bkt", "run-1") == []
    # Only the analysis job's role reaches past its run: on a machine's role it is too wide.
    assert access_checks.iam_problems(
        [role_policy("client", analysis_s3_policy("bkt")), *resources[2:]], "bkt", "run-1"
    ) == [
        "client: may read arn:aws:s3:::bkt/runs/*, outside this run",
        "client: may read arn:aws:s3:::bkt/artifacts/*, outside this run",
        "client: may write arn:aws:s3:::bkt/runs/*/analysis/*, outside what it may write",
        "client: s3:ListBucket not limited to this run's prefixes",
    ]


def test_the_client_policy_allows_writing_only_its_run() -> None:
    document = json.loads(client_s3_policy("bkt", LAYOUT))
    writes = [s for s in document["Statement"] if "s3:PutObject" in s["Action"]]
    assert [s["Resource"] for s in writes] == ["arn:aws:s3:::bkt/runs/run-1/*"]
    # the same policy judged for another run is too wide
    assert access_checks.iam_problems([role_policy("client", json.dumps(document))], "bkt", "run-2")


def test_wide_grants_are_found() -> None:
    cases = {
        "star action": {
            "Effect": "Allow",
            "Action": "*",
            "Resource": "arn:aws:s3:::bkt/runs/run-1/*",
        },
        "service star": {
            "Effect": "Allow",
            "Action": "s3:*",
            "Resource": "arn:aws:s3:::bkt/runs/run-1/*",
        },
        "star resource": {"Effect": "Allow", "Action": "sqs:SendMessage", "Resource": "*"},
        "whole bucket": {
            "Effect": "Allow",
            "Action": "s3:PutObject",
            "Resource": "arn:aws:s3:::bkt/*",
        },
        "other run": {
            "Effect": "Allow",
            "Action": "s3:GetObject",
            "Resource": "arn:aws:s3:::bkt/runs/run-2/*",
        },
        "list all": {"Effect": "Allow", "Action": "s3:ListBucket", "Resource": "arn:aws:s3:::bkt"},
        "not action": {
            "Effect": "Allow",
            "NotAction": "iam:*",
            "Resource": "arn:aws:s3:::bkt/runs/run-1/x",
        },
    }
    for label, statement in cases.items():
        assert access_checks.iam_problems(
            [role_policy(label, policy(statement))], "bkt", "run-1"
        ), label
    deny = {"Effect": "Deny", "Action": "*", "Resource": "*"}
    assert access_checks.iam_problems([role_policy("deny", policy(deny))], "bkt", "run-1") == []


def test_roles_must_be_assumable_only_by_services_and_carry_no_managed_policies() -> None:
    anyone = r("aws:iam/role:Role", "open", assumeRolePolicy=policy(
        {"Effect": "Allow", "Principal": {"AWS": "*"}, "Action": "sts:AssumeRole"}))  # fmt: skip
    attached = r("aws:iam/rolePolicyAttachment:RolePolicyAttachment", "admin",
                 policyArn="arn:aws:iam::aws:policy/AdministratorAccess")  # fmt: skip
    problems = access_checks.iam_problems([anyone, attached], "bkt", "run-1")
    assert len(problems) == 2


# -- user-data ---------------------------------------------------------------------------


def test_cloud_config_structure_problems() -> None:
    assert userdata_checks.cloud_config_problems("#!/bin/bash\necho") == [
        "user-data does not start with '#cloud-config'"
    ]
    assert userdata_checks.cloud_config_problems("#cloud-config\n- a\n") == [
        "user-data is not a mapping"
    ]
    assert "unexpected top-level key 'runcmds'" in userdata_checks.cloud_config_problems(
        "#cloud-config\nruncmds: [x]\nruncmd: [x]\nntp: {enabled: true}\n"
    )
    assert userdata_checks.cloud_config_problems("#cloud-config\nruncmd: [x]\n") == [
        "time sync (ntp) not enabled"
    ]


def test_a_generated_secret_outside_its_secure_parameter_is_found() -> None:
    secret = "MockSecretabcdef0123456789abcdef"
    generated = Declared(
        "random:index/randomPassword:RandomPassword", "pw", {}, "pw", {"result": secret}
    )
    stored = Declared("aws:ssm/parameter:Parameter", "p", {"type": "SecureString", "value": secret})
    assert access_checks.secret_problems([generated, stored]) == []
    plain = Declared("aws:ssm/parameter:Parameter", "plain", {"type": "String", "value": secret})
    machine = Declared(
        "aws:ec2/instance:Instance", "m", {"userData": f"#cloud-config\nruncmd: [echo {secret}]"}
    )
    tagged = Declared("aws:s3/bucket:Bucket", "b", {"tags": {"note": secret}})
    assert access_checks.secret_problems([generated, plain, machine, tagged]) == [
        "plain: holds a generated secret as String",
        "m: a generated secret in userData",
        "b: a generated secret in tags",
    ]


def test_literal_credentials_in_user_data_are_found_and_deferred_ones_pass() -> None:
    def user_data(content: str) -> str:
        return (
            "#cloud-config\nwrite_files:\n  - path: /etc/x.conf\n    content: "
            + json.dumps(content)
            + "\n"
        )

    for literal in (
        "default_pass = guest",
        "requirepass hunter2",
        "artemis create --password brokerbench",
        'password: "abc"',
        "<cluster-password>brokerbench-cluster</cluster-password>",
    ):
        (problem,) = userdata_checks.user_data_credential_problems(user_data(literal))
        assert problem.startswith("/etc/x.conf: a literal credential"), literal
    for deferred in (
        "default_pass = @@BROKERBENCH_PASSWORD@@",
        'artemis create --password "$BROKERBENCH_PASSWORD"',
        "<cluster-password>@@BROKERBENCH_CLUSTER_SECRET@@</cluster-password>",
        "BROKERBENCH_PASSWORD=$(read_secret /brokerbench/run/password)",
    ):
        assert userdata_checks.user_data_credential_problems(user_data(deferred)) == [], deferred


# -- public addresses, gp3 throughput ----------------------------------------------------

SUBNET = "aws:ec2/subnet:Subnet"


def test_public_addresses_on_machines_are_found_unless_an_admin_cidr_needs_them() -> None:
    private = r(SUBNET, "nodes", mapPublicIpOnLaunch=False)
    public = r(SUBNET, "nat", mapPublicIpOnLaunch=True)  # hosts no machine: fine
    good = r(INSTANCE, "good", subnetId="nodes-id", associatePublicIpAddress=False)
    assert checks.public_ip_problems([private, public, good]) == []

    asks = r(INSTANCE, "asks", subnetId="nodes-id", associatePublicIpAddress=True)
    mapping = r(SUBNET, "mapping", mapPublicIpOnLaunch=True)
    hosted = r(INSTANCE, "hosted", subnetId="mapping-id")
    template = r("aws:ec2/launchTemplate:LaunchTemplate", "lt",
                 networkInterfaces=[{"associatePublicIpAddress": "true"}])  # fmt: skip
    eip = r("aws:ec2/eip:Eip", "eip", domain="vpc", instance="good-id")
    bad = [private, good, asks, mapping, hosted, template, eip]
    assert checks.public_ip_problems(bad) == [
        "asks: asks for a public IP (associatePublicIpAddress)",
        "lt.networkInterfaces[0]: asks for a public IP",
        "mapping: assigns public IPs on launch (mapPublicIpOnLaunch) and hosts 1 machine(s): hosted",
        "eip: attaches an Elastic IP to a machine",
    ]
    assert checks.public_ip_problems(bad, admin_cidr="203.0.113.0/24") == []


def test_gp3_data_volumes_must_declare_a_throughput_their_iops_allow() -> None:
    def machine(**device: Any) -> Declared:
        return r(INSTANCE, "m", rootBlockDevice={"encrypted": True, "volumeType": "gp3"},
                 ebsBlockDevices=[{"deviceName": "/dev/sdf", "encrypted": True, **device}])  # fmt: skip

    assert checks.volume_problems([machine(volumeType="gp3", iops=4000, throughput=1000)]) == []
    assert checks.volume_problems([machine(volumeType="io2", iops=4000)]) == []
    assert checks.volume_problems([machine(volumeType="gp3", iops=3000)]) == [
        "m: volume /dev/sdf: gp3 without a throughput (held to the 125 MiB/s baseline)"
    ]
    assert checks.volume_problems([machine(volumeType="gp3", throughput=1000)]) == [
        "m: volume /dev/sdf: gp3 throughput 1000 MiB/s is more than 3000 IOPS allow "
        "(0.25 MiB/s per IOPS)"
    ]
    volume = r("aws:ebs/volume:Volume", "data", type="gp3", iops=3000, encrypted=False)
    assert checks.volume_problems([volume]) == [
        "data: volume not encrypted",
        "data: gp3 without a throughput (held to the 125 MiB/s baseline)",
    ]


def test_burstable_and_unknown_instance_types_are_found() -> None:
    resources = [
        r(INSTANCE, "sustained", instanceType="r6i.8xlarge"),
        r(INSTANCE, "burst", instanceType="t3.large"),
        r(INSTANCE, "half", instanceType="r5.4xlarge"),  # sustained EBS, burst network
        r(INSTANCE, "unknown", instanceType="x9.huge"),
    ]
    assert checks.bandwidth_problems(resources) == [
        "burst: t3.large: network up to 5 Gbit/s, EBS up to 2,780 Mbit/s: burstable, "
        "a long sweep slows down when its credits run out",
        "half: r5.4xlarge: network up to 10 Gbit/s, EBS 4,750 Mbit/s: burstable, "
        "a long sweep slows down when its credits run out",
        "unknown: x9.huge: bandwidth unknown (not in infra/instances.py); "
        "it may be a burstable type",
    ]


def test_machines_outside_the_stacks_cluster_placement_group_are_found() -> None:
    kind = "aws:ec2/placementGroup:PlacementGroup"
    group = Declared(kind, "machines", {"strategy": "cluster"}, "g", {"name": "machines-1"})
    spread = Declared(kind, "other", {"strategy": "spread"}, "o", {"name": "o-1"})
    inside = r(INSTANCE, "broker-0", placementGroup="machines-1")
    assert checks.placement_problems([group, inside]) == []
    assert checks.placement_problems(
        [group, spread, inside, r(INSTANCE, "client-0"), r(INSTANCE, "c1", placementGroup="x")]
    ) == [
        "other: placement strategy 'spread', not 'cluster'",
        "client-0: in no placement group",
        "c1: placement group 'x' is not declared by the stack",
        "machines in 3 placement groups, not one",
    ]
