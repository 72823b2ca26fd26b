"""A run's id under Pulumi's mocks: unique by default (scenario, UTC time, random), kept in
the stack's file so that preview, update and a later ``up`` agree, and never deployed anew
once its run has begun."""

from __future__ import annotations

import json
import runpy
import shutil
from datetime import UTC, datetime
from pathlib import Path

import pulumi
import pytest
import yaml

from infra import checks, program
from infra.mocking import AMI, deploy
from infra.program import build
from infra.run_id import new_run_id, remember_run_id, remembered_run_id
from infra.settings import ROOT, RUN_ID
from infra.source import SourceState
from tests.test_infra_stacks import REGION, STACKS, deployable, no_packed_python, with_recipes

pytestmark = pytest.mark.filterwarnings(
    "ignore:.*has been deprecated in favor of:DeprecationWarning"  # pulumi_aws's own aliases
)
__all__ = ["no_packed_python"]  # the fixture, autouse here too
CLEAN = SourceState("0123456789abcdef0123456789abcdef01234567", False, 1_700_000_000)


@pytest.fixture
def wheel(tmp_path: Path) -> Path:
    path = tmp_path / "brokerbench-0.1.0-py3-none-any.whl"
    path.write_bytes(b"PK\x05\x06" + b"\0" * 18)
    return path


def test_a_new_run_id_is_the_scenario_the_utc_time_and_four_random_digits() -> None:
    when = datetime(2026, 11, 21, 14, 5, tzinfo=UTC)
    assert new_run_id("kafka-sweep", when, "7f3a") == "kafka-sweep-20261121-1405-7f3a"
    long = new_run_id("A Very Long Scenario Name For A Soak Of Three Days", when, "00ff")
    assert RUN_ID.match(long) and len(long) == 48 and long.endswith("-20261121-1405-00ff")
    made = {new_run_id("kafka-sweep") for _ in range(20)}
    assert len(made) > 1 and all(RUN_ID.match(m) for m in made)


def test_a_made_run_id_is_kept_in_the_stack_file(tmp_path: Path) -> None:
    stack_file = tmp_path / "Pulumi.kafka.yaml"
    shutil.copy(STACKS["kafka"], stack_file)
    before = yaml.safe_load(stack_file.read_text())["config"]
    assert remembered_run_id(stack_file) is None
    assert remember_run_id(stack_file, "kafka-sweep-20261121-1405-7f3a")
    after = yaml.safe_load(stack_file.read_text())["config"]
    assert after == {**before, "brokerbench:runId": "kafka-sweep-20261121-1405-7f3a"}
    assert remembered_run_id(stack_file) == "kafka-sweep-20261121-1405-7f3a"
    bare = tmp_path / "Pulumi.bare.yaml"
    bare.write_text("encryptionsalt: v1:abc\n")
    assert remember_run_id(bare, "r-1") and remembered_run_id(bare) == "r-1"
    assert not remember_run_id(tmp_path / "Pulumi.none.yaml", "r-1")


def up(monkeypatch: pytest.MonkeyPatch, stacks: Path, config: dict[str, str]) -> str:
    """One run of the program's entry point (a preview or an update); the run id it exported."""
    exported: dict[str, object] = {}
    monkeypatch.setattr(program, "source_state", lambda root: CLEAN)
    monkeypatch.setattr(program, "STACKS_DIR", stacks)
    monkeypatch.setattr(pulumi, "export", lambda key, value: exported.__setitem__(key, value))
    deploy(lambda: runpy.run_path(str(ROOT / "stacks" / "__main__.py")), "postgresql", config)
    return str(exported["run_id"])


def test_up_without_a_run_id_makes_one_and_every_later_up_keeps_it(
    tmp_path: Path, wheel: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with_recipes(monkeypatch)
    deployable("postgresql")
    stacks = tmp_path / "stacks"
    stacks.mkdir()
    shutil.copy(STACKS["postgresql"], stacks)
    # Pulumi reads the stack's config once per command: preview and update both get it
    # without a run id.
    document = yaml.safe_load((stacks / "Pulumi.postgresql.yaml").read_text())["config"]
    config = {k: str(v) for k, v in document.items()}
    config.update({"brokerbench:wheel": str(wheel), "brokerbench:ami": AMI})
    preview = up(monkeypatch, stacks, config)
    assert RUN_ID.match(preview) and preview.startswith("postgresql-sweep-20")
    assert remembered_run_id(stacks / "Pulumi.postgresql.yaml") == preview
    assert up(monkeypatch, stacks, config) == preview  # the update deploys what preview showed
    # another stack file, another run
    other = tmp_path / "other"
    other.mkdir()
    shutil.copy(STACKS["postgresql"], other)
    assert up(monkeypatch, other, config) != preview


def test_a_begun_run_is_not_deployed_anew(wheel: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with_recipes(monkeypatch)
    settings = deployable("redis").model_copy(update={"run_id": "redis-run-1"})
    bucket = "results-4f3c2a1"  # what the mocks name the bucket

    def deployed(objects: dict[str, str]) -> list[checks.Declared]:
        _, resources = deploy(
            lambda: build(settings, "redis", REGION, wheel=wheel, source=CLEAN), objects=objects
        )
        return resources

    first = deployed({})  # nothing in the bucket yet
    (kept,) = [
        r for r in checks.of_type(first, "s3/bucketObjectv2:BucketObjectv2")
        if r.inputs["key"] == "runs/redis-run-1/manifest.json"
    ]  # fmt: skip
    manifest = kept.inputs["content"]
    assert json.loads(manifest)["fingerprint"]
    begun = {"runs/redis-run-1/control/sender-0.started": "{}"}
    # the same deployment again: nothing new, allowed
    assert deployed({**begun, "runs/redis-run-1/manifest.json": manifest})
    # another scenario, settings or code on the begun run: refused in one line
    changed = json.dumps({**json.loads(manifest), "fingerprint": "0123abcd"})
    with pytest.raises(ValueError) as refused:  # raised where a machine's user-data waits
        deployed({**begun, "runs/redis-run-1/manifest.json": changed})
    line = str(refused.value).splitlines()[-1].split(" has risen: ")[-1]
    assert line.startswith("brokerbench:runId redis-run-1: this run has begun (its markers are in ")
    assert f"s3://{bucket}/runs/redis-run-1/control/" in line
    assert "pulumi config rm brokerbench:runId" in line
