"""The code a stack deploys: the same wheel for the same commit, the commit and a dirty tree
in the manifest, and ``pulumi up`` refusing a dirty tree unless the stack allows it."""

from __future__ import annotations

import hashlib
import json
import runpy
import shutil
import subprocess
import time
import zipfile
from pathlib import Path
from typing import Any

import pulumi
import pytest
import yaml

from infra import checks, program
from infra.mocking import AMI, deploy
from infra.settings import ROOT, StackConfigError
from infra.source import SourceState, build_wheel, source_state
from tests.test_infra_stacks import STACKS, deployable, with_recipes

pytestmark = pytest.mark.filterwarnings(
    "ignore:.*has been deprecated in favor of:DeprecationWarning"  # pulumi_aws's own aliases
)
COMMIT = "0123456789abcdef0123456789abcdef01234567"


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@example.invalid",
         *args],
        capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip


def test_the_same_commit_builds_the_same_wheel(tmp_path: Path) -> None:
    source = source_state(ROOT)
    first = build_wheel(ROOT, tmp_path / "a", source.commit_time)
    time.sleep(1.1)  # a build that read the clock would differ now
    second = build_wheel(ROOT, tmp_path / "b", source.commit_time)
    assert first.name == second.name and first.name.startswith("brokerbench-")
    assert (
        hashlib.sha256(first.read_bytes()).digest() == hashlib.sha256(second.read_bytes()).digest()
    )
    with zipfile.ZipFile(first) as wheel:
        infos = wheel.infolist()
    names = [i.filename for i in infos]
    assert names[-1].endswith(".dist-info/RECORD") and "infra/source.py" in names
    stamp = time.gmtime(source.commit_time - source.commit_time % 2)  # zip: 2 s steps
    assert {i.date_time for i in infos} == {stamp[:6]}
    assert {i.external_attr >> 16 for i in infos} == {0o100644}
    assert not any(n.startswith(("tests/", ".venv/", ".cache/")) for n in names)


def test_a_tree_is_dirty_when_it_differs_from_its_commit(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    (repo / ".gitignore").write_text("ignored/\n")
    (repo / "a.py").write_text("A = 1\n")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "one")
    (repo / "ignored").mkdir()
    (repo / "ignored" / "x").write_text("")
    clean = source_state(repo)
    assert clean.commit == git(repo, "rev-parse", "HEAD").strip() and not clean.dirty
    assert clean.commit_time == int(git(repo, "log", "-1", "--format=%ct"))
    assert clean.refusal("brokerbench:allowDirty") is None
    (repo / "a.py").write_text("A = 2\n")
    (repo / "b.py").write_text("")
    dirty = source_state(repo)
    assert dirty.dirty and dirty.changed == ("a.py", "b.py")
    assert dirty.refusal("brokerbench:allowDirty") == (
        f"the working tree differs from commit {clean.commit[:12]} (a.py, b.py): commit it, "
        "or set brokerbench:allowDirty true to deploy it as it is"
    )
    assert source_state(tmp_path / "nowhere").refusal("f") == (
        "this tree is no git checkout, so a run cannot name its code: set f true"
    )


def entry_point(
    monkeypatch: pytest.MonkeyPatch,
    wheel: Path,
    state: SourceState,
    *,
    stacks: Path | str | None = None,
    **extra: str,
) -> list[checks.Declared]:
    """``pulumi up`` of the postgresql stack (its entry point) on a checkout in ``state``;
    its stack files in ``stacks`` (a copy of the repository's beside the wheel by default:
    the program writes a run id it makes into the stack's file)."""
    with_recipes(monkeypatch)
    deployable("postgresql")
    if stacks is None:
        stacks = wheel.parent / "stacks"
        stacks.mkdir(exist_ok=True)
        shutil.copy(STACKS["postgresql"], stacks)
    stacks = Path(stacks)
    config = {
        key: json.dumps(value) if isinstance(value, dict | list | bool) else str(value)
        for key, value in yaml.safe_load((stacks / "Pulumi.postgresql.yaml").read_text())[
            "config"
        ].items()
    }
    config.update({"brokerbench:wheel": str(wheel), "brokerbench:ami": AMI, **extra})
    monkeypatch.setattr(program, "source_state", lambda root: state)
    monkeypatch.setattr(program, "STACKS_DIR", stacks)
    monkeypatch.setattr(pulumi, "export", lambda key, value: None)
    _, resources = deploy(
        lambda: runpy.run_path(str(ROOT / "stacks" / "__main__.py")), "postgresql", config
    )
    return resources


