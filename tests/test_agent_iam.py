"""The client agent against a local S3 that enforces IAM: moto's server with IAM checks on,
and the policy documents the stack declares (:mod:`infra.access`) attached to a role that
each client "machine" assumes — a permission the agent needs and the stack lacks fails here.

moto checks a policy's actions and resources but not its ``s3:prefix`` condition, and it
answers a GetObject of a missing key 404 whatever the caller may list. :class:`RealS3` adds
these two rules of S3, which the agent depends on, on the client's side: a ``s3:ListBucket``
granted under an ``s3:prefix`` condition allows only listings of such prefixes, and a
GetObject of a missing key is answered 403 AccessDenied, not 404 NoSuchKey, to a caller
that may not list the bucket for that request — which a conditional ListBucket never
allows, since a GetObject carries no prefix.

The module is also one client machine of the last test: ``python -m tests.test_agent_iam``
(see :func:`main`).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from fnmatch import fnmatchcase
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import quote, unquote
from xml.sax.saxutils import escape

import boto3
import pytest
import requests
from botocore.exceptions import ClientError

from brokers import registry
from brokers.base import Endpoints
from infra.access import analysis_s3_policy, client_s3_policy
from infra.plan import BucketLayout, plan_fleet
from tests import test_cloud_commands as fleet_tests
from tests.test_cloud_commands import BUCKET, REGION, RUN, Fleet, scenario_file
from workload.engine.aws.agent import (
    CliCommands,
    ClientAgent,
    NodeCommands,
    RunStore,
    participants,
)
from workload.engine.context import build_context
from workload.engine.node_records import write_node
from workload.model.layout import LAYOUT
from workload.model.record import write_context
from workload.model.results import NodeStatus, write_status
from workload.model.scenario import expand
from workload.model.scenario_file import load_scenario
from workload.model.sections import PASSWORD_ENV
from workload.shell import cloud, cloud_fetch, cloud_run

BUCKET_LAYOUT = BucketLayout(RUN, "brokerbench-0.1.0-py3-none-any.whl")
ROOT = Path(__file__).resolve().parent.parent
ADMIN_POLICY = json.dumps(
    {"Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}]}
)
#: How long into the run the client machines of :func:`main` wait for a node to start.
START_GRACE = 3.0

broker = fleet_tests.broker


def moto_auth(endpoint: str, initial_no_auth_actions: str) -> str:
    """Set moto's ``INITIAL_NO_AUTH_ACTION_COUNT`` ("0": every request is checked, "inf":
    none is); the previous value. moto reads the variable from the environment once, when
    it is imported; a running server takes it from this endpoint of its own API."""
    response = requests.post(
        f"{endpoint}/moto-api/reset-auth", data=initial_no_auth_actions.encode(), timeout=10
    )
    response.raise_for_status()
    return str(response.json()["PREVIOUS_INITIAL_NO_AUTH_ACTION_COUNT"])


def _canonical_query(path: str) -> str:
    """``path`` with its query's names and values URI-encoded as SigV4's canonical request
    has them (every byte but ``A-Za-z0-9-_.~``), whatever the client put on the wire."""
    base, mark, query = path.partition("?")
    if not mark:
        return path
    pairs = (pair.partition("=") for pair in query.split("&") if pair)
    return (
        base
        + "?"
        + "&".join(
            f"{quote(unquote(name), safe='-_.~')}={quote(unquote(value), safe='-_.~')}"
            for name, _, value in pairs
        )
    )


@pytest.fixture(scope="module")
def server() -> Iterator[str]:
    """moto's server with IAM checks on. S3 signs a request over its canonical query
    (names and values URI-encoded); moto signs the query as it came and leaves out a signed
    ``User-Agent``, so the AWS SDK under Hadoop's S3A (``prefix=runs/…`` unencoded, its
    user agent signed) fails moto's signature check though S3 accepts it. The server here
    signs the canonical query and every header the client signed, as S3 does; a wrong
    signature still fails."""
    import xmltodict
    from botocore.auth import S3SigV4Auth
    from botocore.awsrequest import HTTPHeaders
    from moto.iam.access_control import S3IAMRequest
    from moto.s3.exceptions import BucketAccessDeniedError, S3AccessDeniedError
    from moto.s3.responses import S3Response
    from moto.server import ThreadedMotoServer

    class SignedAsSent(S3SigV4Auth):
        """Every header the client signed (moto passes only those), ``User-Agent`` too."""

        def headers_to_sign(self, request: Any) -> Any:
            signed = HTTPHeaders()
            for name, value in request.headers.items():
                signed[name.lower()] = value
            return signed

    original = S3IAMRequest._create_aws_request, S3IAMRequest._create_auth
    delete_keys = S3Response._bucket_response_delete_keys

    def delete_each_key_as_allowed(self: Any, bucket_name: str, authenticated: bool = True) -> Any:
        """DeleteObjects as S3 authorises it: each key by s3:DeleteObject on that key (moto
        asks it of the bucket, so a policy granting it under a prefix deletes nothing)."""
        body = xmltodict.parse(self.body, strip_whitespace=False)
        objects = body["Delete"].get("Object", [])
        allowed, denied = [], []
        for obj in objects if isinstance(objects, list) else [objects]:
            try:
                self._authenticate_and_authorize_s3_action(
                    bucket_name=bucket_name, key_name=obj["Key"]
                )
                allowed.append(obj)
            except (BucketAccessDeniedError, S3AccessDeniedError):
                denied.append(obj["Key"])
        if not allowed:
            status, headers, xml = 200, {}, "<DeleteResult></DeleteResult>"
        else:
            body["Delete"]["Object"] = allowed
            self.body = xmltodict.unparse(body).encode()
            status, headers, xml = delete_keys(self, bucket_name)
        errors = "".join(
            f"<Error><Key>{escape(key)}</Key><Code>AccessDenied</Code>"
            "<Message>Access Denied</Message></Error>"
            for key in denied
        )
        return status, headers, xml.replace("</DeleteResult>", f"{errors}</DeleteResult>")

    S3Response._bucket_response_delete_keys = delete_each_key_as_allowed  # type: ignore[method-assign]

    def canonical(self: Any) -> Any:
        request = original[0](self)
        request.url = _canonical_query(request.url)
        return request

    S3IAMRequest._create_aws_request = canonical  # type: ignore[method-assign]
    S3IAMRequest._create_auth = lambda self, credentials: SignedAsSent(  # type: ignore[method-assign]
        credentials, self._service, self._region
    )
    moto_server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    moto_server.start()
    host, port = moto_server.get_host_and_port()
    try:
        yield f"http://{host}:{port}"
    finally:
        moto_server.stop()
        S3IAMRequest._create_aws_request, S3IAMRequest._create_auth = original  # type: ignore[method-assign]
        S3Response._bucket_response_delete_keys = delete_keys  # type: ignore[method-assign]


@dataclass
class Account:
    """An empty moto account with IAM enforced: an administrator and the results bucket."""

    endpoint: str
    admin: dict[str, str]

    def client(self, service: str, credentials: dict[str, str]) -> Any:
        return boto3.client(service, endpoint_url=self.endpoint, region_name=REGION, **credentials)

    def role(self, name: str, policy: str) -> str:
        """A role (assumable by the administrator) with ``policy`` inline; its ARN."""
        iam = self.client("iam", self.admin)
        admin_arn = iam.get_user()["User"]["Arn"]
        trust = {
            "Version": "2012-10-17",
            "Statement": [
                {"Effect": "Allow", "Principal": {"AWS": admin_arn}, "Action": "sts:AssumeRole"}
            ],
        }
        role = iam.create_role(RoleName=name, AssumeRolePolicyDocument=json.dumps(trust))
        iam.put_role_policy(RoleName=name, PolicyName="s3", PolicyDocument=policy)
        return str(role["Role"]["Arn"])

    def assume(self, role_arn: str, session: str) -> dict[str, str]:
        """Credentials of a session of the role, as boto3 client arguments."""
        sts = self.client("sts", self.admin)
        found = sts.assume_role(RoleArn=role_arn, RoleSessionName=session)["Credentials"]
        return {
            "aws_access_key_id": found["AccessKeyId"],
            "aws_secret_access_key": found["SecretAccessKey"],
            "aws_session_token": found["SessionToken"],
        }

    def s3_as(self, role_arn: str, session: str, policy: str) -> Any:
        """An S3 client of a session of the role, held to :class:`RealS3`'s rules."""
        return RealS3(policy).install(self.client("s3", self.assume(role_arn, session)))


