"""``brokerbench cloud ami``: the current Debian 12 image of a region, to pin in a stack.

A stack never looks its image up (``brokerbench:ami`` is required): an image that changed
between two ``pulumi up`` would replace every machine, also in the middle of a run. This
command is the look-up, made once, when the user chooses to:
``pulumi config set brokerbench:ami $(brokerbench cloud ami --region us-east-1)``.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from infra.settings import DEBIAN_IMAGE, DEBIAN_OWNER
from workload.model.errors import UserError
from workload.shell.cloud_run import aws_client


def current_image(ec2: Any, region: str) -> dict[str, Any]:
    """The newest available Debian 12 x86_64 image Debian publishes in ``ec2``'s region."""
    try:
        images = ec2.describe_images(
            Owners=[DEBIAN_OWNER],
            Filters=[
                {"Name": "name", "Values": [DEBIAN_IMAGE]},
                {"Name": "architecture", "Values": ["x86_64"]},
                {"Name": "state", "Values": ["available"]},
            ],
        )["Images"]
    except Exception as exc:  # credentials, network, permissions: one line, not a trace
        raise UserError(f"cannot list the images of {region}: {exc}") from None
    if not images:
        raise UserError(f"no image {DEBIAN_IMAGE} of owner {DEBIAN_OWNER} in {region}")
    newest: dict[str, Any] = max(images, key=lambda image: str(image["CreationDate"]))
    return newest


def cmd_ami(args: argparse.Namespace) -> int:
    """Print the image id (alone on stdout, for ``$(…)``), its name and date on stderr."""
    image = current_image(aws_client("ec2", args.region), args.region)
    print(image["ImageId"])
    print(
        f"{image.get('Name', '')}, created {image['CreationDate']}: pin it with pulumi config "
        f"set brokerbench:ami {image['ImageId']}",
        file=sys.stderr,
    )
    return 0
