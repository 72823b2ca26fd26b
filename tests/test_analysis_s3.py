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

from analysis.storage import RunLocation, hadoop_aws_jars

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
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.stop()


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
