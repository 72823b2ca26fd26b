"""A guard that ends this process's local brokers if the process dies without stopping them.

Brokers run in sessions of their own (a Ctrl-C in the terminal must not reach them before
the run has stopped its senders), so nothing ties them to the process that started them:
a coordinator killed with SIGKILL, or by the out-of-memory killer, would leave them running
with their data. The guard closes that gap. It is a small process of its own, started with
the first broker (or the first local Spark JVM), that reads from a pipe only the coordinator
holds open:

* ``+group <pgid>`` / ``-group <pgid>`` — a broker's (or a start-up helper's: initdb,
  Kafka's storage format; or the analysis's local Spark JVM) process group started /
  stopped;
* ``+dir <path>`` / ``-dir <path>`` — a work (or Spark scratch) directory created / removed;
* ``+netns <name>`` / ``-netns <name>`` and ``+link <name>`` / ``-link <name>`` — a network
  namespace and a bridge of :mod:`brokers.netns` created / removed;
* ``+mount <path>`` / ``-mount <path>`` — a lazy filesystem (:mod:`brokers.lazyfs`) mounted
  over a data directory / unmounted.

When the pipe closes while groups are still registered (the coordinator is gone: it
exited, or was killed, whatever the signal), the guard kills those groups with every
descendant of their members (a server that ``runuser`` started in a session of its own),
waits until they are gone — a helper still writing would recreate what is deleted — then
detaches those mounts lazily (``fusermount3 -uz``: the filesystem's own guard is one of the
killed processes' descendants), deletes those directories and removes those namespaces and links, and exits. A coordinator that stops its brokers itself unregisters them first,
so the guard then has nothing to do.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import IO


class Watchdog:
    """The coordinator's end of the guard: started on first use, one per process."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._pipe: IO[str] | None = None
        self._owner = 0

    def watch_group(self, pgid: int) -> None:
        self._send(f"+group {pgid}")

    def release_group(self, pgid: int) -> None:
        self._send(f"-group {pgid}")

    def watch_dir(self, path: Path) -> None:
        self._send(f"+dir {path}")

    def release_dir(self, path: Path) -> None:
        self._send(f"-dir {path}")

    def watch_namespace(self, name: str) -> None:
        self._send(f"+netns {name}")

    def release_namespace(self, name: str) -> None:
        self._send(f"-netns {name}")

    def watch_link(self, name: str) -> None:
        self._send(f"+link {name}")

    def release_link(self, name: str) -> None:
        self._send(f"-link {name}")

    def watch_mount(self, path: Path) -> None:
        self._send(f"+mount {path}")

    def release_mount(self, path: Path) -> None:
        self._send(f"-mount {path}")

    def _send(self, line: str) -> None:
        with self._lock:
            pipe = self._guard()
            if pipe is None:
                return
            try:
                pipe.write(line + "\n")
                pipe.flush()
            except OSError:
                self._pipe = None  # the guard is gone: brokers are still stopped normally

    def _guard(self) -> IO[str] | None:
        # A forked child (a node process) must not talk to its parent's guard.
        if self._pipe is not None and self._owner == os.getpid():
            return self._pipe
        if self._owner == os.getpid():
            return None  # starting it failed before: do not retry on every call
        self._owner = os.getpid()
        try:
            guard = subprocess.Popen(
                [sys.executable, "-m", "brokers.watchdog"],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                text=True,
                start_new_session=True,
            )
        except OSError:
            return None
        self._pipe = guard.stdin
        return self._pipe


#: The guard of this process's brokers.
WATCHDOG = Watchdog()


def processes_of(groups: set[int]) -> set[int]:
    """Every process of these process groups, and every descendant of one."""
    parent: dict[int, int] = {}
    found: set[int] = set()
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        parent[int(entry)] = int(fields[1])
        if int(fields[2]) in groups:
            found.add(int(entry))
    grown = True
    while grown:
        more = {pid for pid, ppid in parent.items() if ppid in found} - found
        grown = bool(more)
        found |= more
    return found


def _running(pid: int) -> bool:
    """Whether ``pid`` still runs (a zombie does not: it writes nothing)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return False


def guard(lines: IO[str]) -> None:
    """Read registrations until the pipe closes, then end what is still registered."""
    groups: set[int] = set()
    named: dict[str, set[str]] = {"dir": set(), "netns": set(), "link": set(), "mount": set()}
    for line in lines:
        op, _, value = line.rstrip("\n").partition(" ")
        kind = op[1:]
        if kind == "group" and value.isdigit():
            (groups.add if op[0] == "+" else groups.discard)(int(value))
        elif kind in named and value:
            (named[kind].add if op[0] == "+" else named[kind].discard)(value)
    doomed = processes_of(groups)
    for pid in doomed:
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(_running(pid) for pid in doomed):
        time.sleep(0.02)
    for path in named["mount"]:  # before the directories: a dead mount cannot be deleted
        subprocess.run(["fusermount3", "-u", "-z", path], capture_output=True, check=False)
    for path in named["dir"]:
        shutil.rmtree(path, ignore_errors=True)
    for what in ("netns", "link"):  # namespaces first: their veth ends go with them
        for name in named[what]:
            subprocess.run(["ip", what, "delete", name], capture_output=True, check=False)


if __name__ == "__main__":
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGPIPE):
        signal.signal(signum, signal.SIG_IGN)
    guard(sys.stdin)