@pytest.fixture
def account(server: str) -> Iterator[Account]:
    moto_auth(server, "inf")
    requests.post(f"{server}/moto-api/reset", timeout=10).raise_for_status()
    bootstrap = {"aws_access_key_id": "bootstrap", "aws_secret_access_key": "bootstrap"}
    iam = boto3.client("iam", endpoint_url=server, region_name=REGION, **bootstrap)
    iam.create_user(UserName="admin")
    iam.put_user_policy(UserName="admin", PolicyName="all", PolicyDocument=ADMIN_POLICY)
    key = iam.create_access_key(UserName="admin")["AccessKey"]
    admin = {
        "aws_access_key_id": key["AccessKeyId"],
        "aws_secret_access_key": key["SecretAccessKey"],
    }
    previous = moto_auth(server, "0")
    try:
        found = Account(server, admin)
        found.client("s3", admin).create_bucket(
            Bucket=BUCKET, CreateBucketConfiguration={"LocationConstraint": REGION}
        )
        yield found
    finally:
        moto_auth(server, previous)


def actions_of(statement: dict[str, Any]) -> list[str]:
    actions = statement["Action"]
    return [actions] if isinstance(actions, str) else list(actions)


def access_denied(operation: str) -> ClientError:
    return ClientError(
        {
            "Error": {"Code": "AccessDenied", "Message": "Access Denied"},
            "ResponseMetadata": {"HTTPStatusCode": 403},
        },
        operation,
    )


