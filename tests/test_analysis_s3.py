"""The analysis job, unchanged, on a run stored in S3: a local S3-compatible server (moto in
server mode) and the S3A connector (hadoop-aws fetched from Maven Central and cached)."""

from __future__ import annotations

import csv
import importlib.util
import io
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
from botocore.exceptions import ClientError

from analysis.storage import RunLocation, hadoop_aws_jars
from tests import test_agent_iam as iam_tests
from tests.test_agent_iam import account, server  # noqa: F401  (the IAM-enforcing S3)

pytestmark = [pytest.mark.spark, pytest.mark.slow]

ROOT = Path(__file__).resolve().parent.parent
MESSAGES = 20_000
CREDENTIALS = {
    "AWS_ACCESS_KEY_ID": "testing",
    "AWS_SECRET_ACCESS_KEY": "testing",
    "AWS_DEFAULT_REGION": "us-east-1",
}


def synthetic():
    path = ROOT / "tests" / "benchmarks" / "bench_analysis.py"
    spec = importlib.util.spec_from_file_location("bench_analysis", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def s3_endpoint():
    from moto.server import ThreadedMotoServer

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    moto_server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    moto_server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        moto_server.stop()


def test_job_reads_and_writes_a_run_in_s3(s3_endpoint, tmp_path: Path, monkeypatch) -> None:
    import boto3

    hadoop_aws_jars()  # fetched once into the artifact cache
    env = {**CREDENTIALS, "AWS_ENDPOINT_URL": s3_endpoint}
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    run_dir = tmp_path / "bench-analysis"
    run_dir.mkdir()
    sent = synthetic().generate(run_dir, MESSAGES, senders=2, threads=2, receivers=2)
    client = boto3.client("s3", endpoint_url=s3_endpoint)
    client.create_bucket(Bucket="results")
    for path in run_dir.rglob("*"):
        if path.is_file():
            client.upload_file(str(path), "results", f"runs/{path.relative_to(tmp_path)}")

    uri = "s3://results/runs/bench-analysis"
    done = subprocess.run(
        [sys.executable, "-m", "analysis.job", uri],
        capture_output=True,
        text=True,
        timeout=600,
        cwd=ROOT,
        env={**os.environ, **env},
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]

    run = RunLocation.of(uri)
    (row,) = csv.DictReader(io.StringIO(run.read_text("analysis/summary.csv")))
    assert (int(row["sent"]), int(row["received"])) == (sent, sent)
    assert (row["lost"], row["duplicated"]) == ("0", "0")
    assert run.has_parquet("analysis/windows")


def test_job_reads_and_writes_a_run_under_the_stacks_analysis_policy(
    account: iam_tests.Account,  # noqa: F811  (the fixture)
    tmp_path: Path,
) -> None:
    """The same job through S3A, with the credentials of a session of a role holding exactly
    the policy the stack gives the EMR job's role, against a local S3 that enforces IAM:
    the reads of the run, the listings of its prefixes, and the writes of the analysis with
    their ``_temporary`` objects, renames (copy, then delete) and directory markers."""
    from infra.access import analysis_s3_policy
    from infra.plan import BucketLayout

    hadoop_aws_jars()
    bucket, run_id = iam_tests.BUCKET, iam_tests.RUN
    layout = BucketLayout(run_id, "brokerbench-0.1.0-py3-none-any.whl")
    run_dir = tmp_path / run_id
    run_dir.mkdir()
    sent = synthetic().generate(run_dir, MESSAGES, senders=2, threads=2, receivers=2)
    admin = account.client("s3", account.admin)
    for path in run_dir.rglob("*"):
        if path.is_file():
            admin.upload_file(str(path), bucket, f"{layout.run_prefix}{path.relative_to(run_dir)}")
    role = account.role("analysis", analysis_s3_policy(bucket))
    session = account.assume(role, "emr-job")
    job = account.client("s3", session)
    with pytest.raises(ClientError, match="AccessDenied"):  # the server enforces the policy
        job.put_object(Bucket=bucket, Key=f"{layout.run_prefix}raw/forged", Body=b"x")
    env = {
        **os.environ,
        "AWS_ENDPOINT_URL": account.endpoint,
        "AWS_DEFAULT_REGION": iam_tests.REGION,
        "AWS_ACCESS_KEY_ID": session["aws_access_key_id"],
        "AWS_SECRET_ACCESS_KEY": session["aws_secret_access_key"],
        "AWS_SESSION_TOKEN": session["aws_session_token"],
    }
    uri = f"s3://{bucket}/{layout.run_prefix}"
    done = subprocess.run(
        [sys.executable, "-m", "analysis.job", uri],
        capture_output=True, text=True, timeout=600, cwd=ROOT, env=env, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    summary = admin.get_object(Bucket=bucket, Key=f"{layout.analysis_prefix}summary.csv")
    (row,) = csv.DictReader(io.StringIO(summary["Body"].read().decode()))
    assert (int(row["sent"]), int(row["received"])) == (sent, sent)
    written = admin.list_objects_v2(Bucket=bucket, Prefix=layout.analysis_prefix)["Contents"]
    assert any(o["Key"].startswith(f"{layout.analysis_prefix}windows/") for o in written)
    assert not any("_temporary" in o["Key"] for o in written)  # committed: renamed, deleted
    outside = admin.list_objects_v2(Bucket=bucket)["Contents"]
    assert all(o["Key"].startswith(layout.run_prefix) for o in outside)


def test_run_location_paths(monkeypatch) -> None:
    monkeypatch.delenv("BROKERBENCH_SPARK_CLUSTER", raising=False)
    monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)
    run = RunLocation.of("s3://bucket/some/prefix/run-1/")
    assert run.s3 and run.name == "run-1"
    assert run.spark_path("raw/seconds") == "s3a://bucket/some/prefix/run-1/raw/seconds"
    monkeypatch.setenv("PYSPARK_GATEWAY_PORT", "40000")  # under spark-submit, e.g. on EMR
    assert run.spark_path("raw/seconds") == "s3://bucket/some/prefix/run-1/raw/seconds"
    local = RunLocation.of(Path("/tmp/x/run-2"))
    assert not local.s3 and local.spark_path("raw") == "/tmp/x/run-2/raw"
