"""Every stack under Pulumi's mocks: the machines match the topology and the scenario, and
the security validators find nothing. Also the program entry point and the stack config."""

from __future__ import annotations

import ipaddress
import json
import runpy
import tomllib
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

import pulumi
import pytest

from analysis.prices import load_prices
from brokers import registry
from brokers.base import Endpoints
from brokers.cloud import BROKER_PASSWORD, CLUSTER_SECRET, CloudRecipe, ManagedService
from infra import access_checks, checks, pyenv, userdata_checks
from infra.checks import Declared
from infra.constraints import client_constraints
from infra.mocking import AMI, ZONES, deploy
from infra.network import Network, NetworkArgs
from infra.plan import plan_fleet
from infra.program import Deployment, build, fleet_composition
from infra.settings import (
    ROOT,
    StackConfigError,
    StackSettings,
    deprecations,
    load_stack_config,
    nat_subnet_cidr,
    settings_from_config,
)
from workload.model.scenario import expand
from workload.model.scenario_file import load_scenario, parse_scenario

pytestmark = pytest.mark.filterwarnings(
    "ignore:.*has been deprecated in favor of:DeprecationWarning"  # pulumi_aws's own aliases
)
STACK_FILES = sorted((ROOT / "stacks").glob("Pulumi.*.yaml"))
STACKS = {path.name.split(".")[1]: path for path in STACK_FILES}
EXPECTED_STACKS = {
    "kafka", "kmq", "redpanda", "rabbitmq", "artemis", "activemq", "pulsar", "rocketmq",
    "nats", "redis", "redis-cluster", "postgresql", "mongodb", "sqs", "eventstore",
}  # fmt: skip
REGION = "eu-west-1"


