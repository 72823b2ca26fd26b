"""``brokerbench cloud ami``: the current Debian 12 image of a region, from a stubbed EC2
client (no AWS)."""

from __future__ import annotations

from typing import Any

import boto3
import pytest
from botocore.stub import Stubber

from infra.settings import DEBIAN_IMAGE, DEBIAN_OWNER
from workload.shell import cloud, cloud_ami

REGION = "eu-west-1"
QUERY = {
    "Owners": [DEBIAN_OWNER],
    "Filters": [
        {"Name": "name", "Values": [DEBIAN_IMAGE]},
        {"Name": "architecture", "Values": ["x86_64"]},
        {"Name": "state", "Values": ["available"]},
    ],
}


def image(image_id: str, created: str) -> dict[str, Any]:
    return {"ImageId": image_id, "Name": f"debian-12-amd64-{created[:10]}", "CreationDate": created}


def stubbed(monkeypatch: pytest.MonkeyPatch, images: list[dict[str, Any]]) -> Stubber:
    ec2 = boto3.client("ec2", region_name=REGION, aws_access_key_id="x", aws_secret_access_key="x")
    stub = Stubber(ec2)
    stub.add_response("describe_images", {"Images": images}, QUERY)
    stub.activate()
    monkeypatch.setattr(cloud_ami, "aws_client", lambda service, region: ec2)
    return stub


def test_ami_prints_the_newest_debian_image_alone_on_stdout(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    stub = stubbed(
        monkeypatch,
        [
            image("ami-0aaa", "2025-01-10T10:00:00.000Z"),
            image("ami-0ccc", "2025-03-02T08:00:00.000Z"),
            image("ami-0bbb", "2025-02-20T09:00:00.000Z"),
        ],
    )
    assert cloud.main(["cloud", "ami", "--region", REGION]) == 0
    stub.assert_no_pending_responses()
    out, err = capsys.readouterr()
    assert out == "ami-0ccc\n"  # for pulumi config set brokerbench:ami $(…)
    assert "debian-12-amd64-2025-03-02" in err and "brokerbench:ami ami-0ccc" in err


def test_ami_without_an_image_says_so_in_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    stubbed(monkeypatch, [])
    assert cloud.main(["cloud", "ami", "--region", REGION]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"no image {DEBIAN_IMAGE}" in err and REGION in err


def test_ami_needs_a_region() -> None:
    with pytest.raises(SystemExit):
        cloud.main(["cloud", "ami"])
