"""``brokerbench cloud analyze``: submit the analysis job to the stack's EMR Serverless
application and follow it to the end."""

from __future__ import annotations

import argparse
import sys
import time
from typing import Any

from workload.model.errors import UserError
from workload.model.layout import LAYOUT
from workload.shell.cloud_run import CloudRun, aws_client, read_manifest, resolve_run

TERMINAL_JOB_STATES = {"SUCCESS", "FAILED", "CANCELLED"}

#: What the analysis job imports beyond PySpark; EMR's own images are not documented to
#: provide them (nor Python ≥ 3.11): the job runs on the packed environment the stack
#: uploads, or on a custom image that has them.
ANALYSIS_NEEDS = "Python ≥ 3.11 with pyarrow, pydantic and boto3"
#: Where Spark unpacks the packed environment (``spark.archives``'s ``#`` name), and its
#: interpreter there, relative to the driver's and every executor's working directory.
ENVIRONMENT_DIR = "environment"
ENVIRONMENT_PYTHON = f"./{ENVIRONMENT_DIR}/bin/python"


def analysis_job_driver(run: CloudRun, python: str = "", environment: str = "") -> dict[str, Any]:
    """The ``sparkSubmit`` job driver of a run's analysis, as EMR Serverless takes it.

    The entry script and the code (the wheel, named ``.zip`` for ``--py-files``) are the
    ones the stack uploaded; the argument is the run's S3 prefix. With ``environment`` (the
    S3 key of the packed Python environment the stack uploaded) Spark unpacks it beside the
    driver and every executor and its ``bin/python`` runs them; else ``python`` (the custom
    image's interpreter, the stack's ``emrPython``) does. ``cloud analyze`` submits exactly
    this, and the local test of the job runs spark-submit with it.
    """
    layout = run.bucket_layout
    parameters = [f"--py-files s3://{run.bucket}/{layout.py_files_key}"]
    if environment:
        parameters += [
            f"--conf spark.archives=s3://{run.bucket}/{environment}#{ENVIRONMENT_DIR}",
            f"--conf spark.emr-serverless.driverEnv.PYSPARK_DRIVER_PYTHON={ENVIRONMENT_PYTHON}",
            f"--conf spark.emr-serverless.driverEnv.PYSPARK_PYTHON={ENVIRONMENT_PYTHON}",
            f"--conf spark.executorEnv.PYSPARK_PYTHON={ENVIRONMENT_PYTHON}",
        ]
    elif python:
        parameters += [
            f"--conf spark.emr-serverless.driverEnv.PYSPARK_PYTHON={python}",
            f"--conf spark.executorEnv.PYSPARK_PYTHON={python}",
        ]
    return {
        "entryPoint": f"s3://{run.bucket}/{layout.entry_key}",
        "entryPointArguments": [run.run_uri],
        "sparkSubmitParameters": " ".join(parameters),
    }


def _require_application(run: CloudRun) -> None:
    if not run.emr_application_id or not run.emr_execution_role_arn:
        raise UserError("no EMR application/role: use --stack, or --emr-application and --emr-role")


def analysis_image(emr: Any, run: CloudRun) -> str:
    """The custom image of the run's EMR Serverless application; a :class:`UserError`
    saying what to do when it has none (the job cannot run on EMR's own image)."""
    _require_application(run)
    try:
        application = emr.get_application(applicationId=run.emr_application_id)["application"]
    except Exception as exc:
        raise UserError(
            f"EMR Serverless application {run.emr_application_id}: cannot read it ({exc})"
        ) from None
    image = str((application.get("imageConfiguration") or {}).get("imageUri") or "")
    if not image:
        raise UserError(
            f"EMR Serverless application {run.emr_application_id} has no custom image and "
            f"the stack uploaded no packed Python environment, and the analysis job needs "
            f"{ANALYSIS_NEEDS}: run uv python install 3.11 (or set brokerbench:emrPythonHome) "
            "and pulumi up, so that the stack packs one, then analyze again"
        )
    return image


def submit_analysis(emr: Any, run: CloudRun, python: str = "", environment: str = "") -> str:
    """Start the analysis job run on EMR Serverless; its job run id.

    ``environment`` is the packed Python environment's key, ``python`` the custom image's
    interpreter (both from the manifest; :func:`analysis_job_driver`).
    """
    _require_application(run)
    response = emr.start_job_run(
        applicationId=run.emr_application_id,
        executionRoleArn=run.emr_execution_role_arn,
        name=f"brokerbench-{run.run_id}",
        jobDriver={"sparkSubmit": analysis_job_driver(run, python, environment)},
        configurationOverrides={
            "monitoringConfiguration": {
                "s3MonitoringConfiguration": {"logUri": f"{run.run_uri}{LAYOUT.analysis_logs}"}
            }
        },
    )
    job_run_id: str = response["jobRunId"]
    return job_run_id


def follow_job(emr: Any, run: CloudRun, job_run_id: str, poll: float, timeout: float) -> str:
    """Print state changes until the job ends (or ``timeout``); its final state."""
    deadline = time.monotonic() + timeout
    state = ""
    while True:
        job = emr.get_job_run(applicationId=run.emr_application_id, jobRunId=job_run_id)["jobRun"]
        if job["state"] != state:
            state = job["state"]
            detail = f" ({job['stateDetails']})" if job.get("stateDetails") else ""
            print(f"analysis job {job_run_id}: {state}{detail}", flush=True)
        if state in TERMINAL_JOB_STATES or time.monotonic() >= deadline:
            return state
        time.sleep(poll)


def cmd_analyze(args: argparse.Namespace) -> int:
    run = resolve_run(args)
    emr = aws_client("emr-serverless", run.region)
    manifest = read_manifest(aws_client("s3", run.region), run)
    if manifest.emr_environment:
        _require_application(run)
        runs_on = f"packed environment s3://{run.bucket}/{manifest.emr_environment}"
    else:  # refuse before submitting a job that cannot run
        runs_on = f"image {analysis_image(emr, run)}"
    job_run_id = submit_analysis(emr, run, manifest.emr_python, manifest.emr_environment)
    print(
        f"submitted the analysis of {run.run_id} to EMR Serverless ({runs_on}): "
        f"job run {job_run_id}"
    )
    if args.no_wait:
        return 0
    state = follow_job(emr, run, job_run_id, args.poll, args.timeout)
    if state != "SUCCESS":
        print(
            f"brokerbench: analysis job ended {state or 'unknown'}; logs: {run.run_uri}{LAYOUT.analysis_logs}",
            file=sys.stderr,
        )
        return 1
    print(
        f"analysis written to {run.run_uri}{LAYOUT.analysis}/ — fetch it with: brokerbench cloud fetch"
    )
    return 0