@pytest.fixture(autouse=True)
def no_packed_python(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No interpreter uv keeps on this machine is packed for the analysis job (a test that
    wants the packed environment names its own)."""
    monkeypatch.setattr(pyenv, "UV_PYTHONS", tmp_path / "no-uv-pythons")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("dist") / "brokerbench-0.1.0-py3-none-any.whl"
    path.write_bytes(b"PK\x05\x06" + b"\0" * 18)
    return path


def with_recipes(monkeypatch: pytest.MonkeyPatch) -> None:
    """The reference systems with their cloud recipes, also before they are exported."""
    from brokers.postgresql.cloud import PostgresCloud
    from brokers.redis.cloud import RedisCloud

    systems = dict(registry.systems())
    for name, recipe in (("postgresql", PostgresCloud()), ("redis", RedisCloud())):
        if name in systems and systems[name].cloud is None:
            systems[name] = replace(systems[name], cloud=recipe)
    monkeypatch.setattr(registry, "get", lambda name: _get(systems, name))


def _get(systems: dict[str, Any], name: str) -> Any:
    try:
        return systems[name]
    except KeyError:
        raise registry.UnknownSystem(name, list(systems)) from None


def deployable(name: str) -> StackSettings:
    """The stack's settings, its machine image pinned (as ``brokerbench cloud ami`` would)."""
    settings = load_stack_config(STACKS[name]).settings.model_copy(update={"ami": AMI})
    if settings.system not in registry.systems():
        pytest.skip(f"stack {name}: system {settings.system!r} is not in the registry yet")
    if not settings.scenario_path().exists():
        pytest.skip(f"stack {name}: scenario {settings.scenario} does not exist yet")
    return settings


_DEPLOYED: dict[tuple[str, str], tuple[Deployment, list[Declared]]] = {}


def deploy_stack(
    name: str, settings: StackSettings, wheel: Path
) -> tuple[Deployment, list[Declared]]:
    """The stack under mocks (deployed once per module for the same settings)."""
    key = (name, settings.model_dump_json())
    if key not in _DEPLOYED:
        _DEPLOYED[key] = deploy(lambda: build(settings, name, REGION, wheel=wheel), stack=name)
    return _DEPLOYED[key]


def instances(resources: list[Declared]) -> list[Declared]:
    return checks.of_type(resources, "ec2/instance:Instance")


def role_of(instance: Declared) -> str:
    return str(instance.inputs["tags"]["brokerbench:role"])


def test_there_is_a_stack_per_system() -> None:
    assert set(STACKS) == EXPECTED_STACKS


@pytest.mark.parametrize("name", sorted(STACKS))
def test_stack_config_parses(name: str) -> None:
    settings = load_stack_config(STACKS[name]).settings
    assert settings.scenario.as_posix() == f"workload/scenarios/{name}-sweep.toml"
    assert settings.broker_instance_type == "r6i.8xlarge"
    assert settings.client_instance_type == "c6i.8xlarge"
    assert settings.admin_cidr is None


@pytest.mark.parametrize("name", sorted(STACKS))
def test_stack_deploys_safely(name: str, wheel: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with_recipes(monkeypatch)
    settings = deployable(name)
    system = registry.get(settings.system)
    scenario = load_scenario(settings.scenario_path())
    points = expand(scenario)
    deployment, resources = deploy_stack(name, settings, wheel)

    # Broker machines: the topology's roles and counts, the broker instance type.
    roles = settings.roles if settings.roles is not None else system.reference_topology.roles
    machines = instances(resources)
    brokers = [m for m in machines if role_of(m) not in ("sender", "receiver")]
    assert Counter(role_of(m) for m in brokers) == Counter(
        {role: count for role, count in roles.items() if count}
    )
    assert {m.inputs["instanceType"] for m in brokers} <= {settings.broker_instance_type}
    assert all(
        m.inputs["ebsBlockDevices"][0]["volumeSize"] == settings.data_volume_gib for m in brokers
    )

    # Client machines: enough for the largest sweep point.
    clients = Counter(role_of(m) for m in machines if role_of(m) in ("sender", "receiver"))
    assert clients["sender"] == max(p.load.sender_nodes for p in points)
    assert clients["receiver"] == max(p.receiver_nodes for p in points)
    assert {m.inputs["instanceType"] for m in machines if m not in brokers} == {
        settings.client_instance_type
    }

    # One availability zone, nothing open to the world, IMDSv2, private encrypted bucket,
    # IAM scoped to this run.
    assert checks.availability_zone_problems(resources) == []
    assert {
        s.inputs["availabilityZone"] for s in checks.of_type(resources, "ec2/subnet:Subnet")
    } == {ZONES[0]}
    assert checks.ingress_problems(resources) == []
    assert checks.metadata_problems(resources) == []
    assert checks.volume_problems(resources) == []
    assert checks.public_ip_problems(resources, settings.admin_cidr) == []
    assert checks.bucket_problems(resources) == []
    assert checks.kept_bucket_problems(resources) == []
    assert checks.fixed_address_problems(resources) == []
    # Sustained network and EBS bandwidth, every machine in the cluster placement group.
    assert checks.bandwidth_problems(resources) == []
    assert checks.placement_problems(resources) == []
    assert len(checks.of_type(resources, "ec2/placementGroup:PlacementGroup")) == 1
    (bucket,) = checks.of_type(resources, "s3/bucket:Bucket")
    assert access_checks.iam_problems(resources, bucket.id, deployment.run_id) == []
    assert len(checks.of_type(resources, "emrserverless/application:Application")) == 1
    queues = checks.of_type(resources, "sqs/queue:Queue")
    managed = system.cloud.managed if system.cloud is not None else None
    assert len(queues) == (1 if managed is not None else 0)

    # Every machine's user-data: within EC2's 16 KiB with 4 KiB to spare, well-formed, names
    # the run and the scenario; the machine powers itself off after the stack's time to
    # live, and then stops (not terminated).
    assert userdata_checks.size_problems({m.name: m.inputs["userData"] for m in machines}) == []
    for machine in machines:
        text = machine.inputs["userData"]
        assert userdata_checks.cloud_config_problems(text) == [], machine.name
        assert deployment.run_id in text and scenario.name in text, machine.name
        timer = userdata_checks.written_files(text)["/etc/systemd/system/brokerbench-ttl.timer"]
        assert f"OnBootSec={settings.ttl_hours}h" in timer, machine.name
        assert "[systemctl, enable, --now, brokerbench-ttl.timer]" in text, machine.name
        assert machine.inputs["instanceInitiatedShutdownBehavior"] == "stop", machine.name
    for machine in machines:
        if role_of(machine) in ("sender", "receiver"):
            toml_text = userdata_checks.written_files(machine.inputs["userData"])[
                "/etc/brokerbench/scenario.toml"
            ]
            client = parse_scenario(tomllib.loads(toml_text))
            assert client.broker.deployment == "endpoints"
            assert client.load == scenario.load and client.sweep == scenario.sweep


@pytest.mark.parametrize("name", sorted(STACKS))
def test_every_rendered_user_data_passes_cloud_init_schema(
    name: str, wheel: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if userdata_checks.cloud_init_schema("#cloud-config\n{}\n") is None:
        pytest.skip("cloud-init is not installed (apt-get install cloud-init; make setup does)")
    with_recipes(monkeypatch)
    settings = deployable(name)
    _, resources = deploy_stack(name, settings, wheel)
    texts = {m.inputs["userData"]: m.name for m in instances(resources)}
    results = userdata_checks.cloud_init_schema_batch(list(texts))
    assert results is not None
    assert {
        machine: errors for machine, errors in zip(texts.values(), results, strict=True) if errors
    } == {}
    # the command itself, on the first broker node and the first client
    samples = [next(iter(texts))] + [t for t, m in texts.items() if "sender-0" in m]
    assert [userdata_checks.cloud_init_schema(text) for text in samples] == [[]] * len(samples)


def test_reference_systems_get_their_recipes_and_endpoints(
    wheel: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with_recipes(monkeypatch)
    settings = deployable("postgresql")
    deployment, resources = deploy_stack("postgresql", settings, wheel)
    assert not deployment.placeholder
    assert deployment.broker_nodes == {
        "primary-0": "10.42.1.10", "standby-0": "10.42.1.11", "standby-1": "10.42.1.12",
    }  # fmt: skip
    primary = next(m for m in instances(resources) if m.name == "brokers-primary-0")
    files = userdata_checks.written_files(primary.inputs["userData"])
    assert (
        "synchronous_standby_names = 'ANY 1 (s1, s2)'"
        in files["/opt/brokerbench/files/etc/postgresql/15/main/conf.d/brokerbench.conf"]
    )
    sender = next(m for m in instances(resources) if m.name == "clients-sender-0")
    scenario_toml = userdata_checks.written_files(sender.inputs["userData"])[
        "/etc/brokerbench/scenario.toml"
    ]
    broker = tomllib.loads(scenario_toml)["broker"]
    assert broker["endpoints"] == ["10.42.1.10:5432", "10.42.1.11:5432", "10.42.1.12:5432"]
    assert broker["options"] == {"dbname": "postgres", "user": "postgres"}


def test_stack_uploads_the_client_constraints_the_clients_install_with(
    wheel: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with_recipes(monkeypatch)
    settings = deployable("redis")
    deployment, resources = deploy_stack("redis", settings, wheel)
    objects = {
        o.inputs["key"]: o.inputs
        for o in checks.of_type(resources, "s3/bucketObjectv2:BucketObjectv2")
    }
    key = deployment.layout.constraints_key
    assert key == f"artifacts/{deployment.run_id}/constraints.txt"
    text = objects[key]["content"]
    assert text == client_constraints().text()
    assert "\nredis==" in text and "\npyspark" not in text and "\npulumi" not in text
    (bucket,) = checks.of_type(resources, "s3/bucket:Bucket")
    for machine in instances(resources):
        if role_of(machine) in ("sender", "receiver"):
            script = userdata_checks.written_files(machine.inputs["userData"])[
                "/opt/brokerbench/client.sh"
            ]
            assert f"fetch s3://{bucket.id}/{key}\n" in script, machine.name
            assert "pip install --quiet -c /opt/brokerbench/constraints.txt " in script


def test_a_system_without_recipe_gets_failing_placeholders(
    wheel: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    systems = {n: s for n, s in registry.systems().items()}
    systems["postgresql"] = replace(systems["postgresql"], cloud=None)
    monkeypatch.setattr(registry, "get", lambda name: _get(systems, name))
    settings = deployable("postgresql")
    deployment, resources = deploy(lambda: build(settings, "postgresql", REGION, wheel=wheel))
    assert deployment.placeholder
    for machine in instances(resources):
        script = "\n".join(userdata_checks.written_files(machine.inputs["userData"]).values())
        assert "postgresql has no cloud recipe yet" in script and "exit 1" in script


def test_admin_cidr_opens_ssh_only_from_there(wheel: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with_recipes(monkeypatch)
    settings = deployable("redis").model_copy(update={"admin_cidr": "203.0.113.0/24"})
    _, resources = deploy_stack("redis", settings, wheel)
    rules = checks.of_type(resources, "vpc/securityGroupIngressRule:SecurityGroupIngressRule")
    outside = [r.inputs for r in rules if r.inputs.get("cidrIpv4")]
    assert outside == [
        {
            **outside[0],
            "cidrIpv4": "203.0.113.0/24",
            "fromPort": 22,
            "toPort": 22,
            "ipProtocol": "tcp",
        }
    ]
    assert checks.ingress_problems(resources, admin_cidr="203.0.113.0/24") == []
    assert checks.ingress_problems(resources) != []  # without an admin CIDR it would be a leak


def test_redis_cluster_stack_shards(wheel: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with_recipes(monkeypatch)
    settings = load_stack_config(STACKS["redis-cluster"]).settings.model_copy(
        update={"scenario": ROOT / "workload/scenarios/redis-sweep.toml", "ami": AMI}
    )
    if not settings.scenario_path().exists():
        pytest.skip("workload/scenarios/redis-sweep.toml does not exist")
    _, resources = deploy_stack("redis-cluster", settings, wheel)
    assert Counter(role_of(m) for m in instances(resources) if m.name.startswith("brokers-")) == {
        "master": 3, "replica": 6,
    }  # fmt: skip
    last = next(m for m in instances(resources) if m.name == "brokers-replica-5")
    script = userdata_checks.written_files(last.inputs["userData"])["/opt/brokerbench/node.sh"]
    assert "--cluster create" in script and "--cluster-replicas 2" in script


def test_program_entry_point_reads_the_stack_config(
    wheel: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with_recipes(monkeypatch)
    deployable("postgresql")
    import yaml

    config = {
        key: json.dumps(value) if isinstance(value, dict | list | bool) else str(value)
        for key, value in yaml.safe_load(STACKS["postgresql"].read_text())["config"].items()
    }
    config["brokerbench:wheel"] = str(wheel)
    config["brokerbench:ami"] = AMI
    config["brokerbench:allowDirty"] = "true"  # whatever state this checkout is in
    config["brokerbench:runId"] = "pg-entry-1"
    exported: dict[str, Any] = {}
    import pulumi

    monkeypatch.setattr(pulumi, "export", lambda key, value: exported.__setitem__(key, value))
    _, resources = deploy(
        lambda: runpy.run_path(str(ROOT / "stacks" / "__main__.py")), "postgresql", config
    )
    assert exported["run_id"] == "pg-entry-1"
    assert {"bucket", "broker_endpoints", "emr_application_id", "results_uri"} <= set(exported)
    assert len(instances(resources)) == 3 + 4 + 8


def test_config_typos_and_world_open_access_are_rejected() -> None:
    base = {"brokerbench:system": "redis", "brokerbench:scenario": "x.toml"}
    with pytest.raises(StackConfigError, match="brokerInstanceTyp: unknown key"):
        settings_from_config({**base, "brokerbench:brokerInstanceTyp": "r5.large"})
    with pytest.raises(StackConfigError, match="whole internet"):
        settings_from_config({**base, "brokerbench:adminCidr": "0.0.0.0/0"})
    with pytest.raises(StackConfigError, match="runId"):
        settings_from_config({**base, "brokerbench:runId": "Has Spaces"})
    parsed = settings_from_config({**base, "brokerbench:roles": '{"master": 3, "replica": 6}',
                                   "aws:region": "x"})  # fmt: skip
    assert parsed.roles == {"master": 3, "replica": 6} and deprecations(parsed) == []


def test_the_old_managed_queue_key_is_accepted_with_one_line_saying_it_is_ignored() -> None:
    base = {"brokerbench:system": "sqs", "brokerbench:scenario": "x.toml"}
    for value in ("true", "false"):
        settings = settings_from_config({**base, "brokerbench:managedQueue": value})
        assert deprecations(settings) == [
            "brokerbench:managedQueue is deprecated and ignored: the system's cloud recipe "
            "says whether the stack creates a managed service; remove it from the stack"
        ]


def test_scenario_of_another_system_is_rejected(
    wheel: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with_recipes(monkeypatch)
    settings = deployable("postgresql").model_copy(update={"system": "redis"})
    with pytest.raises(StackConfigError, match="not redis"):
        build(settings, "x", REGION, wheel=wheel)


def test_burstable_types_are_found_and_the_placement_group_can_be_left_out(
    wheel: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with_recipes(monkeypatch)
    settings = deployable("redis").model_copy(
        update={"client_instance_type": "c5.2xlarge", "placement_group": False}
    )
    _, resources = deploy(lambda: build(settings, "redis", REGION, wheel=wheel))
    clients = [m.name for m in instances(resources) if m.name.startswith("clients-")]
    assert clients
    assert checks.bandwidth_problems(resources) == [
        f"{name}: c5.2xlarge: network up to 10 Gbit/s, EBS up to 4,750 Mbit/s: burstable, "
        "a long sweep slows down when its credits run out"
        for name in clients
    ]
    assert checks.of_type(resources, "ec2/placementGroup:PlacementGroup") == []
    assert all(f"{m.name}: in no placement group" in checks.placement_problems(resources)
               for m in instances(resources))  # fmt: skip


def test_the_time_to_live_is_the_stacks_or_none(
    wheel: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with_recipes(monkeypatch)
    for ttl in (3, 0):
        settings = deployable("redis").model_copy(update={"ttl_hours": ttl})
        _, resources = deploy(lambda s=settings: build(s, "redis", REGION, wheel=wheel))
        for machine in instances(resources):
            text = machine.inputs["userData"]
            files = userdata_checks.written_files(text)
            assert userdata_checks.cloud_config_problems(text) == []
            if ttl:
                timer = files["/etc/systemd/system/brokerbench-ttl.timer"]
                assert "OnBootSec=3h" in timer
                service = files["/etc/systemd/system/brokerbench-ttl.service"]
                assert "ExecStart=/usr/bin/systemctl poweroff" in service
            else:
                assert "brokerbench-ttl" not in text
    with pytest.raises(StackConfigError, match="brokerbench:ttlHours"):
        settings_from_config({"brokerbench:system": "redis", "brokerbench:scenario": "x.toml",
                              "brokerbench:ttlHours": "200"})  # fmt: skip


def test_emr_custom_image_and_sizes_reach_the_resources(
    wheel: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with_recipes(monkeypatch)
    image = "123456789012.dkr.ecr.eu-west-1.amazonaws.com/brokerbench-emr:7.5.0"
    settings = deployable("redis").model_copy(
        update={"emr_image": image, "broker_instance_type": "r5.large", "data_volume_gib": 50}
    )
    _, resources = deploy(lambda: build(settings, "redis", REGION, wheel=wheel))
    (app,) = checks.of_type(resources, "emrserverless/application:Application")
    assert app.inputs["imageConfiguration"] == {"imageUri": image}
    brokers = [m for m in instances(resources) if m.name.startswith("brokers-")]
    assert {m.inputs["instanceType"] for m in brokers} == {"r5.large"}
    assert {m.inputs["ebsBlockDevices"][0]["volumeSize"] for m in brokers} == {50}


@pytest.mark.parametrize("name", sorted(STACKS))
def test_stack_secrets_are_generated_and_never_in_user_data(
    name: str, wheel: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with_recipes(monkeypatch)
    settings = deployable(name)
    deployment, resources = deploy_stack(name, settings, wheel)
    assert access_checks.secret_problems(resources) == []
    machines = instances(resources)
    for machine in machines:
        assert userdata_checks.user_data_credential_problems(machine.inputs["userData"]) == [], (
            machine.name
        )
    brokers = [m for m in machines if role_of(m) not in ("sender", "receiver")]
    parameters = checks.of_type(resources, "ssm/parameter:Parameter")
    if not brokers:
        assert parameters == []
        return
    assert {p.inputs["type"] for p in parameters} == {"SecureString"}
    assert sorted(p.inputs["name"] for p in parameters) == [
        f"/brokerbench/{deployment.run_id}/{secret.name}"
        for secret in (CLUSTER_SECRET, BROKER_PASSWORD)
    ]
    arns = {p.inputs["name"].rsplit("/", 1)[1]: p.outputs["arn"] for p in parameters}
    grants = {
        policy.name: set(access_checks.as_list(statement["Resource"]))
        for policy in checks.of_type(resources, "iam/rolePolicy:RolePolicy")
        for statement in checks.statements(policy.inputs["policy"])
        if "ssm:GetParameter" in access_checks.as_list(statement["Action"])
    }
    assert grants == {
        "access-client-secrets": {arns[BROKER_PASSWORD.name]},  # clients: the password only
        "access-broker-secrets": set(arns.values()),
    }
    (broker_profile,) = [
        p
        for p in checks.of_type(resources, "iam/instanceProfile:InstanceProfile")
        if p.name == "access-broker"
    ]
    assert {m.inputs.get("iamInstanceProfile") for m in brokers} == {broker_profile.outputs["name"]}
    for machine in brokers:
        script = userdata_checks.written_files(machine.inputs["userData"])[
            "/opt/brokerbench/node.sh"
        ]
        for secret in (BROKER_PASSWORD, CLUSTER_SECRET):
            assert f"read_secret /brokerbench/{deployment.run_id}/{secret.name}" in script


# -- network: private nodes, NAT gateway, S3 endpoint; data volume throughput ----------------


def routes_by_subnet(resources: list[Declared]) -> dict[str, list[dict[str, Any]]]:
    """Subnet id → the routes of its route table."""
    tables = {t.id: t for t in checks.of_type(resources, "ec2/routeTable:RouteTable")}
    return {
        a.inputs["subnetId"]: tables[a.inputs["routeTableId"]].inputs["routes"]
        for a in checks.of_type(resources, "ec2/routeTableAssociation:RouteTableAssociation")
    }


@pytest.mark.parametrize("name", sorted(STACKS))
def test_stack_nodes_are_private_behind_a_nat_gateway(
    name: str, wheel: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with_recipes(monkeypatch)
    settings = deployable(name)
    _, resources = deploy_stack(name, settings, wheel)
    machines = instances(resources)
    assert checks.public_ip_problems(resources) == []
    assert {m.inputs["associatePublicIpAddress"] for m in machines} == {False}

    # The nodes' subnet: the configured CIDR (the planned addresses), no public IPs, its
    # default route through the NAT gateway.
    subnets = {s.id: s.inputs for s in checks.of_type(resources, "ec2/subnet:Subnet")}
    (nodes,) = {m.inputs["subnetId"] for m in machines}
    assert subnets[nodes]["cidrBlock"] == settings.subnet_cidr
    assert subnets[nodes]["mapPublicIpOnLaunch"] is False
    routes = routes_by_subnet(resources)
    (nat,) = checks.of_type(resources, "ec2/natGateway:NatGateway")
    assert routes[nodes] == [{"cidrBlock": "0.0.0.0/0", "natGatewayId": nat.id}]

    # The NAT gateway: an Elastic IP, in a small public subnet of the VPC beside the nodes'.
    (address,) = checks.of_type(resources, "ec2/eip:Eip")
    assert address.inputs["domain"] == "vpc"
    assert nat.inputs["allocationId"] == address.outputs["allocationId"]
    (gateway,) = checks.of_type(resources, "ec2/internetGateway:InternetGateway")
    public = nat.inputs["subnetId"]
    assert routes[public] == [{"cidrBlock": "0.0.0.0/0", "gatewayId": gateway.id}]
    cidr = ipaddress.ip_network(subnets[public]["cidrBlock"])
    assert cidr.subnet_of(ipaddress.ip_network(settings.vpc_cidr))  # type: ignore[arg-type]
    assert not cidr.overlaps(ipaddress.ip_network(settings.subnet_cidr))
    assert subnets[public]["availabilityZone"] == subnets[nodes]["availabilityZone"]

    # S3 through a gateway endpoint on the nodes' route table.
    (endpoint,) = checks.of_type(resources, "ec2/vpcEndpoint:VpcEndpoint")
    assert endpoint.inputs["vpcEndpointType"] == "Gateway"
    assert endpoint.inputs["serviceName"] == f"com.amazonaws.{REGION}.s3"
    (association,) = [
        a
        for a in checks.of_type(resources, "ec2/routeTableAssociation:RouteTableAssociation")
        if a.inputs["subnetId"] == nodes
    ]
    assert endpoint.inputs["routeTableIds"] == [association.inputs["routeTableId"]]

    # Broker disks: the provisioned gp3 throughput, not the 125 MiB/s baseline.
    for machine in machines:
        for device in machine.inputs.get("ebsBlockDevices") or []:
            assert device["volumeType"] == settings.data_volume_type == "gp3"
            assert device["throughput"] == settings.data_volume_throughput == 1000
            assert device["iops"] == settings.data_volume_iops == 4000


def test_with_an_admin_cidr_nodes_get_public_ips_and_no_nat_gateway(
    wheel: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with_recipes(monkeypatch)
    settings = deployable("redis").model_copy(update={"admin_cidr": "203.0.113.0/24"})
    _, resources = deploy_stack("redis", settings, wheel)
    machines = instances(resources)
    assert {m.inputs["associatePublicIpAddress"] for m in machines} == {True}
    assert checks.public_ip_problems(resources, admin_cidr="203.0.113.0/24") == []
    assert checks.public_ip_problems(resources) != []  # without an admin CIDR it would be a leak
    (subnet,) = checks.of_type(resources, "ec2/subnet:Subnet")
    assert subnet.inputs["mapPublicIpOnLaunch"] is True
    (gateway,) = checks.of_type(resources, "ec2/internetGateway:InternetGateway")
    assert routes_by_subnet(resources)[subnet.id] == [
        {"cidrBlock": "0.0.0.0/0", "gatewayId": gateway.id}
    ]
    assert checks.of_type(resources, "ec2/natGateway:NatGateway", "ec2/eip:Eip") == []
    assert len(checks.of_type(resources, "ec2/vpcEndpoint:VpcEndpoint")) == 1


def test_machines_wait_for_the_nat_route_and_the_s3_endpoint() -> None:
    """Instances take ``network.subnet_id``: it carries the route table association (whose
    routes name the NAT gateway) and the S3 endpoint, so no machine boots without them."""
    found: list[str] = []

    class Program:
        def __init__(self) -> None:
            network = Network("net", NetworkArgs("10.42.0.0/16", "10.42.1.0/24", ZONES[0], REGION))
            self.subnet_id = network.subnet_id

        async def dependencies(self) -> None:
            for resource in await self.subnet_id.resources():
                found.append(str(await resource.urn.future()).rsplit("::", 1)[-1])

        def exports(self) -> dict[str, Any]:
            return {"dependencies": pulumi.Output.from_input(self.dependencies())}

    _, resources = deploy(Program)
    assert sorted(found) == ["net-routes-subnet", "net-s3", "net-subnet"]
    (association,) = [r for r in resources if r.name == "net-routes-subnet"]
    (table,) = [r for r in resources if r.id == association.inputs["routeTableId"]]
    (nat,) = checks.of_type(resources, "ec2/natGateway:NatGateway")
    assert table.inputs["routes"] == [{"cidrBlock": "0.0.0.0/0", "natGatewayId": nat.id}]


def parse(source: str = "stack config", **keys: str) -> StackSettings:
    base = {"brokerbench:system": "redis", "brokerbench:scenario": "x.toml"}
    return settings_from_config(
        {**base, **{f"brokerbench:{key}": value for key, value in keys.items()}}, source
    )


def test_data_volume_throughput_defaults_and_the_aws_rules() -> None:
    volume = parse()
    assert (volume.data_volume_type, volume.data_volume_throughput, volume.data_volume_iops) == (
        "gp3", 1000, 4000,
    )  # fmt: skip
    assert parse(dataVolumeThroughput="500").data_volume_iops == 3000
    assert parse(dataVolumeThroughput="600", dataVolumeIops="6000").data_volume_iops == 6000
    io2 = parse(dataVolumeType="io2")
    assert (io2.data_volume_throughput, io2.data_volume_iops) == (None, 3000)
    with pytest.raises(
        StackConfigError,
        match=r"^stacks/Pulumi\.x\.yaml: brokerbench:dataVolumeThroughput: 1000 MiB/s \(the "
        r"default\) needs brokerbench:dataVolumeIops ≥ 4000 .* it is 3000: .* at most 750$",
    ):
        parse("stacks/Pulumi.x.yaml", dataVolumeIops="3000")
    with pytest.raises(StackConfigError, match=r"dataVolumeThroughput: 800 MiB/s needs"):
        parse(dataVolumeThroughput="800", dataVolumeIops="3000")
    with pytest.raises(StackConfigError, match="only gp3 volumes take a throughput"):
        parse(dataVolumeType="io2", dataVolumeThroughput="500")
    for value in ("124", "1001"):
        with pytest.raises(StackConfigError, match="brokerbench:dataVolumeThroughput: "):
            parse(dataVolumeThroughput=value)


def test_the_nat_subnet_fits_beside_the_nodes_or_the_config_is_rejected() -> None:
    assert nat_subnet_cidr("10.42.0.0/16", "10.42.1.0/24") == "10.42.255.240/28"
    assert nat_subnet_cidr("10.42.0.0/16", "10.42.128.0/17") == "10.42.0.0/28"
    with pytest.raises(
        StackConfigError,
        match=r"brokerbench:vpcCidr: 10\.9\.0\.0/24 has no room for the NAT gateway's /28 subnet",
    ):
        parse(vpcCidr="10.9.0.0/24", subnetCidr="10.9.0.0/24")
    # public nodes (an admin CIDR) need no NAT gateway, hence no room for one
    assert parse(vpcCidr="10.9.0.0/24", subnetCidr="10.9.0.0/24", adminCidr="203.0.113.7/32")
    with pytest.raises(
        StackConfigError,
        match=r"brokerbench:subnetCidr: 10\.8\.1\.0/24 is not inside brokerbench:vpcCidr",
    ):
        parse(vpcCidr="10.9.0.0/16", subnetCidr="10.8.1.0/24")


# -- the EC2 vCPU quota each stack needs -------------------------------------------------

#: vCPUs of the instance types the stacks use (the price table's vCPU column).
VCPUS = load_prices().vcpus


def quota_rows() -> list[str]:
    """docs/aws.md's table of vCPUs per stack, computed from each stack's planned fleet."""
    groups: dict[tuple[int, str], list[str]] = {}
    for name in STACKS:
        settings = deployable(name)
        system = registry.systems()[settings.system]
        roles = settings.roles if settings.roles is not None else system.reference_topology.roles
        points = expand(load_scenario(settings.scenario_path()))
        plan = plan_fleet(roles, points, settings.subnet_cidr)
        fleet = fleet_composition(
            plan, settings.broker_instance_type, settings.client_instance_type
        )
        vcpus = sum(VCPUS[instance_type] * count for instance_type, count in fleet.items())
        machines = " + ".join(f"{count} × {kind}" for kind, count in fleet.items())
        groups.setdefault((vcpus, machines), []).append(f"`{name}`")
    return [
        f"| {vcpus} | {machines} | {', '.join(sorted(names))} |"
        for (vcpus, machines), names in sorted(groups.items())
    ]


def test_readme_states_the_vcpu_quota_of_every_stack() -> None:
    readme = (ROOT / "docs" / "aws.md").read_text(encoding="utf-8")
    missing = [row for row in quota_rows() if row not in readme]
    assert missing == [], "docs/aws.md's vCPU table is stale; rows:\n" + "\n".join(quota_rows())


class DeclaredOnly(CloudRecipe):
    """A recipe with nothing but a managed service of its own."""

    managed = ManagedService(
        resource="aws:sqs/queue:Queue",
        attributes={"visibility_timeout_seconds": 45, "delay_seconds": 2},
        client_actions=("sqs:SendMessage", "sqs:ReceiveMessage"),
        endpoints=lambda made: Endpoints(
            hosts=(f"toy.{made.region}.example:8443",),
            extra=(("name", made.name), ("url", made.url), ("arn", made.arn)),
        ),
    )

    def install_commands(self) -> list[str]:
        raise AssertionError("no broker machines")

    def node_files(
        self, role: str, index: int, cluster: dict[str, list[str]], params: Any
    ) -> dict[str, str]:
        raise AssertionError("no broker machines")

    def start_commands(self, role: str, index: int, cluster: dict[str, list[str]]) -> list[str]:
        raise AssertionError("no broker machines")


def with_cloud(monkeypatch: pytest.MonkeyPatch, name: str, recipe: CloudRecipe | None) -> None:
    systems = dict(registry.systems())
    systems[name] = replace(systems[name], cloud=recipe)
    monkeypatch.setattr(registry, "get", lambda system: _get(systems, system))


def test_a_managed_service_declaration_alone_yields_the_resource_endpoints_and_policy(
    wheel: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with_cloud(monkeypatch, "sqs", DeclaredOnly())
    settings = deployable("sqs")
    assert "managed_queue" not in settings.model_fields_set
    deployment, resources = deploy(lambda: build(settings, "sqs", REGION, wheel=wheel))

    (queue,) = checks.of_type(resources, "sqs/queue:Queue")
    assert queue.inputs == {
        "visibilityTimeoutSeconds": 45,
        "delaySeconds": 2,
        "tags": queue.inputs["tags"],
    }
    assert queue.inputs["tags"]["brokerbench:run"] == deployment.run_id
    name, url, arn = (queue.outputs[key] for key in ("name", "url", "arn"))

    sender = next(m for m in instances(resources) if m.name == "clients-sender-0")
    scenario_toml = userdata_checks.written_files(sender.inputs["userData"])[
        "/etc/brokerbench/scenario.toml"
    ]
    broker = tomllib.loads(scenario_toml)["broker"]
    assert broker["endpoints"] == [f"toy.{REGION}.example:8443"]
    assert broker["options"] == {"name": name, "url": url, "arn": arn}

    (policy,) = [
        p
        for p in checks.of_type(resources, "iam/rolePolicy:RolePolicy")
        if p.name.endswith("managed")
    ]
    assert policy.name == "access-client-managed"
    assert checks.statements(policy.inputs["policy"]) == [
        {
            "Sid": "UseRunManagedService",
            "Effect": "Allow",
            "Action": ["sqs:SendMessage", "sqs:ReceiveMessage"],
            "Resource": f"{arn}*",
        }
    ]
    (bucket,) = checks.of_type(resources, "s3/bucket:Bucket")
    assert access_checks.iam_problems(resources, bucket.id, deployment.run_id) == []


def test_no_broker_nodes_and_no_managed_service_is_a_config_error(
    wheel: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with_cloud(monkeypatch, "sqs", None)
    settings = deployable("sqs")
    with pytest.raises(StackConfigError, match="no broker nodes and the system's cloud recipe"):
        build(settings, "sqs", REGION, wheel=wheel)


def test_a_managed_service_of_an_unknown_resource_type_is_a_config_error(
    wheel: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    recipe = DeclaredOnly()
    recipe.managed = replace(DeclaredOnly.managed, resource="aws:mq/broker:Broker")
    with_cloud(monkeypatch, "sqs", recipe)
    settings = deployable("sqs")
    with pytest.raises(StackConfigError, match="'aws:mq/broker:Broker': not an AWS resource type"):
        deploy(lambda: build(settings, "sqs", REGION, wheel=wheel))


def test_a_stack_file_is_read_without_pulumi(tmp_path: Path) -> None:
    from infra.plan import stack_fleet
    from infra.settings import StackConfigError, load_stack_config, stack_path

    config = load_stack_config(stack_path("kafka"))
    assert (config.name, config.region, config.settings.system) == ("kafka", "us-east-1", "kafka")
    fleet = stack_fleet(config.settings)
    assert fleet.plan.roles == {"broker": 3}
    assert (len(fleet.plan.senders), len(fleet.plan.receivers)) == (4, 8)
    with pytest.raises(StackConfigError, match=r"unknown stack 'nope'.*kafka"):
        stack_path("nope")
