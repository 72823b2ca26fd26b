"""Broker parameters are strict (a string, a float or a boolean is not an integer), bounded,
and checked against the topology they run on (replicas ≤ nodes, quorum ≤ nodes, in-sync
replicas ≤ replicas): each problem is one line naming the file, the key and its line."""

from __future__ import annotations

from pathlib import Path

import pytest

from brokers import registry
from brokers.connection import BrokerParams
from tests.test_scenario import error_lines, write
from workload.model.scenario_file import load_scenario


def scenario(system: str, topology: str, params: str, sweep: str = "") -> str:
    return (
        f'name = "p"\n[broker]\nsystem = "{system}"\ntopology = "{topology}"\n'
        f"[broker.params]\n{params}\n{sweep}"
    )


def one_line(tmp_path: Path, text: str) -> str:
    (line,) = error_lines(tmp_path, text)
    return line.removeprefix(f"{tmp_path / 's.toml'}: ")


@pytest.mark.parametrize(
    ("system", "params", "says"),
    [
        ("redis", "streams = true", "broker.params.streams: Input should be a valid integer"),
        ("redis", 'streams = "2"', "broker.params.streams: Input should be a valid integer"),
        ("redis", "streams = 2.0", "broker.params.streams: Input should be a valid integer"),
        ("redis", "claim_after = inf", "broker.params.claim_after: Input should be a finite"),
        ("redis", "claim_after = nan", "broker.params.claim_after: Input should be a finite"),
        ("rabbitmq", "persistent = 1", "broker.params.persistent: Input should be a valid bool"),
        ("kafka", "replication_factor = 100", "broker.params.replication_factor: Input should "),
        ("kafka", "replication_factor = 9223372036854775807", "broker.params.replication_fa"),
        ("kafka", "commit_interval = 1e-9", "broker.params.commit_interval: Input should be"),
        ("kafka", 'heap = "0m"', "broker.params.heap: between 64m and 512g (got 0m)"),
        ("kafka", 'heap = "99999999g"', "broker.params.heap: between 64m and 512g"),
        ("kafka", 'heap = "1t"', "broker.params.heap: a JVM heap size such as '512m' or '2g'"),
        ("artemis", 'heap = "10m"', "broker.params.heap: between 64m and 512g (got 10m)"),
        ("nats", "max_ack_pending = 100000000000", "broker.params.max_ack_pending: Input should"),
    ],
)
def test_a_value_of_the_wrong_type_or_out_of_bounds_is_one_line(
    tmp_path: Path, system: str, params: str, says: str
) -> None:
    line = one_line(tmp_path, scenario(system, "single", params))
    assert line.startswith(says) and line.endswith("(line 6)"), line


def test_an_integer_is_a_number_of_seconds(tmp_path: Path) -> None:
    text = scenario("kafka", "single", "commit_interval = 5\nrequest_timeout = 2")
    params = load_scenario(write(tmp_path, text)).broker_params()
    assert params.commit_interval == 5.0  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    ("system", "topology", "params", "says"),
    [
        (
            "kafka",
            "cluster",
            "replication_factor = 5",
            "broker.params.replication_factor: 5 replicas on topology 'cluster', which has "
            "3 nodes: at most 3",
        ),
        (
            "kafka",
            "single",
            "replication_factor = 2",
            "broker.params.replication_factor: 2 replicas on topology 'single', which has "
            "1 node: at most 1",
        ),
        (
            "kafka",
            "cluster",
            "min_insync_replicas = 5",
            "broker.params.min_insync_replicas: 5 in-sync replicas of 3 (the replication "
            "factor on topology 'cluster'): every send would fail; at most 3",
        ),
        (
            "kafka",
            "cluster",
            "replication_factor = 3\nmin_insync_replicas = 5",
            "broker.params: min_insync_replicas = 5 is more than replication_factor = 3: "
            "every send would fail",
        ),
        (
            "kmq",
            "single",
            "min_insync_replicas = 2",
            "broker.params.min_insync_replicas: 2 in-sync replicas of 1 (the replication "
            "factor on topology 'single'): every send would fail; at most 1",
        ),
        (
            "redis",
            "single",
            "wait_replicas = 1",
            "broker.params.wait_replicas: 1 replicas to WAIT for on topology 'single', where "
            "a master has 0: every batch would time out; at most 0",
        ),
        (
            "redis",
            "cluster",
            "wait_replicas = 9",
            "broker.params.wait_replicas: 9 replicas to WAIT for on topology 'cluster', where "
            "a master has 2: every batch would time out; at most 2",
        ),
        (
            "rabbitmq",
            "cluster",
            "quorum_size = 5",
            "broker.params.quorum_size: 5 members on topology 'cluster', which has 3 nodes: "
            "at most 3",
        ),
        (
            "nats",
            "single",
            "replicas = 3",
            "broker.params.replicas: 3 replicas on topology 'single', which has 1 node: at most 1",
        ),
        (
            "pulsar",
            "single",
            "ensemble_size = 2\nwrite_quorum = 2\nack_quorum = 1",
            "broker.params.ensemble_size: 2 bookies per ledger on topology 'single', which has "
            "1 node: at most 1",
        ),
    ],
)
def test_parameters_the_topology_cannot_honour_are_one_line(
    tmp_path: Path, system: str, topology: str, params: str, says: str
) -> None:
    line = one_line(tmp_path, scenario(system, topology, params))
    assert line.startswith(says), line


def test_a_swept_value_the_topology_cannot_honour_is_named_where_it_is_swept(
    tmp_path: Path,
) -> None:
    sweep = "[sweep.params]\nreplication_factor = [1, 3, 4]\n"
    line = one_line(tmp_path, scenario("kafka", "cluster", "", sweep))
    assert line == (
        "sweep.params.replication_factor[2]: 4 replicas on topology 'cluster', which has "
        "3 nodes: at most 3 (line 8)"
    )


def test_what_fits_the_topology_is_accepted(tmp_path: Path) -> None:
    text = scenario("kafka", "cluster", "replication_factor = 3\nmin_insync_replicas = 3")
    load_scenario(write(tmp_path, text))
    text = scenario("redis", "cluster", "wait_replicas = 2")
    load_scenario(write(tmp_path, text))


def test_brokers_brokerbench_does_not_start_are_the_users_to_size(tmp_path: Path) -> None:
    text = (
        'name = "p"\n[broker]\nsystem = "rabbitmq"\ndeployment = "endpoints"\n'
        'endpoints = ["127.0.0.1:5672"]\n[broker.params]\nquorum_size = 5\n'
    )
    load_scenario(write(tmp_path, text))


@pytest.mark.parametrize("system", sorted(registry.systems()))
def test_every_parameter_model_is_strict_and_finite(system: str) -> None:
    model = registry.get(system).params_model
    assert issubclass(model, BrokerParams)
    assert model.model_config.get("strict") is True
    assert model.model_config.get("allow_inf_nan") is False
    assert model.model_config.get("extra") == "forbid"
