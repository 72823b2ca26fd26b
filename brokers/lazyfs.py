"""The lazy data directory: a FUSE filesystem (the Go program under ``brokers/lazyfs/``)
mounted over a local node's data directory. Reads and writes pass through, but written
data the broker has not synced stays in the filesystem's memory, so that a power cut
(:meth:`LazyMount.cut`) drops exactly what a machine that loses power would lose. What it
keeps, when, and what it cannot see: ``docs/durability.md``.

:func:`missing` says in one line what this machine lacks (``/dev/fuse``, ``fusermount3``, the
built program); :func:`build` builds the program with Go into the artifact cache (``brokerbench
setup`` does it through :func:`install`); :class:`LazyMount` mounts one directory and always
unmounts it.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Literal

from brokers.errors import BrokerError, BrokerStartError, BrokerUnavailable
from brokers.golang import go_binary
from brokers.jvm import cache_dir
from brokers.local import log_tail, run_checked
from brokers.watchdog import WATCHDOG

#: The Go program's source (its own module: go.mod, go.sum, *.go).
SOURCE = Path(__file__).with_name("lazyfs")
FUSE_DEVICE = Path("/dev/fuse")
FUSERMOUNT = "fusermount3"
#: The file system type the mount shows in /proc/self/mountinfo.
FSTYPE = "fuse.lazyfs"
#: How much unsynced data the filesystem holds before it writes through.
DEFAULT_MAX_DIRTY_BYTES = 512 << 20

Writeback = Literal["never", "kernel"]
Metadata = Literal["posix", "ordered"]


def source_digest() -> str:
    """A digest of the program's source: a changed source builds a new binary."""
    digest = hashlib.sha256()
    for path in sorted(SOURCE.iterdir()):
        if path.name in ("go.mod", "go.sum") or (
            path.suffix == ".go" and not path.name.endswith("_test.go")
        ):
            digest.update(path.name.encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()[:16]


def binary() -> Path:
    """Where the built program is (``~/.cache/brokerbench/lazyfs/lazyfs-<digest>``)."""
    return cache_dir("lazyfs") / f"lazyfs-{source_digest()}"


def built() -> bool:
    return binary().is_file()


def missing() -> str | None:
    """One line naming what this machine lacks to mount a lazy filesystem and how to install
    it, or None when nothing is missing."""
    if not FUSE_DEVICE.exists():
        return (
            "no /dev/fuse: the lazy filesystem needs FUSE (modprobe fuse; "
            "a container needs --device /dev/fuse)"
        )
    if shutil.which(FUSERMOUNT) is None:
        return f"{FUSERMOUNT} not found: install the Debian package fuse3 (apt-get install fuse3)"
    if not built():
        if go_binary() is None:
            return "the lazy filesystem is not built and go is not found: install Go, then run brokerbench setup"
        return f"the lazy filesystem is not built: run brokerbench setup (go build into {binary().parent})"
    return None


def build(log: Callable[[str], None] = print) -> Path:
    """Build the program once into the artifact cache; later calls return the built one."""
    target = binary()
    if target.is_file():
        return target
    go = go_binary()
    if go is None:
        raise BrokerUnavailable(
            "go not found: the lazy filesystem is built from source with Go (install Go)"
        )
    log(f"building the lazy filesystem into {target} (once)…")
    partial = target.with_name(target.name + ".partial")
    partial.unlink(missing_ok=True)
    run_checked(
        [go, "build", "-trimpath", "-o", str(partial), "."],
        "go build of the lazy filesystem (brokers/lazyfs)",
        timeout=900,
        cwd=SOURCE,
        env={**os.environ, "GOFLAGS": "-mod=readonly"},
    )
    partial.rename(target)
    for old in target.parent.glob("lazyfs-*"):
        if old != target:
            old.unlink(missing_ok=True)
    return target


def install(console: Callable[[str], None] = print) -> bool:
    """``brokerbench setup``'s step: build the program where FUSE and Go are here; False only
    when a build failed."""
    try:
        if go_binary() is not None:
            build(console)
    except BrokerError as exc:
        console(f"lazy filesystem: {exc}")
        return False
    reason = missing()
    console(f"lazy filesystem: {reason if reason else 'ready'}")
    return True


def _unescape(field: str) -> str:
    """mountinfo's octal escapes (``\\040`` for a space) undone."""
    return re.sub(r"\\([0-7]{3})", lambda m: chr(int(m.group(1), 8)), field)


def _where(path: Path) -> Path:
    """``path`` made absolute with its parent's links resolved, without looking at ``path``
    itself (a dead mount answers every look with an error)."""
    path = path.absolute()
    return path.parent.resolve() / path.name


def mounted(path: Path) -> bool:
    """Whether a lazy filesystem is mounted at ``path`` (dead or alive)."""
    target = str(_where(path))
    try:
        lines = Path("/proc/self/mountinfo").read_text().splitlines()
    except OSError:
        return False
    for line in lines:
        fields = line.split()
        if "-" not in fields:
            continue
        sep = fields.index("-")
        if len(fields) > sep + 1 and fields[sep + 1] == FSTYPE and _unescape(fields[4]) == target:
            return True
    return False


def detach(path: Path) -> None:
    """Unmount ``path`` lazily (``fusermount3 -uz``): at once for new lookups, fully once no
    file is open; nothing if nothing is mounted there."""
    if mounted(path):
        subprocess.run(
            [FUSERMOUNT, "-u", "-z", str(_where(path))],
            capture_output=True,
            check=False,
            timeout=30,
        )


class LazyMount:
    """``backing`` mounted lazily at ``mount`` while the context is open; always unmounted
    after it, also on an error or a filesystem process that was killed. ``mount`` may be
    ``backing`` itself: a node's data directory mounted over in place.

    ``writeback`` is the model of data nobody synced: ``never`` (the worst case: nothing is
    written back until synced) or ``kernel`` (data dirty for ``dirty_expire`` seconds is
    written back, metadata changes ``commit_interval`` seconds old are committed, as Linux
    and ext4 do by default). ``metadata`` says which syncs make a metadata change durable:
    ``posix`` (only a directory's fsync makes its entries durable) or ``ordered`` (a file's
    fsync also makes durable the creation and renames that named it). Past
    ``max_dirty_bytes`` of unsynced data the filesystem writes through and counts it in
    :meth:`status`. The status file and the filesystem's log go beside the mount point.
    """

    def __init__(
        self,
        backing: Path,
        mount: Path,
        *,
        writeback: Writeback = "never",
        metadata: Metadata = "posix",
        max_dirty_bytes: int = DEFAULT_MAX_DIRTY_BYTES,
        dirty_expire: float = 30.0,
        commit_interval: float = 5.0,
        timeout: float = 15.0,
    ) -> None:
        self.backing = backing.resolve()
        self.mount = _where(mount)
        self.writeback = writeback
        self.metadata = metadata
        self.max_dirty_bytes = max_dirty_bytes
        self.dirty_expire = dirty_expire
        self.commit_interval = commit_interval
        self.timeout = timeout
        self.status_file = self.mount.with_name(f".{self.mount.name}.lazyfs.json")
        self.log_file = self.mount.with_name(f".{self.mount.name}.lazyfs.log")
        self._proc: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def command(self) -> list[str]:
        cmd = [
            str(binary()),
            f"--backing={self.backing}",
            f"--mount={self.mount}",
            f"--writeback={self.writeback}",
            f"--metadata={self.metadata}",
            f"--max-dirty-bytes={self.max_dirty_bytes}",
            f"--status={self.status_file}",
        ]
        if self.writeback == "kernel":
            cmd += [
                f"--dirty-expire={self.dirty_expire}s",
                f"--commit-interval={self.commit_interval}s",
            ]
        return cmd

    def start(self) -> None:
        """Mount, and return once the mount is there (BrokerStartError naming the log if it
        does not come)."""
        reason = missing()
        if reason:
            raise BrokerUnavailable(reason)
        if mounted(self.mount):
            raise BrokerStartError(
                f"{self.mount} is a lazy filesystem already: {FUSERMOUNT} -uz {self.mount}"
            )
        self.mount.mkdir(parents=True, exist_ok=True)
        self.status_file.unlink(missing_ok=True)
        with self.log_file.open("ab") as log:
            self._proc = subprocess.Popen(
                self.command(),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        WATCHDOG.watch_group(self._proc.pid)
        WATCHDOG.watch_mount(self.mount)  # detached should this process be killed
        deadline = time.monotonic() + self.timeout
        while not (mounted(self.mount) and self.status().get("pid") == self._proc.pid):
            if self._proc.poll() is not None or time.monotonic() > deadline:
                self.unmount()
                raise BrokerStartError(
                    f"the lazy filesystem did not mount {self.mount}: "
                    f"{log_tail(self.log_file, lines=1) or 'no output'} "
                    f"(log: {self.log_file})"
                )
            time.sleep(0.02)

    def status(self) -> dict[str, Any]:
        """The filesystem's state and counters (written once a second and at its end):
        ``state`` (mounted, cut, unmounted), ``dirty_bytes``, ``pending_metadata``,
        ``written_through_bytes`` and ``written_through_times`` (the memory bound was
        reached: what was lost is a lower bound), ``dropped_bytes``, ``undone_metadata``…"""
        try:
            found = json.loads(self.status_file.read_text())
        except (OSError, ValueError):
            return {}
        return found if isinstance(found, dict) else {}

    def _signal(self, sig: signal.Signals) -> None:
        proc = self._proc
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                proc.send_signal(sig)

    def _end(self, sig: signal.Signals | None) -> dict[str, Any]:
        """Send ``sig`` to the filesystem (if given), wait for it to exit (killed past the
        timeout), detach whatever mount is left, and return the final status."""
        proc = self._proc
        if proc is not None:
            if sig is not None:
                self._signal(sig)
            try:
                proc.wait(timeout=self.timeout)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            WATCHDOG.release_group(proc.pid)
            self._proc = None
        detach(self.mount)
        WATCHDOG.release_mount(self.mount)
        return self.status()

    def cut(self) -> dict[str, Any]:
        """The power cut: every unsynced byte and metadata change not committed is dropped
        at once, the filesystem exits and the mount is gone. Returns the final status
        (``dropped_bytes``, ``dropped_files``, ``undone_metadata``). :func:`cut_all` cuts
        several at the same instant. The same object can :meth:`start` again after it."""
        return self._end(signal.SIGUSR1)

    def unmount(self) -> dict[str, Any]:
        """Unmount without writing anything more (unsynced data is dropped, metadata changes
        stand); lazily if files are still open. Safe to call at any time, also twice."""
        return self._end(signal.SIGTERM)

    def __enter__(self) -> LazyMount:
        self.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.unmount()


def cut_all(
    mounts: Sequence[LazyMount], then: Callable[[], None] | None = None
) -> list[dict[str, Any]]:
    """Cut the power of every mount at the same instant (all are signalled before any is
    waited for; ``then`` is called right after the signals, e.g. to kill the processes
    that used them), and return their final statuses in order."""
    for mount in mounts:
        mount._signal(signal.SIGUSR1)
    if then is not None:
        then()
    return [mount._end(None) for mount in mounts]


@dataclass(frozen=True)
class LazyDisks:
    """The disks of a run whose nodes may lose power (:class:`brokers.power.Disks`): each
    data directory a :class:`LazyMount` over itself, in this model."""

    writeback: Writeback = "never"
    metadata: Metadata = "ordered"
    max_dirty_bytes: int = DEFAULT_MAX_DIRTY_BYTES

    def describe(self) -> dict[str, Any]:
        """The model, as the run records it."""
        return asdict(self)

    def mount(self, directory: Path) -> LazyMount:
        """``directory`` mounted over itself; the model's fields are :class:`LazyMount`'s
        keywords of the same names."""
        mount = LazyMount(directory, directory, **asdict(self))
        mount.start()
        return mount

    def cut(self, disks: Sequence[Any], then: Callable[[], None]) -> list[dict[str, Any]]:
        mounts = [disk for disk in disks if isinstance(disk, LazyMount)]
        assert len(mounts) == len(disks), "only lazy mounts can be cut"
        return [{**status, **self.describe()} for status in cut_all(mounts, then)]