class RealS3:
    """The two rules of S3 that moto does not apply (see the module docstring), for a caller
    holding ``policy``; what they refused is in :attr:`refused`."""

    def __init__(self, policy: str) -> None:
        self.unconditioned = False
        self.patterns: list[str] = []
        self.listed: list[str] = []
        self.refused: list[str] = []
        for statement in json.loads(policy)["Statement"]:
            if statement["Effect"] != "Allow" or "s3:ListBucket" not in actions_of(statement):
                continue
            condition = statement.get("Condition")
            if condition is None:
                self.unconditioned = True
                continue
            assert list(condition) == ["StringLike"], condition  # all that is emulated
            assert list(condition["StringLike"]) == ["s3:prefix"], condition
            self.patterns += condition["StringLike"]["s3:prefix"]

    def install(self, client: Any) -> Any:
        client.meta.events.register("before-parameter-build.s3.ListObjectsV2", self._list)
        client.meta.events.register("after-call.s3.GetObject", self._get)
        return client

    def _list(self, params: dict[str, Any], **_: Any) -> None:
        prefix = params.get("Prefix", "")
        self.listed.append(prefix)
        if self.unconditioned or not self.patterns:  # no ListBucket at all: moto refuses
            return
        if not any(fnmatchcase(prefix, pattern) for pattern in self.patterns):
            self.refused.append(f"ListObjectsV2 of prefix {prefix!r}")
            raise access_denied("ListObjectsV2")

    def _get(self, parsed: dict[str, Any], **_: Any) -> None:
        error = parsed.get("Error", {})
        if error.get("Code") == "NoSuchKey" and not self.unconditioned:
            self.refused.append("GetObject of a missing key")
            error.update(Code="AccessDenied", Message="Access Denied")
            parsed["ResponseMetadata"]["HTTPStatusCode"] = 403


def answer(call: Callable[[], object]) -> str:
    """What S3 answers a call: "ok", or the error code and HTTP status."""
    try:
        call()
    except ClientError as exc:
        error = exc.response
        return f"{error['Error']['Code']} {error['ResponseMetadata']['HTTPStatusCode']}"
    return "ok"


def answers(client: Any, asked: list[tuple[str, str]]) -> list[str]:
    """What S3 answers each (operation, key) request: operations are put, get and delete."""
    calls = {
        "put": lambda key: client.put_object(Bucket=BUCKET, Key=key, Body=b"{}"),
        "get": lambda key: client.get_object(Bucket=BUCKET, Key=key),
        "delete": lambda key: client.delete_object(Bucket=BUCKET, Key=key),
    }
    return [answer(partial(calls[operation], key)) for operation, key in asked]


def machine(role: str, node: int) -> str:
    return f"{role}-{node}"


def without(policy: str, sid: str, action: str) -> str:
    """``policy`` with ``action`` taken out of its statement ``sid`` (gone when empty)."""
    document = json.loads(policy)
    for statement in document["Statement"]:
        if statement["Sid"] == sid:
            statement["Action"] = [a for a in actions_of(statement) if a != action]
    document["Statement"] = [s for s in document["Statement"] if s["Action"]]
    return json.dumps(document)


