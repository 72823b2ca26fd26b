"""Client machines install exactly the versions the test suite runs with: the committed lock
(``infra/clients.lock``), whatever the environment that deploys has installed; each run's
manifest records them, and how the broker is installed."""

from __future__ import annotations

import json
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

from brokers import registry
from infra import checks, constraints
from infra.constraints import LOCK, client_constraints, read_lock
from infra.mocking import deploy
from infra.program import build
from infra.source import SourceState
from tests.test_infra_stacks import REGION, deployable, no_packed_python, with_recipes

pytestmark = pytest.mark.filterwarnings(
    "ignore:.*has been deprecated in favor of:DeprecationWarning"  # pulumi_aws's own aliases
)
__all__ = ["no_packed_python"]  # the fixture, autouse here too
CLEAN = SourceState("0123456789abcdef0123456789abcdef01234567", False, 1_700_000_000)


def test_the_lock_is_what_the_test_suite_runs_with() -> None:
    assert read_lock().text() == client_constraints().text(), (
        "the client lock is not this environment's: python -m infra.constraints > "
        f"{LOCK.relative_to(LOCK.parents[1])}"
    )
    lock = read_lock()
    assert "redis" in lock.pins and "pyspark" not in lock.pins and "pulumi" not in lock.pins


class Elsewhere:
    """A distribution as another machine has it: every version 0.0.1."""

    def __init__(self, real: Any) -> None:
        self.requires = real.requires
        self.version = "0.0.1"


def test_clients_install_the_lock_whoever_deploys(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wheel = tmp_path / "brokerbench-0.1.0-py3-none-any.whl"
    wheel.write_bytes(b"PK\x05\x06" + b"\0" * 18)
    real = metadata.distribution
    monkeypatch.setattr(constraints.metadata, "distribution", lambda name: Elsewhere(real(name)))
    assert set(client_constraints().unpinned) > {"redis"}  # this machine's versions differ
    with_recipes(monkeypatch)
    settings = deployable("redis").model_copy(update={"run_id": "redis-lock-1"})
    deployment, resources = deploy(
        lambda: build(settings, "redis", REGION, wheel=wheel, source=CLEAN)
    )
    objects = {
        o.inputs["key"]: o.inputs["content"]
        for o in checks.of_type(resources, "s3/bucketObjectv2:BucketObjectv2")
        if "content" in o.inputs
    }
    assert objects[deployment.layout.constraints_key] == LOCK.read_text()
    manifest = json.loads(objects[deployment.layout.manifest_key])
    assert manifest["client_versions"] == read_lock().pins
    recipe = registry.get("redis").cloud
    assert recipe is not None and manifest["broker_install"] == recipe.install_commands()
