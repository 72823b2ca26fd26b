"""The code a stack deploys: which commit it is, whether the tree differs from it, and the
wheel built from it — the same bytes for the same commit.

The wheel is built from a copy of the files git knows in this checkout (tracked and
untracked-but-not-ignored; never ``build/`` leftovers or ignored files), with
``SOURCE_DATE_EPOCH`` at the commit's time and the build tools of this environment (no
build isolation, so no newer setuptools fetched on the day), and then written again with
its entries in a fixed order, every timestamp at the commit's time and fixed permissions.
So two builds of one commit upload the same object, and a run names the commit it ran.

A stack's own settings are not code: ``pulumi config set`` writes them into the tracked
``stacks/Pulumi.<stack>.yaml`` (:data:`STACK_SETTINGS`), and a change there leaves the tree
clean (the manifest records the settings themselves).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path

#: Zip timestamps start in 1980; an older epoch (a tree without git) is clamped to it.
ZIP_EPOCH = 315532800
#: The stacks' settings files (``pulumi config set`` writes them): not code, never dirty.
STACK_SETTINGS = ("stacks/Pulumi.*.yaml",)


class SourceError(ValueError):
    """The source cannot be deployed (a dirty tree not allowed, a build that failed)."""


@dataclass(frozen=True)
class SourceState:
    """The checkout a stack deploys from."""

    #: The commit checked out ("" when the tree is no git checkout).
    commit: str
    #: Files differ from the commit (changed, staged or new and not ignored).
    dirty: bool
    #: Unix time of the commit (0 without one): the wheel's timestamps.
    commit_time: int = 0
    #: What differs, as ``git status --porcelain`` names it (the first few).
    changed: tuple[str, ...] = ()

    def refusal(self, flag: str) -> str | None:
        """The one line refusing this tree unless ``flag`` allows it; None when clean."""
        if not self.dirty:
            return None
        if not self.commit:
            return f"this tree is no git checkout, so a run cannot name its code: set {flag} true"
        sample = ", ".join(self.changed[:3]) + (" …" if len(self.changed) > 3 else "")
        return (
            f"the working tree differs from commit {self.commit[:12]} ({sample}): commit it, "
            f"or set {flag} true to deploy it as it is"
        )


def _git(root: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", "-C", str(root), *args], capture_output=True, text=True, check=False
        )
    except OSError:
        return None
    return done.stdout if done.returncode == 0 else None


def source_state(root: Path, settings: tuple[str, ...] = STACK_SETTINGS) -> SourceState:
    """The commit of ``root`` and whether its code differs from it (files matching
    ``settings``, the stacks' own settings, do not count)."""
    commit = (_git(root, "rev-parse", "HEAD") or "").strip()
    status = _git(root, "status", "--porcelain", "--untracked-files=normal")
    if not commit or status is None:
        return SourceState(commit="", dirty=True)
    paths = (line[3:].split(" -> ")[-1].strip('"') for line in status.splitlines() if line.strip())
    changed = tuple(p for p in paths if not any(fnmatchcase(p, glob) for glob in settings))
    when = (_git(root, "log", "-1", "--format=%ct", "HEAD") or "0").strip()
    return SourceState(commit, bool(changed), int(when or 0), changed)


def _source_files(root: Path) -> list[str]:
    """The files git knows in ``root`` (tracked, and new but not ignored) that exist."""
    listed = _git(root, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
    if listed is None:
        raise SourceError(f"{root}: not a git checkout, so its files cannot be told apart")
    return sorted({n for n in listed.split("\0") if n and (root / n).is_file()})


def build_wheel(root: Path, out_dir: Path, epoch: int) -> Path:
    """Build ``root``'s wheel into ``out_dir`` (older wheels there removed): from a copy of
    its files, at ``epoch`` (``SOURCE_DATE_EPOCH``), then normalised (:func:`normalise`)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    for old in out_dir.glob("*.whl"):
        old.unlink()
    epoch = max(epoch, ZIP_EPOCH)
    with tempfile.TemporaryDirectory(prefix="brokerbench-wheel-") as scratch:
        tree = Path(scratch) / "src"
        for name in _source_files(root):
            target = tree / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(root / name, target)
        pip = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation"]
        done = subprocess.run(
            [*pip, "--no-index", "--quiet", "--wheel-dir", str(out_dir), str(tree)],
            capture_output=True,
            text=True,
            check=False,
            env={**os.environ, "SOURCE_DATE_EPOCH": str(epoch), "PYTHONHASHSEED": "0"},
        )
    wheels = sorted(out_dir.glob("*.whl"))
    if done.returncode != 0 or len(wheels) != 1:
        raise SourceError(f"building the wheel failed: {done.stderr.strip()[-500:]}")
    normalise(wheels[0], epoch)
    return wheels[0]


def normalise(wheel: Path, epoch: int) -> None:
    """Write ``wheel`` again: entries sorted (``.dist-info`` last, ``RECORD`` at the very
    end, as the wheel format asks), each dated ``epoch``, mode 0644, deflated."""
    stamp = time.gmtime(max(epoch, ZIP_EPOCH))[:6]
    with zipfile.ZipFile(wheel) as source:
        entries = {info.filename: source.read(info) for info in source.infolist()}

    def order(name: str) -> tuple[int, str]:
        top = name.split("/", 1)[0]
        rank = 2 if name.endswith(".dist-info/RECORD") else int(top.endswith(".dist-info"))
        return rank, name

    scratch = wheel.with_suffix(".tmp")
    with zipfile.ZipFile(scratch, "w") as target:
        for name in sorted(entries, key=order):
            info = zipfile.ZipInfo(name, date_time=stamp)
            info.compress_type = zipfile.ZIP_DEFLATED
            info.create_system = 3  # unix, so the mode below is read
            info.external_attr = (0o100644 & 0xFFFF) << 16
            target.writestr(info, entries[name], compresslevel=9)
    scratch.replace(wheel)