def test_the_server_enforces_the_stack_policies(account: Account) -> None:
    admin = account.client("s3", account.admin)
    for key in (BUCKET_LAYOUT.wheel_key, "artifacts/other-run/wheel.whl"):
        admin.put_object(Bucket=BUCKET, Key=key, Body=b"wheel")
    marker = f"runs/{RUN}/control/p0.ready"
    client_role = account.role("client", client_s3_policy(BUCKET, BUCKET_LAYOUT))
    client = account.client("s3", account.assume(client_role, "sender-0"))
    expected = {
        ("put", marker): "ok",
        ("get", marker): "ok",
        ("get", BUCKET_LAYOUT.wheel_key): "ok",
        ("put", "runs/other-run/control/p0.ready"): "AccessDenied 403",
        ("put", BUCKET_LAYOUT.wheel_key): "AccessDenied 403",  # artifacts are read-only
        ("get", "artifacts/other-run/wheel.whl"): "AccessDenied 403",
        ("delete", marker): "AccessDenied 403",
    }
    assert answers(client, list(expected)) == list(expected.values())
    assert answer(client.list_buckets) == "AccessDenied 403"

    analysis_role = account.role("analysis", analysis_s3_policy(BUCKET))
    analysis = account.client("s3", account.assume(analysis_role, "job"))
    admin.put_object(Bucket=BUCKET, Key="runs/earlier-run/context.json", Body=b"{}")
    expected = {
        ("put", f"{BUCKET_LAYOUT.analysis_prefix}summary.csv"): "ok",
        ("get", marker): "ok",
        ("put", f"runs/{RUN}/raw/seconds/p0-sender-0.0.parquet"): "AccessDenied 403",
        # an earlier run of the stack stays analysable: read, its analysis written
        ("get", "runs/earlier-run/context.json"): "ok",
        ("put", "runs/earlier-run/analysis/summary.csv"): "ok",
        ("put", "runs/earlier-run/context.json"): "AccessDenied 403",
    }
    assert answers(analysis, list(expected)) == list(expected.values())


def test_a_missing_marker_is_listed_never_read(account: Account) -> None:
    policy = client_s3_policy(BUCKET, BUCKET_LAYOUT)
    role = account.role("client", policy)
    key = f"runs/{RUN}/{LAYOUT.ready(0)}"
    # what the IAM-enforcing moto server answers, and what S3 answers this policy
    bare = account.client("s3", account.assume(role, "receiver-0"))
    assert answers(bare, [("get", key)]) == ["NoSuchKey 404"]
    client = account.s3_as(role, "receiver-0", policy)
    assert answers(client, [("get", key)]) == ["AccessDenied 403"]
    refused = answer(lambda: client.list_objects_v2(Bucket=BUCKET, Prefix="runs/"))
    assert refused == "AccessDenied 403"  # outside the condition

    store = RunStore(client, BUCKET, RUN)
    assert store.get_json(LAYOUT.ready(0)) is None
    account.client("s3", account.admin).put_object(Bucket=BUCKET, Key=key, Body=b'{"ok": true}')
    assert store.get_json(LAYOUT.ready(0)) == {"ok": True}
    assert store.get_json("control/p0") is None  # a key under which others lie is no key


def test_agents_with_the_stack_policy_run_a_sweep(
    account: Account, broker: str, tmp_path: Path
) -> None:
    policy = client_s3_policy(BUCKET, BUCKET_LAYOUT)
    role = account.role("client", policy)
    admin = account.client("s3", account.admin)
    fleet = Fleet(admin, scenario_file(tmp_path, broker), tmp_path)
    nodes = [("sender", 0), ("sender", 1)] + [("receiver", n) for n in range(4)]
    rules = {}
    for who in nodes:
        rules[who] = RealS3(policy)
        fleet.clients[who] = rules[who].install(
            account.client("s3", account.assume(role, machine(*who)))
        )
    codes = fleet.run([fleet.agent(r, n) for r, n in nodes], coordinator_delay=0.5)
    assert codes == [0] * 6, fleet.logs

    stored = fleet_tests.keys(admin)
    assert {LAYOUT.started(r, n) for r, n in nodes} | {LAYOUT.ready(0), LAYOUT.ready(1)} <= stored
    for point in expand(load_scenario(fleet.scenario)):
        for who in participants(point):
            name = f"p{point.index}-{machine(*who)}"
            assert {f"raw/seconds/{name}.parquet", LAYOUT.done(point.index, *who)} <= stored
    for who, rule in rules.items():
        assert rule.refused == [], who  # no list S3 refuses, no read of a missing key
    polled = rules["receiver", 0].listed.count(f"runs/{RUN}/{LAYOUT.ready(0)}")
    assert polled > 3  # waited for point 0's ready marker before the coordinator posted it