def manifest_of(resources: list[checks.Declared]) -> dict[str, Any]:
    (manifest,) = [
        r for r in checks.of_type(resources, "s3/bucketObjectv2:BucketObjectv2")
        if r.inputs["key"].endswith("/manifest.json")
    ]  # fmt: skip
    document: dict[str, Any] = json.loads(manifest.inputs["content"])
    return document


def test_up_refuses_a_dirty_tree_unless_the_stack_allows_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    wheel = tmp_path / "brokerbench-0.1.0-py3-none-any.whl"
    wheel.write_bytes(b"PK\x05\x06" + b"\0" * 18)
    dirty = SourceState(COMMIT, True, 1_700_000_000, ("infra/nodes.py",))
    with pytest.raises(StackConfigError) as raised:
        entry_point(monkeypatch, wheel, dirty)
    assert raised.value.lines == [
        "the working tree differs from commit 0123456789ab (infra/nodes.py): commit it, "
        "or set brokerbench:allowDirty true to deploy it as it is"
    ]
    allowed = entry_point(monkeypatch, wheel, dirty, **{"brokerbench:allowDirty": "true"})
    assert manifest_of(allowed)["source"] == {"commit": COMMIT, "dirty": True}
    clean = entry_point(monkeypatch, wheel, SourceState(COMMIT, False, 1_700_000_000))
    assert manifest_of(clean)["source"] == {"commit": COMMIT, "dirty": False}


def pulumi_config_set(stack_file: Path, key: str, value: str) -> None:
    """What ``pulumi config set KEY VALUE`` does to the stack's file (``stackConfigDir``)."""
    document = yaml.safe_load(stack_file.read_text()) or {}
    document.setdefault("config", {})[key] = value
    stack_file.write_text(yaml.safe_dump(document, sort_keys=False))


def test_the_readme_config_steps_leave_a_clean_clone_deployable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A stack's own settings are not code: docs/aws.md's pulumi config set steps write the
    tracked stacks/Pulumi.<stack>.yaml, and pulumi up then deploys the clone as clean."""
    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "--quiet", str(ROOT), str(clone)], check=True)
    stack_file = clone / "stacks" / "Pulumi.postgresql.yaml"
    for key, value in (
        ("aws:region", "us-east-1"),
        ("brokerbench:ami", AMI),
        ("brokerbench:runId", "postgresql-2026-11-21"),
        ("brokerbench:adminCidr", "203.0.113.7/32"),
    ):
        pulumi_config_set(stack_file, key, value)
    state = source_state(clone)
    assert git(clone, "status", "--porcelain").strip() == "M stacks/Pulumi.postgresql.yaml"
    assert not state.dirty and state.refusal("brokerbench:allowDirty") is None
    wheel = tmp_path / "brokerbench-0.1.0-py3-none-any.whl"
    wheel.write_bytes(b"PK\x05\x06" + b"\0" * 18)
    resources = entry_point(monkeypatch, wheel, state, stacks=clone / "stacks")
    manifest = manifest_of(resources)
    assert manifest["source"] == {"commit": state.commit, "dirty": False}
    assert manifest["run_id"] == "postgresql-2026-11-21"
    assert manifest["settings"]["adminCidr"] == "203.0.113.7/32"
