"""The local Spark JVM's class archive (analysis.class_archive): written once at an orderly
exit, mapped by every later JVM, never kept when its JVM did not exit normally, and
harmless when it cannot be used."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from analysis.class_archive import class_archive
from tests.conftest import ROOT


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("BROKERBENCH_CACHE", str(tmp_path))
    return tmp_path / "spark"


def test_a_missing_archive_is_written_and_a_present_one_mapped(cache: Path) -> None:
    archive = class_archive({})
    assert archive is not None and archive.pending is not None
    assert f"-XX:ArchiveClassesAtExit={archive.pending}" in archive.java_options
    archive.pending.write_bytes(b"classes")
    archive.keep(exited_normally=True)
    assert archive.path.read_bytes() == b"classes" and not archive.pending.exists()
    again = class_archive({})
    assert again is not None and again.pending is None and again.path == archive.path
    assert f"-XX:SharedArchiveFile={archive.path}" in again.java_options


def test_what_a_jvm_that_did_not_exit_normally_wrote_is_not_kept(cache: Path) -> None:
    archive = class_archive({})
    assert archive is not None and archive.pending is not None
    archive.pending.write_bytes(b"half an archive")
    archive.keep(exited_normally=False)
    assert not archive.pending.exists() and not archive.path.exists()
    archive.keep(exited_normally=True)  # nothing written: nothing kept
    assert not archive.path.exists()


def test_settings_that_add_to_the_class_path_have_no_archive_and_others_the_same(
    cache: Path,
) -> None:
    plain = class_archive({})
    other = class_archive({"spark.sql.shuffle.partitions": "7"})
    assert plain is not None and other is not None and other.path == plain.path
    assert class_archive({"spark.jars.packages": "org.apache.hadoop:hadoop-aws:3.3.4"}) is None


def test_a_session_that_may_not_write_one_maps_it_only(cache: Path) -> None:
    assert class_archive({}, write=False) is None
    archive = class_archive({})
    assert archive is not None and archive.pending is not None
    archive.pending.write_bytes(b"classes")
    archive.keep(exited_normally=True)
    mapped = class_archive({}, write=False)
    assert mapped is not None and mapped.pending is None


def test_a_temporary_archive_left_by_a_killed_jvm_is_removed_later(cache: Path) -> None:
    cache.mkdir(parents=True)
    stale, fresh = cache / "classes-0.1.tmp", cache / "classes-0.2.tmp"
    stale.write_bytes(b"x")
    fresh.write_bytes(b"x")
    old = time.time() - 2 * 3600
    os.utime(stale, (old, old))
    class_archive({})
    assert not stale.exists() and fresh.exists()


def test_a_damaged_archive_is_not_used_and_nothing_is_said(cache: Path) -> None:
    archive = class_archive({})
    assert archive is not None and archive.pending is not None
    archive.pending.write_bytes(os.urandom(4096))
    archive.keep(exited_normally=True)
    mapped = class_archive({})
    assert mapped is not None and mapped.pending is None
    done = subprocess.run(
        ["java", *mapped.java_options.split(), "-version"], capture_output=True, text=True
    )
    assert done.returncode == 0
    assert "archive" not in (done.stdout + done.stderr).lower()


SESSION = """
import sys
from pathlib import Path
from analysis import session as S
spark = S.spark_session("archive-test", cores=1, raw=0)
assert spark.range(5).count() == 5
pid = spark._jvm.java.lang.ProcessHandle.current().pid()
print("writes" if S.writes_class_archive() else "maps")
print("mapped" if sys.argv[1] in Path(f"/proc/{pid}/maps").read_text() else "not mapped")
spark.stop()
S.end_local_jvm(orderly=True)
"""


@pytest.mark.slow
def test_the_first_local_jvm_writes_the_archive_and_the_next_maps_it(cache: Path) -> None:
    def session() -> list[str]:
        archive = class_archive({})
        assert archive is not None
        done = subprocess.run(
            [sys.executable, "-c", SESSION, str(archive.path)],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout.split("\n")[:2]

    assert session() == ["writes", "not mapped"]
    (written,) = cache.glob("*.jsa")
    assert written.stat().st_size > 1_000_000 and not list(cache.glob("*.tmp"))
    assert session() == ["maps", "mapped"]