@pytest.mark.parametrize(
    ("sid", "permission", "ready", "target"),
    [
        (
            "ListThisRun",
            "s3:ListBucket",
            False,
            f"s3://{BUCKET} (prefix runs/{RUN}/control/p0.ready)",
        ),
        ("WriteResults", "s3:GetObject", True, f"s3://{BUCKET}/runs/{RUN}/control/p0.ready"),
        (
            "WriteResults",
            "s3:PutObject",
            False,
            f"s3://{BUCKET}/runs/{RUN}/control/receiver-0.started",
        ),
    ],
    ids=["without-ListBucket", "without-GetObject", "without-PutObject"],
)
def test_a_missing_permission_ends_the_agent_with_one_line(
    account: Account,
    broker: str,
    tmp_path: Path,
    sid: str,
    permission: str,
    ready: bool,
    target: str,
) -> None:
    admin = account.client("s3", account.admin)
    if ready:
        admin.put_object(Bucket=BUCKET, Key=f"runs/{RUN}/{LAYOUT.ready(0)}", Body=b'{"ok": true}')
    policy = without(client_s3_policy(BUCKET, BUCKET_LAYOUT), sid, permission)
    fleet = Fleet(admin, scenario_file(tmp_path, broker), tmp_path)
    fleet.clients["receiver", 0] = account.s3_as(
        account.role("client", policy), "receiver-0", policy
    )
    began = time.monotonic()
    assert fleet.agent("receiver", 0).run() == 1
    assert time.monotonic() - began < 10  # the ready marker's deadline is minutes away
    refusals = [line for line in fleet.logs if "S3 refused" in line]
    assert refusals[0] == (
        f"S3 refused {permission} on {target} (AccessDenied): "
        "this machine's role lacks that permission there"
    )
    if permission != "s3:PutObject":  # the operator sees it in `brokerbench cloud status`
        marker = RunStore(admin, BUCKET, RUN).get_json(LAYOUT.done(0, "receiver", 0))
        assert marker is not None and marker["error"] == refusals[0]


@dataclass
class RecordingCommands:
    """Writes what ``brokerbench prepare`` and ``brokerbench node`` write — the run context,
    each node part's records (none: no broker) and status — without a broker."""

    role: str
    node: int
    scenario: Path
    results: Path

    def prepare(self, point: int) -> tuple[bool, str]:
        if point == 0:
            scenario = load_scenario(self.scenario)
            system = registry.get(scenario.broker.system)
            run_dir = self.results / RUN
            run_dir.mkdir(parents=True, exist_ok=True)
            context = build_context(RUN, scenario, str(self.scenario), system, expand(scenario), {})
            write_context(run_dir, context)
        return True, f"prepared point {point}"

    def run_node(self, point: int) -> tuple[bool, str]:
        write_node(self.results / RUN, RUN, point, self.role, self.node, [])
        write_status(self.results / RUN, NodeStatus(point, self.role, self.node, True))
        return True, "ok"


def main(argv: list[str] | None = None) -> int:
    """One client machine: the agent on the S3 client its environment gives (endpoint and
    a session of the client role), held to :class:`RealS3`'s rules for the stack's client
    policy; exit code 3 when it made a request real S3 would have refused."""
    parser = argparse.ArgumentParser()
    parser.add_argument("role")
    parser.add_argument("node", type=int)
    parser.add_argument("scenario", type=Path)
    parser.add_argument("results", type=Path)
    parser.add_argument(
        "--broker", action="store_true", help="run brokerbench prepare / node for real"
    )
    args = parser.parse_args(argv)
    rules = RealS3(client_s3_policy(BUCKET, BUCKET_LAYOUT))
    store = RunStore(rules.install(boto3.client("s3")), BUCKET, RUN)

    def log(line: str) -> None:
        print(line, flush=True)

    commands: NodeCommands = (
        CliCommands(args.role, args.node, RUN, args.scenario, args.results, log)
        if args.broker
        else RecordingCommands(args.role, args.node, args.scenario, args.results)
    )
    agent = ClientAgent(
        args.role,
        args.node,
        store,
        args.scenario,
        args.results,
        commands,
        log=log,
        broker_wait=30,
        poll=0.05,
        point_slack=600,
        start_grace=START_GRACE,
    )
    code = agent.run()
    if rules.refused:
        print(f"real S3 would have refused: {rules.refused}", flush=True)
        return 3
    return code


