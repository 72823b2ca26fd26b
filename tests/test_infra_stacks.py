"""Every stack under Pulumi's mocks: the machines match the topology and the scenario, and
the security validators find nothing. Also the program entry point and the stack config."""

from __future__ import annotations

import json
import runpy
import tomllib
from collections import Counter
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from brokers import registry
from infra import checks
from infra.checks import Declared
from infra.mocking import ZONES, deploy
from infra.program import Deployment, build
from infra.settings import (
    ROOT,
    StackConfigError,
    StackSettings,
    load_stack_file,
    settings_from_config,
)
from workload.scenario import load_scenario, parse_scenario
from workload.sweep import expand

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
    settings = load_stack_file(STACKS[name])
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
    settings = load_stack_file(STACKS[name])
    assert settings.scenario.as_posix() == f"workload/scenarios/{name}-sweep.toml"
    assert settings.broker_instance_type == "r5.2xlarge"
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
    assert checks.bucket_problems(resources) == []
    (bucket,) = checks.of_type(resources, "s3/bucket:Bucket")
    assert checks.iam_problems(resources, bucket.id, deployment.run_id) == []
    assert len(checks.of_type(resources, "emrserverless/application:Application")) == 1
    queues = checks.of_type(resources, "sqs/queue:Queue")
    assert len(queues) == (1 if settings.managed_queue else 0)

    # Every machine's user-data: well-formed, names the run and the scenario.
    for machine in machines:
        text = machine.inputs["userData"]
        assert checks.cloud_config_problems(text) == [], machine.name
        assert deployment.run_id in text and scenario.name in text, machine.name
    for machine in machines:
        if role_of(machine) in ("sender", "receiver"):
            toml_text = checks.written_files(machine.inputs["userData"])[
                "/etc/brokerbench/scenario.toml"
            ]
            client = parse_scenario(tomllib.loads(toml_text))
            assert client.broker.deployment == "endpoints"
            assert client.load == scenario.load and client.sweep == scenario.sweep


@pytest.mark.parametrize("name", sorted(STACKS))
def test_every_rendered_user_data_passes_cloud_init_schema(
    name: str, wheel: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    if checks.cloud_init_schema("#cloud-config\n{}\n") is None:
        pytest.skip("cloud-init is not installed (apt-get install cloud-init; make setup does)")
    with_recipes(monkeypatch)
    settings = deployable(name)
    _, resources = deploy_stack(name, settings, wheel)
    texts = {m.inputs["userData"]: m.name for m in instances(resources)}
    results = checks.cloud_init_schema_batch(list(texts))
    assert results is not None
    assert {
        machine: errors for machine, errors in zip(texts.values(), results, strict=True) if errors
    } == {}
    # the command itself, on the first broker node and the first client
    samples = [next(iter(texts))] + [t for t, m in texts.items() if "sender-0" in m]
    assert [checks.cloud_init_schema(text) for text in samples] == [[]] * len(samples)


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
    files = checks.written_files(primary.inputs["userData"])
    assert (
        "synchronous_standby_names = 'ANY 1 (s1, s2)'"
        in files["/opt/brokerbench/files/etc/postgresql/15/main/conf.d/brokerbench.conf"]
    )
    sender = next(m for m in instances(resources) if m.name == "clients-sender-0")
    scenario_toml = checks.written_files(sender.inputs["userData"])[
        "/etc/brokerbench/scenario.toml"
    ]
    broker = tomllib.loads(scenario_toml)["broker"]
    assert broker["endpoints"] == ["10.42.1.10:5432", "10.42.1.11:5432", "10.42.1.12:5432"]
    assert broker["options"] == {"dbname": "postgres", "user": "postgres"}


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
        script = "\n".join(checks.written_files(machine.inputs["userData"]).values())
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
    settings = load_stack_file(STACKS["redis-cluster"]).model_copy(
        update={"scenario": ROOT / "workload/scenarios/redis-sweep.toml"}
    )
    if not settings.scenario_path().exists():
        pytest.skip("workload/scenarios/redis-sweep.toml does not exist")
    _, resources = deploy_stack("redis-cluster", settings, wheel)
    assert Counter(role_of(m) for m in instances(resources) if m.name.startswith("brokers-")) == {
        "master": 3, "replica": 6,
    }  # fmt: skip
    last = next(m for m in instances(resources) if m.name == "brokers-replica-5")
    script = checks.written_files(last.inputs["userData"])["/opt/brokerbench/node.sh"]
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
                                   "brokerbench:managedQueue": "true", "aws:region": "x"})  # fmt: skip
    assert parsed.roles == {"master": 3, "replica": 6} and parsed.managed_queue is True


def test_scenario_of_another_system_is_rejected(
    wheel: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with_recipes(monkeypatch)
    settings = deployable("postgresql").model_copy(update={"system": "redis"})
    with pytest.raises(StackConfigError, match="not redis"):
        build(settings, "x", REGION, wheel=wheel)


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
