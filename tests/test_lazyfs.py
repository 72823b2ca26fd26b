"""The lazy filesystem (brokers/lazyfs): what survives a power cut and what does not, the
memory bound, and that no mount outlives a cut, an unmount or a killed filesystem.

The tests that mount are slow (a mount each); they are skipped with the missing line where
this machine has no FUSE."""

from __future__ import annotations

import mmap
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from brokers import lazyfs
from brokers.lazyfs import LazyMount

MiB = 1 << 20


@pytest.fixture(scope="module")
def ready() -> None:
    """Build the program if Go is here and nothing else is missing; skip naming what is."""
    reason = lazyfs.missing()
    if reason and "not built" in reason and lazyfs.go_binary() is not None:
        lazyfs.build(lambda line: None)
        reason = lazyfs.missing()
    if reason:
        pytest.skip(reason)


@pytest.fixture
def dirs(tmp_path: Path) -> tuple[Path, Path]:
    backing, mount = tmp_path / "data", tmp_path / "mnt"
    backing.mkdir()
    mount.mkdir()
    return backing, mount


@pytest.fixture
def lazy(ready: None, dirs: tuple[Path, Path]) -> Iterator[LazyMount]:
    with LazyMount(*dirs) as mounted:
        yield mounted


def write(path: Path, data: bytes, sync: str = "", flags: int = 0, offset: int = -1) -> None:
    """Write ``data`` to ``path`` (created; at ``offset`` or appended), then ``sync`` it:
    "", "fsync" or "fdatasync"."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | flags, 0o644)
    try:
        if offset < 0:
            os.lseek(fd, 0, os.SEEK_END)
            os.write(fd, data)
        else:
            os.pwrite(fd, data, offset)
        if sync:
            getattr(os, sync)(fd)
    finally:
        os.close(fd)


def sync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def cut(mount: LazyMount) -> dict[str, Any]:
    status = mount.cut()
    assert status["state"] == "cut"
    assert not lazyfs.mounted(mount.mount)
    return status


# --- what the machine lacks ---------------------------------------------------------------


def test_missing_names_the_device_the_helper_and_the_build(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setattr(lazyfs, "FUSE_DEVICE", tmp_path / "no-fuse")
    assert lazyfs.missing() == (
        "no /dev/fuse: the lazy filesystem needs FUSE (modprobe fuse; "
        "a container needs --device /dev/fuse)"
    )
    monkeypatch.setattr(lazyfs, "FUSE_DEVICE", tmp_path)
    monkeypatch.setattr(lazyfs, "FUSERMOUNT", "no-such-fusermount")
    assert lazyfs.missing() == (
        "no-such-fusermount not found: install the Debian package fuse3 (apt-get install fuse3)"
    )
    monkeypatch.setattr(lazyfs, "FUSERMOUNT", "sh")
    monkeypatch.setenv("BROKERBENCH_CACHE", str(tmp_path / "cache"))
    reason = lazyfs.missing()
    assert reason is not None and reason.startswith("the lazy filesystem is not built")
    assert "\n" not in reason


def test_the_binary_is_named_by_its_source() -> None:
    assert lazyfs.binary().name == f"lazyfs-{lazyfs.source_digest()}"
    assert len(lazyfs.source_digest()) == 16


@pytest.mark.slow
def test_the_overlay_agrees_with_a_model_of_the_file() -> None:
    """The Go tests: random writes, truncations, reads and syncs against a byte array, and
    the bound writing the oldest file through."""
    go = lazyfs.go_binary()
    if go is None:
        pytest.skip("go not found")
    done = subprocess.run(
        [go, "test", "-count=1", "."],
        cwd=lazyfs.SOURCE,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "GOFLAGS": "-mod=readonly"},
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_mountinfo_escapes_are_undone() -> None:
    assert lazyfs._unescape(r"/tmp/a\040b") == "/tmp/a b"
    assert lazyfs._unescape("/plain") == "/plain"


# --- data -----------------------------------------------------------------------------------


@pytest.mark.slow
def test_unsynced_bytes_are_gone_after_a_cut(ready: None, dirs: tuple[Path, Path]) -> None:
    backing, mount = dirs
    (backing / "old").write_bytes(b"durable")
    with LazyMount(backing, mount) as lazy:
        write(mount / "old", b" and lost")
        assert (mount / "old").read_bytes() == b"durable and lost"
        status = cut(lazy)
    assert (backing / "old").read_bytes() == b"durable"
    assert status["dropped_bytes"] == 4096 and status["dropped_files"] == 1


@pytest.mark.slow
@pytest.mark.parametrize("sync", ["fsync", "fdatasync"])
def test_synced_bytes_survive(ready: None, dirs: tuple[Path, Path], sync: str) -> None:
    backing, mount = dirs
    (backing / "log").write_bytes(b"")
    with LazyMount(backing, mount) as lazy:
        write(mount / "log", b"kept", sync)
        write(mount / "log", b" lost")
        cut(lazy)
    assert (backing / "log").read_bytes() == b"kept"


@pytest.mark.slow
@pytest.mark.parametrize("flag", ["O_SYNC", "O_DSYNC"])
def test_writes_of_a_file_opened_to_sync_survive(
    ready: None, dirs: tuple[Path, Path], flag: str
) -> None:
    backing, mount = dirs
    (backing / "log").write_bytes(b"")
    with LazyMount(backing, mount) as lazy:
        write(mount / "log", b"kept", flags=getattr(os, flag))
        cut(lazy)
    assert (backing / "log").read_bytes() == b"kept"


@pytest.mark.slow
def test_reads_merge_unsynced_pages_with_the_file(lazy: LazyMount) -> None:
    path = lazy.mount / "f"
    write(path, b"a" * 10_000, "fsync")
    sync_dir(lazy.mount)
    write(path, b"XYZ", offset=5_000)
    write(path, b"tail")
    want = b"a" * 5_000 + b"XYZ" + b"a" * 4_997 + b"tail"
    assert path.read_bytes() == want
    assert path.stat().st_size == len(want)
    write(lazy.mount / "tmp", b"unsynced")
    (lazy.mount / "tmp").rename(lazy.mount / "listed")  # a listing looks each entry up anew
    assert {e.name: e.stat().st_size for e in os.scandir(lazy.mount)} == {
        "f": len(want),
        "listed": 8,
    }
    write(path, b"", "fsync")
    assert (lazy.backing / "f").read_bytes() == want


@pytest.mark.slow
def test_a_mapped_file_keeps_what_msync_wrote(lazy: LazyMount) -> None:
    (lazy.backing / "index").write_bytes(bytes(8192))
    fd = os.open(lazy.mount / "index", os.O_RDWR)
    try:
        with mmap.mmap(fd, 8192) as mapped:
            mapped[0:4] = b"kept"
            mapped.flush()  # msync(MS_SYNC)
            mapped[4096:4100] = b"lost"
    finally:
        os.close(fd)
    cut(lazy)
    data = (lazy.backing / "index").read_bytes()
    assert data[:4] == b"kept" and data[4096:4100] == bytes(4)


# --- metadata -------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_renamed_and_synced_file_survives_under_its_new_name(lazy: LazyMount) -> None:
    tmp, final = lazy.mount / "snapshot.tmp", lazy.mount / "snapshot"
    write(tmp, b"state", "fsync")
    tmp.rename(final)
    sync_dir(lazy.mount)
    cut(lazy)
    assert (lazy.backing / "snapshot").read_bytes() == b"state"
    assert not (lazy.backing / "snapshot.tmp").exists()


@pytest.mark.slow
def test_a_created_file_needs_its_directory_synced(lazy: LazyMount) -> None:
    write(lazy.mount / "new", b"data", "fsync")
    status = cut(lazy)
    assert not (lazy.backing / "new").exists()
    assert status["undone_metadata"] == 1


@pytest.mark.slow
def test_ordered_metadata_keeps_a_synced_new_file(ready: None, dirs: tuple[Path, Path]) -> None:
    backing, mount = dirs
    with LazyMount(backing, mount, metadata="ordered") as lazy:
        write(mount / "new", b"data", "fsync")
        write(mount / "unsynced", b"data")
        cut(lazy)
    assert (backing / "new").read_bytes() == b"data"
    assert not (backing / "unsynced").exists()


@pytest.mark.slow
def test_a_rename_without_a_directory_sync_is_undone(ready: None, dirs: tuple[Path, Path]) -> None:
    backing, mount = dirs
    (backing / "a").write_bytes(b"A")
    (backing / "b").write_bytes(b"B")
    (backing / "c").write_bytes(b"C")
    with LazyMount(backing, mount) as lazy:
        (mount / "a").rename(mount / "moved")
        write(mount / "moved", b"", "fsync")  # a file's sync does not make its name durable
        (mount / "c").rename(mount / "b")  # over an existing file
        assert (mount / "b").read_bytes() == b"C"
        assert sorted(os.listdir(mount)) == ["b", "moved"]
        status = cut(lazy)
    assert sorted(os.listdir(backing)) == ["a", "b", "c"]
    assert [(backing / n).read_bytes() for n in "abc"] == [b"A", b"B", b"C"]
    assert status["undone_metadata"] == 2


@pytest.mark.slow
def test_an_unlink_is_undone_unless_its_directory_is_synced(
    ready: None, dirs: tuple[Path, Path]
) -> None:
    backing, mount = dirs
    (backing / "sub").mkdir()
    for name in ("kept", "gone"):
        (backing / "sub" / name).write_bytes(name.encode())
    with LazyMount(backing, mount) as lazy:
        (mount / "sub" / "gone").unlink()
        sync_dir(mount / "sub")
        (mount / "sub" / "kept").unlink()
        (mount / "sub" / "made").mkdir()
        assert os.listdir(mount / "sub") == ["made"]
        cut(lazy)
    assert os.listdir(backing / "sub") == ["kept"]
    assert not lazy.backing.with_name(".data.lazyfs-trash").exists()


@pytest.mark.slow
def test_a_truncate_is_durable_with_the_files_sync(ready: None, dirs: tuple[Path, Path]) -> None:
    backing, mount = dirs
    for name in ("synced", "unsynced"):
        (backing / name).write_bytes(b"x" * 10_000)
    with LazyMount(backing, mount) as lazy:
        for name in ("synced", "unsynced"):
            os.truncate(mount / name, 100)
            write(mount / name, b"y", offset=200)  # the gap reads as zeros
            assert (mount / name).read_bytes() == b"x" * 100 + bytes(100) + b"y"
        write(mount / "synced", b"", "fsync")
        cut(lazy)
    assert (backing / "synced").read_bytes() == b"x" * 100 + bytes(100) + b"y"
    assert (backing / "unsynced").read_bytes() == b"x" * 10_000


# --- the models and the bound ---------------------------------------------------------------


@pytest.mark.slow
def test_the_memory_bound_writes_through_and_says_so(ready: None, dirs: tuple[Path, Path]) -> None:
    backing, mount = dirs
    with LazyMount(backing, mount, max_dirty_bytes=256 * 1024, metadata="ordered") as lazy:
        write(mount / "big", b"", "fsync")
        write(mount / "big", os.urandom(MiB))
        status = cut(lazy)
    assert status["written_through_times"] > 0
    assert status["written_through_bytes"] >= MiB - 256 * 1024
    assert status["dropped_bytes"] <= 256 * 1024
    assert (backing / "big").stat().st_size >= MiB - 256 * 1024


@pytest.mark.slow
def test_the_kernel_model_writes_back_old_dirty_data(ready: None, dirs: tuple[Path, Path]) -> None:
    backing, mount = dirs
    with LazyMount(
        backing, mount, writeback="kernel", dirty_expire=0.5, commit_interval=0.5
    ) as lazy:
        write(mount / "old", b"written back")
        deadline = time.monotonic() + 12
        while not lazy.status().get("writeback_bytes") and time.monotonic() < deadline:
            time.sleep(0.2)
        status = cut(lazy)
    assert status["writeback_bytes"] == len(b"written back")
    assert (backing / "old").read_bytes() == b"written back"


@pytest.mark.slow
def test_a_data_directory_is_mounted_over_in_place(ready: None, tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "old").write_bytes(b"durable")
    data.chmod(0o750)
    os.chown(data, 1234, 2345)
    before = data.stat()
    with LazyMount(data, data) as lazy:
        inside = data.stat()
        assert (inside.st_mode, inside.st_uid, inside.st_gid) == (
            before.st_mode,
            before.st_uid,
            before.st_gid,
        )
        assert (data / "old").read_bytes() == b"durable"
        write(data / "old", b" and lost")
        write(data / "new", b"synced", "fsync")
        sync_dir(data)
        cut(lazy)
        assert sorted(os.listdir(data)) == ["new", "old"]
        assert (data / "old").read_bytes() == b"durable"
        assert (data / "new").read_bytes() == b"synced"


@pytest.mark.slow
def test_several_mounts_are_cut_at_once_and_mount_again(ready: None, tmp_path: Path) -> None:
    nodes = [tmp_path / f"node-{n}" for n in range(3)]
    mounts = []
    for data in nodes:
        data.mkdir()
        (data / "log").write_bytes(b"")
        mounts.append(LazyMount(data, data))
    try:
        for n, mount in enumerate(mounts):
            mount.start()
            write(nodes[n] / "log", b"synced", "fdatasync")
            write(nodes[n] / "log", b" lost")
        statuses = lazyfs.cut_all(mounts)
        assert [s["state"] for s in statuses] == ["cut"] * 3
        assert not any(lazyfs.mounted(data) for data in nodes)
        for mount in mounts:
            mount.start()
        assert [(data / "log").read_bytes() for data in nodes] == [b"synced"] * 3
    finally:
        for mount in mounts:
            mount.unmount()
    assert not any(lazyfs.mounted(data) for data in nodes)


# --- no mount left behind -------------------------------------------------------------------


@pytest.mark.slow
def test_a_cut_leaves_no_mount_and_a_new_mount_sees_the_synced_data(
    ready: None, dirs: tuple[Path, Path]
) -> None:
    backing, mount = dirs
    with LazyMount(backing, mount) as lazy:
        write(mount / "f", b"kept", "fsync")
        sync_dir(mount)
        write(mount / "f", b" lost")
        cut(lazy)
        assert lazy.pid is None
        assert os.listdir(mount) == []
    with LazyMount(backing, mount):
        assert (mount / "f").read_bytes() == b"kept"
    assert not lazyfs.mounted(mount)


@pytest.mark.slow
def test_a_killed_filesystem_leaves_no_mount(ready: None, dirs: tuple[Path, Path]) -> None:
    backing, mount = dirs
    with LazyMount(backing, mount) as lazy:
        assert lazy.pid is not None
        os.kill(lazy.pid, signal.SIGKILL)
    assert not lazyfs.mounted(mount)
    assert os.listdir(mount) == []


@pytest.mark.slow
def test_the_guard_detaches_the_mount_of_a_killed_filesystem(
    ready: None, dirs: tuple[Path, Path]
) -> None:
    backing, mount = dirs
    lazy = LazyMount(backing, mount)
    lazy.start()
    try:
        assert lazy.pid is not None
        os.kill(lazy.pid, signal.SIGKILL)
        deadline = time.monotonic() + 5
        while lazyfs.mounted(mount) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not lazyfs.mounted(mount), "the guard left the mount of a killed filesystem"
    finally:
        lazy.unmount()


@pytest.mark.slow
def test_an_error_inside_the_context_still_unmounts(ready: None, dirs: tuple[Path, Path]) -> None:
    backing, mount = dirs
    with pytest.raises(RuntimeError), LazyMount(backing, mount):
        write(mount / "f", b"x")
        raise RuntimeError("boom")
    assert not lazyfs.mounted(mount)