@pytest.fixture
def redis_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Endpoints]:
    """A real Redis on loopback, with its run's password, started for one test."""
    system = registry.get("redis")
    assert system.local is not None
    if missing := system.local.missing():
        pytest.skip(missing)
    cluster = system.local.start("single", system.params_model(), tmp_path_factory.mktemp("r"))
    try:
        yield cluster.endpoints
    finally:
        cluster.stop()


@pytest.mark.slow
@pytest.mark.spark
@pytest.mark.redis
def test_a_run_with_a_node_that_never_starts(
    account: Account,
    redis_server: Endpoints,
    tmp_path: Path,
    spark: Any,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A small AWS run here: a sender and a receiver machine as separate processes, each on
    a session of the client role, running ``brokerbench prepare`` / ``node`` against a real
    Redis on loopback (its password in the environment, as the agent hands it on); receiver
    1 never starts. Three points whose budgets are 602 s each end in seconds, and the
    operator's status, fetch and analysis name the missing node."""
    scenario = tmp_path / "scenario.toml"
    scenario.write_text(
        'name = "redis-cloud"\n\n[broker]\nsystem = "redis"\ndeployment = "endpoints"\n'
        f'endpoints = ["{redis_server.hosts[0]}"]\n\n[load]\nduration = "1s"\n'
        'idle_timeout = "1s"\nprocesses = 1\nsender_nodes = 1\nreceiver_nodes = 2\n\n'
        "[sweep]\nthreads = [1, 2, 3]\n"
    )
    admin = account.client("s3", account.admin)
    plan = plan_fleet({"broker": 1}, expand(load_scenario(scenario)), "10.42.1.0/24")
    manifest = {"run_id": RUN, "points": [p.model_dump() for p in plan.points]}
    admin.put_object(
        Bucket=BUCKET, Key=BUCKET_LAYOUT.manifest_key, Body=json.dumps(manifest).encode()
    )
    role = account.role("client", client_s3_policy(BUCKET, BUCKET_LAYOUT))

    began = time.monotonic()
    processes = []
    for who in ("sender", 0), ("receiver", 0):
        session = {key.upper(): value for key, value in account.assume(role, machine(*who)).items()}
        env = {
            **os.environ,
            **session,
            "AWS_ENDPOINT_URL": account.endpoint,
            "AWS_DEFAULT_REGION": REGION,
            PASSWORD_ENV: redis_server.get("password"),
        }
        env.pop("AWS_PROFILE", None)
        command = [sys.executable, "-m", "tests.test_agent_iam", who[0], str(who[1])]
        command += [str(scenario), str(tmp_path / machine(*who)), "--broker"]
        processes.append(
            subprocess.Popen(
                command,
                cwd=ROOT,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
        )
    logs = [process.communicate(timeout=180)[0] for process in processes]
    assert [process.returncode for process in processes] == [0, 0], "\n".join(logs)
    assert time.monotonic() - began < 90
    assert logs[0].count("receiver 1 never started") == 3

    admin_env = {key.upper(): value for key, value in account.admin.items()}
    for name, value in {**admin_env, "AWS_ENDPOINT_URL": account.endpoint}.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("AWS_SESSION_TOKEN", raising=False)
    target = ["--bucket", BUCKET, "--run-id", RUN, "--region", REGION]
    assert cloud.main(["cloud", "status", *target]) == 1
    status = capsys.readouterr().out
    assert "9/9 node results" in status
    for point in range(3):
        assert (
            f"failed: point {point} receiver 1: never started: no control/receiver-1.started marker"
            in status
        )

    from analysis.job import analyse

    run_dir = cloud_fetch.fetch_run(
        admin, cloud_run.CloudRun(BUCKET, RUN, REGION), tmp_path / "fetched", raw=True
    )
    rows = analyse(spark, run_dir)
    assert all(row["sent"] > 0 and row["received"] > 0 for row in rows), rows  # a real broker
    capsys.readouterr()
    assert cloud_fetch.print_summary(run_dir)
    table = capsys.readouterr().out
    flagged = [line for line in table.splitlines() if "←" in line]
    assert len(flagged) == 3, table
    for line in flagged:
        assert (
            "incomplete: receiver node 1 process 0 wrote no results "
            "(never started: no control/receiver-1.started marker"
        ) in line, table


if __name__ == "__main__":
    sys.exit(main())
