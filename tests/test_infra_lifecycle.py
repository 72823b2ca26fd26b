"""A stack's second day under Pulumi's mocks: a new run on an existing stack, and what
``pulumi destroy`` deletes or keeps."""

from __future__ import annotations

from pathlib import Path

import pytest

from infra import checks
from infra.checks import Declared, Options
from infra.mocking import deploy
from infra.program import build
from infra.settings import StackConfigError
from tests.test_infra_stacks import REGION, deployable, no_packed_python, with_recipes

pytestmark = pytest.mark.filterwarnings(
    "ignore:.*has been deprecated in favor of:DeprecationWarning"  # pulumi_aws's own aliases
)
INSTANCE = "aws:ec2/instance:Instance"
__all__ = ["no_packed_python"]  # the fixture, autouse here too


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("dist") / "brokerbench-0.1.0-py3-none-any.whl"
    path.write_bytes(b"PK\x05\x06" + b"\0" * 18)
    return path


def deployed(name: str, wheel: Path, **update: object) -> list[Declared]:
    settings = deployable(name).model_copy(update=update)
    _, resources = deploy(lambda: build(settings, name, REGION, wheel=wheel), stack=name)
    return resources


def test_a_fixed_address_without_delete_before_replace_is_found() -> None:
    fixed = Declared(INSTANCE, "broker-0", {"privateIp": "10.42.1.10"})
    ordered = Declared(
        INSTANCE, "broker-1", {"privateIp": "10.42.1.11"}, options=Options(True, False)
    )
    floating = Declared(INSTANCE, "client-0", {})
    assert checks.fixed_address_problems([fixed, ordered, floating]) == [
        "broker-0: fixed private address 10.42.1.10 but no delete_before_replace: "
        "a replacement fails with InvalidIPAddress.InUse"
    ]
    changed = Declared(
        INSTANCE, "broker-0", {"privateIp": "10.42.1.10", "userData": "b"}, options=Options()
    )
    before = Declared(INSTANCE, "broker-0", {"privateIp": "10.42.1.10", "userData": "a"})
    assert checks.replaced_instances([before], [changed]) == []  # user-data updated in place
    replacing = Declared(INSTANCE, "broker-0", {**changed.inputs, "userDataReplaceOnChange": True})
    assert checks.replaced_instances([before], [replacing]) == ["broker-0"]


def test_a_second_run_on_a_stack_deletes_each_machine_before_it_recreates_it(
    wheel: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with_recipes(monkeypatch)
    first = deployed("postgresql", wheel, run_id="pg-run-1")
    second = deployed("postgresql", wheel, run_id="pg-run-2")
    machines = checks.of_type(second, INSTANCE)
    # A new run id changes every machine's user-data, and so replaces every machine …
    assert sorted(checks.replaced_instances(first, second)) == sorted(m.name for m in machines)
    # … each at its planned address, which the old machine holds until it is deleted.
    assert all(m.inputs["privateIp"] for m in machines)
    assert all(m.options.delete_before_replace for m in machines)
    assert checks.fixed_address_problems(second) == []


def test_a_kept_bucket_without_its_protections_is_found() -> None:
    kept = Options(retain_on_delete=True)
    bucket = Declared("aws:s3/bucket:Bucket", "results", {}, "results-x1", options=kept)
    block = Declared("aws:s3/bucketPublicAccessBlock:BucketPublicAccessBlock", "block",
                     {"bucket": "results-x1"})  # fmt: skip
    kept_policy = Declared("aws:s3/bucketPolicy:BucketPolicy", "tls", {"bucket": "results-x1"},
                           options=kept)  # fmt: skip
    artifact = Declared("aws:s3/bucketObjectv2:BucketObjectv2", "wheel", {"bucket": "results-x1"})
    assert checks.kept_bucket_problems([bucket, block, kept_policy, artifact]) == [
        "block: configures the kept bucket results but is deleted on pulumi destroy "
        "(no retain_on_delete)"
    ]
    dropped = Declared("aws:s3/bucket:Bucket", "results", {}, "results-x1")
    assert checks.kept_bucket_problems([dropped, block]) == []


def test_the_kept_results_bucket_keeps_every_protection_on_destroy(
    wheel: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with_recipes(monkeypatch)
    resources = deployed("redis", wheel)
    (bucket,) = checks.of_type(resources, "s3/bucket:Bucket")
    assert bucket.options.retain_on_delete
    companions = {
        r.type.split(":")[-1]: r.options.retain_on_delete
        for r in resources
        if r.type.startswith("aws:s3/")
        and not r.type.endswith(checks.BUCKET_CONTENT)
        and r is not bucket
        and bucket.refers_to(r.inputs.get("bucket"))
    }
    assert companions == {
        "BucketOwnershipControls": True,
        "BucketPublicAccessBlock": True,
        "BucketServerSideEncryptionConfiguration": True,
        "BucketVersioning": True,
        "BucketPolicy": True,
    }
    assert checks.kept_bucket_problems(resources) == []
    assert checks.bucket_problems(resources) == []


def test_the_analysis_application_stops_itself_soon_after_its_last_job(
    wheel: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with_recipes(monkeypatch)
    (app,) = checks.of_type(deployed("redis", wheel), "emrserverless/application:Application")
    # EMR Serverless deletes only a STOPPED (or CREATED) application: pulumi destroy after
    # an analysis waits at most the idle timeout (1 minute, the least EMR allows).
    assert app.inputs["autoStopConfiguration"] == {"enabled": True, "idleTimeoutMinutes": 1}
    assert app.inputs["autoStartConfiguration"] == {"enabled": True}


def test_the_machine_image_is_pinned_never_looked_up(
    wheel: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with_recipes(monkeypatch)
    floating = deployable("redis").model_copy(update={"ami": None})
    with pytest.raises(StackConfigError) as raised:
        build(floating, "redis", REGION, wheel=wheel)
    assert raised.value.lines == [
        "brokerbench:ami is not set: pin the machine image, e.g. pulumi config set "
        f"brokerbench:ami $(brokerbench cloud ami --region {REGION})"
    ]
    # Pinned, every machine boots exactly it (the mocks answer no image look-up).
    machines = checks.of_type(deployed("redis", wheel, ami="ami-0pinned"), INSTANCE)
    assert {m.inputs["ami"] for m in machines} == {"ami-0pinned"}
