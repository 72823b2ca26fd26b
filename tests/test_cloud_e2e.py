"""The AWS client path on this machine: three client agents (one sender, two receivers, as
separate "machines" with their own results directories) run a two-point sweep against a
real local Redis through ``brokerbench prepare`` / ``brokerbench node``, upload to S3
(moto), and the run fetched back from S3 analyses to received == sent, nothing lost."""

from __future__ import annotations

import subprocess
import sys
import threading
from pathlib import Path

import boto3
import pytest
from moto import mock_aws

from brokers import registry
from brokers.base import Endpoints
from workload.engine.aws.agent import CliCommands, ClientAgent, RunStore
from workload.model.record import load_context
from workload.model.sections import PASSWORD_ENV
from workload.shell import cloud_fetch, cloud_run

pytestmark = [pytest.mark.slow, pytest.mark.redis]

REGION = "eu-west-1"
BUCKET = "results-e2e"
RUN = "redis-e2e-1"


def cli_has(command: str) -> bool:
    done = subprocess.run(
        [sys.executable, "-m", "workload.shell.cli", command, "--help"],
        capture_output=True,
        text=True,
        check=False,
    )
    return done.returncode == 0


@pytest.fixture(scope="module")
def redis_endpoint(tmp_path_factory: pytest.TempPathFactory):
    if not (cli_has("node") and cli_has("prepare")):
        pytest.skip("the CLI has no 'brokerbench node' / 'brokerbench prepare' commands yet")
    system = registry.get("redis")
    assert system.local is not None
    missing = system.local.missing()
    if missing:
        pytest.skip(missing)
    cluster = system.local.start("single", system.params_model(), tmp_path_factory.mktemp("redis"))
    try:
        yield cluster.endpoints
    finally:
        cluster.stop()


def test_client_agents_run_a_sweep_into_s3_and_it_analyses(
    redis_endpoint: Endpoints, tmp_path: Path, spark, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As on AWS: the scenario names no password, the agent's environment carries it.
    monkeypatch.setenv(PASSWORD_ENV, redis_endpoint.get("password"))
    scenario = tmp_path / "scenario.toml"
    scenario.write_text(
        'name = "redis-e2e"\n\n[broker]\nsystem = "redis"\ndeployment = "endpoints"\n'
        f'endpoints = ["{redis_endpoint.hosts[0]}"]\n\n[load]\nduration = "3s"\nidle_timeout = "3s"\n'
        'sender_nodes = 1\n\n[measurement]\nwindow = "2s"\nstep = "1s"\n\n'
        "[sweep]\nthreads = [1, 2]\n"
    )
    logs: list[str] = []
    with mock_aws():
        s3 = boto3.client("s3", region_name=REGION)
        s3.create_bucket(Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": REGION})
        agents = []
        for role, node in (("sender", 0), ("receiver", 0), ("receiver", 1)):
            results = tmp_path / f"{role}-{node}"
            commands = CliCommands(role, node, RUN, scenario, results, logs.append)
            agents.append(
                ClientAgent(
                    role,
                    node,
                    RunStore(s3, BUCKET, RUN),
                    scenario,
                    results,
                    commands,
                    log=logs.append,
                    broker_wait=30,
                    poll=0.2,
                    point_slack=120,
                )
            )
        codes = [-1] * len(agents)

        def work(i: int) -> None:
            codes[i] = agents[i].run()

        threads = [threading.Thread(target=work, args=(i,)) for i in range(len(agents))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(300)
        assert codes == [0, 0, 0], "\n".join(logs)
        run = cloud_run.CloudRun(BUCKET, RUN, REGION)
        run_dir = cloud_fetch.fetch_run(s3, run, tmp_path / "fetched", raw=True)
    # The coordinating agent wrote how the run ended: readers do not see "running".
    context = load_context(run_dir)
    assert (context.status, context.ended) == ("complete", "complete") and context.finished

    from analysis.job import analyse

    rows = analyse(spark, run_dir)
    assert len(rows) == 2
    for row in rows:
        assert int(row["sent"]) > 0
        assert int(row["received"]) == int(row["sent"])
        assert int(row["lost"]) == 0
