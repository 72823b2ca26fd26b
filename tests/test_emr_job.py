"""The analysis job as EMR Serverless runs it, here.

The wheel the stack uploads (as Spark's ``--py-files``) and the entry script it renders are
put in a local S3 server (moto) with a run's raw records; spark-submit in local mode runs
them with the very parameters ``brokerbench cloud analyze`` submits, under an interpreter
that can import PySpark and the job's libraries but not this source tree, so the job's code
and package data can only come from the zip. Local mode adds only what EMR provides
itself: ``s3://`` read and written through the S3A connector (EMRFS on EMR), a master, and
JVM logging.

And ``brokerbench cloud analyze`` submits only to an application with a custom image.
"""

from __future__ import annotations

import csv
import io
import json
import os
import platform
import shlex
import subprocess
import sysconfig
import venv
from pathlib import Path
from typing import Any

import boto3
import pytest
from moto import mock_aws

from analysis.prices import load_prices
from analysis.storage import hadoop_aws_jars, s3a_settings
from infra.plan import BucketLayout
from infra.userdata import analysis_entry
from tests import test_analysis_s3
from tests.test_analysis_s3 import CREDENTIALS, synthetic
from workload.shell import cloud, cloud_analyze, cloud_run

BUCKET = "results"
RUN = "bench-analysis"  # the run id of the synthetic run's context
REGION = "us-east-1"
MESSAGES = 20_000
ROLE = "arn:aws:iam::123456789012:role/analysis-job"
IMAGE = "123456789012.dkr.ecr.us-east-1.amazonaws.com/brokerbench-emr:7.5.0"
#: Logging for the local JVM (errors only): the repository's, not read by the job.
LOG_CONFIG = Path(__file__).resolve().parent.parent / "analysis" / "log4j2.properties"
#: Imports the job's libraries and prints where ``analysis`` would come from.
FINDS_THE_PROJECT = (
    "import importlib.util, pyspark, pyarrow, pydantic, boto3; "
    "print(importlib.util.find_spec('analysis'))"
)
#: The local S3 server of the S3 analysis test (a module-scoped fixture), here too.
s3_endpoint = test_analysis_s3.s3_endpoint


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel the stack uploads, built as the stack builds it."""
    from infra.program import build_wheel

    return build_wheel(tmp_path_factory.mktemp("wheel"))


@pytest.fixture(scope="module")
def job_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A Python with this virtualenv's libraries (PySpark, pyarrow, pydantic, boto3) but not
    this project: a new virtualenv whose one ``.pth`` line names our site-packages. Python
    runs the ``.pth`` files of its own site-packages only, so the editable install's finder
    in ours never runs and ``import analysis`` has nothing to find."""
    root = tmp_path_factory.mktemp("job-python")
    venv.create(root, with_pip=False)
    python = root / "bin" / "python"
    site = run_python(python, "import sysconfig; print(sysconfig.get_paths()['purelib'])")
    (Path(site) / "brokerbench-libraries.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    return python


def bare_env() -> dict[str, str]:
    """Our environment without any Python or PySpark setting."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "PYSPARK"))}


def run_python(python: Path, code: str, *path: Path) -> str:
    """What ``code`` prints, run by ``python`` with only ``path`` as PYTHONPATH, in a
    directory holding nothing importable."""
    done = subprocess.run(
        [python, "-c", code],
        capture_output=True,
        text=True,
        cwd=python.parent,
        env={**bare_env(), "PYTHONPATH": os.pathsep.join(map(str, path))},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def job_env(s3: str, python: Path) -> dict[str, str]:
    """The environment of the job: no Python path, ``python``, the local S3 server."""
    return {**bare_env(), **CREDENTIALS, "AWS_ENDPOINT_URL": s3, "PYSPARK_PYTHON": str(python)}


def local_s3_for_spark(jars: list[Path]) -> list[str]:
    """spark-submit options giving local mode what EMR has: ``s3://`` (here through S3A,
    on the submitting JVM's class path, which fetches the entry script and the zip); and
    the JVM logging only errors, so that its output is the job's."""
    settings = {
        **s3a_settings(jars),
        "spark.hadoop.fs.s3.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.driver.host": "127.0.0.1",
        "spark.ui.enabled": "false",
        "spark.driver.extraJavaOptions": f"-Dlog4j2.configurationFile=file:{LOG_CONFIG}",
    }
    options = ["--master", "local[2]", "--driver-memory", "1g"]
    options += ["--driver-class-path", ":".join(str(j) for j in jars)]
    for key, value in settings.items():
        options += ["--conf", f"{key}={value}"]
    return options


def put_run(s3: Any, run_dir: Path, layout: BucketLayout) -> None:
    for path in sorted(run_dir.rglob("*")):
        if path.is_file():
            s3.upload_file(str(path), BUCKET, layout.run_prefix + str(path.relative_to(run_dir)))


def test_the_wheel_alone_gives_the_job_its_code_and_package_data(
    wheel: Path, job_python: Path
) -> None:
    """What the job's interpreter imports comes from the zip, package data included: the
    price table and the files local mode hands to Java (copied out of the zip for it)."""
    assert run_python(job_python, FINDS_THE_PROJECT) == "None"
    probe = """if True:
        from importlib.resources import as_file
        import analysis.job
        from analysis.prices import load_prices
        from analysis.session import LOG_CONFIG
        from analysis.storage import POM
        print(analysis.job.__file__)
        print(load_prices().version)
        for resource in (LOG_CONFIG, POM):
            with as_file(resource) as path:
                print(path.read_text() == resource.read_text() != "")
    """
    job, version, log_config, pom = run_python(job_python, probe, wheel).splitlines()
    assert job == f"{wheel}/analysis/job.py"
    assert version == load_prices().version  # the newest table, from the wheel's data
    assert log_config == pom == "True"


@pytest.mark.slow
@pytest.mark.spark
def test_emr_job_runs_from_the_uploaded_wheel_and_entry_script(
    s3_endpoint: str,
    wheel: Path,
    job_python: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import pyspark

    assert run_python(job_python, FINDS_THE_PROJECT) == "None"  # only the zip will hold it
    jars = hadoop_aws_jars()  # fetched once into the artifact cache
    env = job_env(s3_endpoint, job_python)
    for key in (*CREDENTIALS, "AWS_ENDPOINT_URL"):
        monkeypatch.setenv(key, env[key])

    # What the stack uploads: the wheel under its --py-files name, and the entry script.
    layout = BucketLayout(RUN, wheel.name)
    s3 = boto3.client("s3", endpoint_url=s3_endpoint)
    s3.create_bucket(Bucket=BUCKET)
    s3.upload_file(str(wheel), BUCKET, layout.py_files_key)
    s3.put_object(Bucket=BUCKET, Key=layout.entry_key, Body=analysis_entry(RUN, "analysis.job"))

    # A run as the client machines leave it, priced by its fleet like every run on AWS.
    run_dir = tmp_path / RUN
    run_dir.mkdir()
    sent = synthetic().generate(run_dir, MESSAGES, senders=2, threads=2, receivers=2)
    context = json.loads((run_dir / "context.json").read_text())
    context["cost"] = {"region": REGION, "instances": {"r5.2xlarge": 3, "c5.2xlarge": 6}}
    (run_dir / "context.json").write_text(json.dumps(context))
    put_run(s3, run_dir, layout)

    run = cloud_run.CloudRun(BUCKET, RUN, REGION, "application", "role")
    driver = cloud_analyze.analysis_job_driver(run, python=str(job_python))
    spark_home = Path(pyspark.__file__).parent
    command = [
        str(spark_home / "bin" / "spark-submit"),
        *local_s3_for_spark(jars),
        *shlex.split(driver["sparkSubmitParameters"]),
        driver["entryPoint"],
        *driver["entryPointArguments"],
    ]
    done = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
        env={**env, "SPARK_HOME": str(spark_home), "SPARK_LOCAL_IP": "127.0.0.1"},
        check=False,
    )
    output = done.stdout + done.stderr  # the job's stderr reaches spark-submit's stdout
    assert done.returncode == 0, output[output.find("Traceback") :][-4000:]

    body = s3.get_object(Bucket=BUCKET, Key=layout.analysis_prefix + "summary.csv")["Body"]
    rows = list(csv.DictReader(io.StringIO(body.read().decode())))
    assert len(rows) == len(context["points"])
    (row,) = rows
    assert (int(row["sent"]), int(row["received"]), row["lost"]) == (sent, sent, "0")
    assert float(row["cost_per_million_usd"]) > 0  # the price table, read from the zip
    windows = s3.list_objects_v2(Bucket=BUCKET, Prefix=layout.analysis_prefix + "windows/")
    assert any(o["Key"].endswith(".parquet") for o in windows.get("Contents", []))


# -- brokerbench cloud analyze: only on a custom image -------------------------------------


class EmrClient:
    """moto's EMR Serverless client as ``cloud analyze`` sees it: its applications report
    ``image`` (moto keeps no image configuration), and the job runs it starts are kept."""

    def __init__(self, emr: Any, image: str | None) -> None:
        self.emr = emr
        self.image = image
        self.started: list[dict[str, Any]] = []

    def get_application(self, **kwargs: Any) -> dict[str, Any]:
        response: dict[str, Any] = self.emr.get_application(**kwargs)
        if self.image:
            response["application"]["imageConfiguration"] = {"imageUri": self.image}
        return response

    def start_job_run(self, **kwargs: Any) -> dict[str, Any]:
        self.started.append(kwargs)
        response: dict[str, Any] = self.emr.start_job_run(**kwargs)
        return response

    def __getattr__(self, name: str) -> Any:
        return getattr(self.emr, name)


def deploy(
    monkeypatch: pytest.MonkeyPatch, image: str | None, environment: str = ""
) -> tuple[EmrClient, list[str]]:
    """In moto (started by the caller): a run's manifest in S3 and an EMR Serverless
    application with ``image``; the EMR client ``cloud analyze`` will use, and the
    arguments naming the run and the application."""
    s3 = boto3.client("s3", region_name=REGION)
    s3.create_bucket(Bucket=BUCKET)
    manifest = {"emr_python": "/usr/bin/python3.11", "points": [], "emr_environment": environment}
    key = BucketLayout(RUN, "brokerbench.whl").manifest_key
    s3.put_object(Bucket=BUCKET, Key=key, Body=json.dumps(manifest))
    emr = EmrClient(boto3.client("emr-serverless", region_name=REGION), image)
    app = emr.create_application(name="analysis", releaseLabel="emr-7.5.0", type="SPARK")
    monkeypatch.setattr(
        cloud_analyze,
        "aws_client",
        lambda service, region: emr if service == "emr-serverless" else s3,
    )
    target = ["--bucket", BUCKET, "--run-id", RUN, "--region", REGION]
    return emr, [*target, "--emr-application", app["applicationId"], "--emr-role", ROLE]


@mock_aws
def test_analyze_refuses_an_application_without_a_custom_image(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    emr, target = deploy(monkeypatch, image=None)
    assert cloud.main(["cloud", "analyze", *target, "--no-wait"]) == 2
    err = capsys.readouterr().err
    assert "has no custom image and the stack uploaded no packed Python environment" in err
    assert "uv python install 3.11" in err and "brokerbench:emrPythonHome" in err
    assert "Python ≥ 3.11 with pyarrow, pydantic and boto3" in err
    assert emr.started == []


@mock_aws
def test_analyze_runs_the_job_on_the_packed_environment_without_an_image(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    key = BucketLayout(RUN, "brokerbench.whl").environment_key
    emr, target = deploy(monkeypatch, image=None, environment=key)
    assert cloud.main(["cloud", "analyze", *target, "--poll", "0.05"]) == 0
    out = capsys.readouterr().out
    assert f"(packed environment s3://{BUCKET}/artifacts/{RUN}/pyenv.tar.gz)" in out
    (started,) = emr.started
    parameters = started["jobDriver"]["sparkSubmit"]["sparkSubmitParameters"].split(" --conf ")
    assert parameters[1:] == [
        f"spark.archives=s3://{BUCKET}/artifacts/{RUN}/pyenv.tar.gz#environment",
        "spark.emr-serverless.driverEnv.PYSPARK_DRIVER_PYTHON=./environment/bin/python",
        "spark.emr-serverless.driverEnv.PYSPARK_PYTHON=./environment/bin/python",
        "spark.executorEnv.PYSPARK_PYTHON=./environment/bin/python",
    ]  # and not the image's interpreter


@mock_aws
def test_analyze_submits_the_job_driver_on_a_custom_image(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    emr, target = deploy(monkeypatch, image=IMAGE)
    assert cloud.main(["cloud", "analyze", *target, "--poll", "0.05"]) == 0
    out = capsys.readouterr().out
    assert f"(image {IMAGE})" in out and "SUCCESS" in out
    (started,) = emr.started
    run = cloud_run.CloudRun(BUCKET, RUN, REGION, started["applicationId"], ROLE)
    expected = cloud_analyze.analysis_job_driver(run, "/usr/bin/python3.11")
    assert started["jobDriver"] == {"sparkSubmit": expected}
    assert expected["entryPoint"] == f"s3://{BUCKET}/artifacts/{RUN}/analysis_entry.py"
    parameters = expected["sparkSubmitParameters"]
    assert f"--py-files s3://{BUCKET}/artifacts/{RUN}/brokerbench.zip" in parameters
    assert "spark.emr-serverless.driverEnv.PYSPARK_PYTHON=/usr/bin/python3.11" in parameters


def test_entry_script_names_what_an_image_lacks(job_python: Path, tmp_path: Path) -> None:
    """Without the job's libraries (the bare interpreter of :func:`job_python`), the entry
    script stops at once with one line saying what is missing."""
    entry = tmp_path / "analysis_entry.py"
    entry.write_text(analysis_entry(RUN, "analysis.job"))
    done = subprocess.run(
        [job_python, "-S", entry, f"s3://{BUCKET}/runs/{RUN}/"],
        capture_output=True, text=True, cwd=tmp_path, env={"PATH": os.environ["PATH"]},
    )  # fmt: skip
    assert done.returncode == 1
    assert done.stderr.strip() == (
        f"brokerbench analysis: {job_python} (Python {platform.python_version()}) cannot run the job, "
        "which needs Python >= 3.11 with pyarrow, pydantic and boto3; "
        "missing: pyarrow, pydantic, boto3; see docs/aws.md"
    )
