"""Resource telemetry: what every node of a sweep point used, second by second.

A :class:`Sampler` runs beside the workers — a thread of the coordinating process locally,
never in a worker — and reads, every ``interval`` (1 s by default), cumulative counters of
each :class:`Target` and of the machine, and keeps their rates as rows of the raw table
``telemetry`` (:data:`workload.model.results.TELEMETRY_SCHEMA`; its names :mod:`workload.model.telemetry`), in the same time base as the workers' per-second
records (``second`` is the wall-clock second the middle of a row falls in):

* CPU (user, system) of the node's processes, in % of one core, and of its busiest
  process (a Python client process cannot use more than about one core); for the machine
  (``role = "host"``) also iowait, and ``cores``, the cores the node may use;
* resident memory of the node's processes;
* disk: bytes the node's processes read and wrote (``/proc/<pid>/io``), and for the block
  device its data directory is on, write operations, bytes written, busy time and the
  flushes (fsync reaching the device) where the kernel counts them (``/proc/diskstats``,
  whose flush fields psutil does not give); every :data:`DATA_EVERY` seconds, the space
  its data directory takes on disk (``du``: allocated blocks), which a long run watches
  grow until retention holds it;
* network bytes in and out on the node's own interface (a namespace's veth); nodes that
  share loopback have none of their own, and the host row carries the machine's;
* for a JVM, garbage-collection pause time per second (:mod:`workload.engine.jvmstat`).

A counter that cannot be read leaves its cell empty and says why in ``note``; a target
whose processes are gone (a node down by a fault) leaves no row for those seconds. Nothing
the sampler meets stops a run: a failure of the sampler itself ends sampling with a note.

Standard library and psutil only: a broker machine on AWS runs it from the uploaded wheel
with Debian's ``python3`` and ``python3-psutil`` (:mod:`workload.engine.aws.telemetry_agent`).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from workload.engine import jvmstat
from workload.model.telemetry import HOST, USAGE_MEANS


@dataclass(frozen=True)
class Target:
    """A node whose processes the sampler reads: a broker node or a client node."""

    role: str
    node: str
    #: The node's processes now (pids); empty while it is down.
    pids: tuple[int, ...]
    #: Where its data is: the block device under it is read for disk operations.
    data_dir: Path | None = None
    #: Its own network interface, if it has one.
    interface: str | None = None


def process_groups() -> dict[int, list[int]]:
    """Every process of this machine by process group, each group with its members'
    descendants too — a broker node started in a session of its own is its group, and a
    node whose server a wrapper starts in a session of its own (``runuser``) keeps it as
    a descendant. One read of ``/proc/<pid>/stat`` per process."""
    parent: dict[int, int] = {}
    groups: dict[int, list[int]] = {}
    for pid in psutil.pids():
        try:
            with open(f"/proc/{pid}/stat", "rb") as f:
                fields = f.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        parent[pid] = int(fields[1])
        groups.setdefault(int(fields[2]), []).append(pid)
    children: dict[int, list[int]] = {}
    for pid, ppid in parent.items():
        children.setdefault(ppid, []).append(pid)
    for members in groups.values():
        seen = set(members)
        queue = list(members)
        while queue:
            for child in children.get(queue.pop(), ()):
                if child not in seen:
                    seen.add(child)
                    members.append(child)
                    queue.append(child)
    return groups


def block_device(path: Path) -> str | None:
    """The name of the block device (as ``/proc/diskstats`` lists it) that ``path`` is on;
    None for a file system without one (tmpfs, overlay)."""
    try:
        dev = os.stat(path).st_dev
        link = Path(f"/sys/dev/block/{os.major(dev)}:{os.minor(dev)}")
        return link.resolve().name if link.exists() else None
    except OSError:
        return None


#: Seconds between two readings of a data directory's size (a walk of its files).
DATA_EVERY = 5


def directory_bytes(path: Path) -> int | None:
    """The space the files under ``path`` take on disk (allocated blocks, as ``du``
    counts them, each file once); None when ``path`` cannot be read. Files that vanish
    while it walks (a segment deleted by retention) are skipped."""
    total = 0
    seen: set[tuple[int, int]] = set()
    stack = [str(path)]
    try:
        os.stat(path)
    except OSError:
        return None
    while stack:
        try:
            entries = list(os.scandir(stack.pop()))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                    continue
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if (info.st_dev, info.st_ino) not in seen:
                seen.add((info.st_dev, info.st_ino))
                total += info.st_blocks * 512
    return total


@dataclass(frozen=True)
class DiskCounters:
    writes: int
    sectors_written: int
    busy_ms: int
    #: None where the kernel does not count flushes (before Linux 5.5).
    flushes: int | None


def disk_counters(device: str) -> DiskCounters | None:
    """The cumulative counters of one block device (``/proc/diskstats``)."""
    try:
        with open("/proc/diskstats") as f:
            for line in f:
                fields = line.split()
                if len(fields) >= 14 and fields[2] == device:
                    flushes = int(fields[18]) if len(fields) >= 20 else None
                    return DiskCounters(int(fields[7]), int(fields[9]), int(fields[12]), flushes)
    except (OSError, ValueError):
        return None
    return None


@dataclass
class _ProcessState:
    """The last cumulative counters of one process."""

    cpu_user: float
    cpu_system: float
    read_bytes: int
    write_bytes: int
    gc_s: float | None


@dataclass
class _TargetState:
    processes: dict[int, _ProcessState] = field(default_factory=dict)
    device: str | None = None
    disk: DiskCounters | None = None
    net: tuple[int, int] | None = None
    perf_files: dict[int, Path | None] = field(default_factory=dict)
    handles: dict[int, psutil.Process] = field(default_factory=dict)
    #: When its data directory was last measured (wall-clock seconds; 0: never).
    data_at: float = 0.0
    #: CPU seconds of each thread (pid, thread id) at the last reading (broker nodes).
    threads: dict[tuple[int, int], float] = field(default_factory=dict)


def _busiest_thread(state: _TargetState, pids: Iterable[int]) -> float | None:
    """The most CPU seconds one thread of these processes used since the last reading
    (None before a second reading): a broker that runs a part of its work on one thread
    (Redis executes every command on one) is saturated when that thread is, however idle
    its other cores. Threads come from ``/proc/<pid>/task``."""
    now: dict[tuple[int, int], float] = {}
    busiest: float | None = None
    for pid in pids:
        try:
            threads = state.handles[pid].threads()
        except (psutil.Error, ProcessLookupError, KeyError):
            continue
        for thread in threads:
            key = (pid, thread.id)
            spent = now[key] = thread.user_time + thread.system_time
            before = state.threads.get(key)
            if before is not None:
                busiest = max(busiest or 0.0, spent - before)
    state.threads = now
    return busiest


def _process_state(
    proc: psutil.Process, perf: Path | None
) -> tuple[_ProcessState, int, str | None]:
    """A process's counters, its resident memory and what could not be read."""
    note = None
    with proc.oneshot():
        cpu = proc.cpu_times()
        rss = proc.memory_info().rss
        try:
            io = proc.io_counters()
            read_bytes, write_bytes = io.read_bytes, io.write_bytes
        except (psutil.AccessDenied, AttributeError):
            read_bytes = write_bytes = 0
            note = "disk bytes of a process not readable"
    gc = jvmstat.read_gc_pause_seconds(perf) if perf is not None else None
    return _ProcessState(cpu.user, cpu.system, read_bytes, write_bytes, gc), rss, note


class Sampler:
    """Samples the targets and the machine every ``interval`` seconds in a thread of its
    own (see the module); :meth:`stop` ends it and returns the rows."""

    def __init__(
        self,
        run_id: str,
        point: int,
        targets: Callable[[], list[Target]],
        interval: float = 1.0,
        host_data_dir: Path | None = None,
        host: str = HOST,
    ) -> None:
        self.run_id = run_id
        self.point = point
        self.targets = targets
        self.interval = interval
        #: The machine's name in the rows: ``host`` where one sampler sees broker and
        #: clients (a local run), else the machine's own (``host-broker-1``).
        self.host = host
        self.rows: list[dict[str, Any]] = []
        self._lock = threading.Lock()
        #: Why sampling ended early ("" while it runs or when it ran to the end).
        self.failure = ""
        self._host_device = block_device(host_data_dir) if host_data_dir else None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="telemetry", daemon=True)
        self._states: dict[str, _TargetState] = {}
        self._host: tuple[Any, DiskCounters | None, tuple[int, int]] | None = None
        self._cores = float(psutil.cpu_count() or 1)
        self._last = 0.0

    def start(self) -> Sampler:
        self._thread.start()
        return self

    def stop(self) -> list[dict[str, Any]]:
        """End sampling; every row not taken yet."""
        self._stop.set()
        self._thread.join(timeout=10)
        return self.take()

    def take(self) -> list[dict[str, Any]]:
        """The rows sampled since the last call (a long-running sampler hands them on in
        batches)."""
        with self._lock:
            rows, self.rows = self.rows, []
        return rows

    def _add(self, row: dict[str, Any]) -> None:
        with self._lock:
            self.rows.append(row)

    def _loop(self) -> None:
        try:
            self._last = time.time()
            self.sample(first=True)
            while not self._stop.wait(self._until_next()):
                self.sample()
        except Exception as exc:  # never the run's failure: a gap and a note
            self.failure = f"telemetry sampler stopped: {type(exc).__name__}: {exc}"

    def _until_next(self) -> float:
        """Seconds to the next tick, ticks landing just after whole multiples of the
        interval (so a row's second is the workers' second)."""
        now = time.time()
        return max(0.05, self.interval - (now % self.interval) + 0.005)

    def sample(self, first: bool = False) -> None:
        """Read every counter once; from the second call on, add a row per target."""
        now = time.time()
        elapsed = now - self._last
        start = self._last
        self._last = now
        emit = not first and elapsed > 0
        seen = set()
        for target in self.targets():
            seen.add(target.node)
            row = self._target(target, elapsed, emit)
            if row is not None:
                self._add(self._stamp(row, target.role, target.node, start, elapsed))
        for name in set(self._states) - seen:
            del self._states[name]
        host = self._machine(elapsed, emit)
        if host is not None:
            self._add(self._stamp(host, HOST, self.host, start, elapsed))

    def _stamp(
        self, row: dict[str, Any], role: str, node: str, start: float, elapsed: float
    ) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "point": self.point,
            "role": role,
            "node": node,
            # Ticks land just after whole seconds: a row is the second its middle falls in
            # (a short first row, or a late tick, then never names a second twice).
            "second": int(start + elapsed / 2),
            "seconds": round(elapsed, 3),
            **row,
        }

    def _target(self, target: Target, elapsed: float, emit: bool) -> dict[str, Any] | None:
        state = self._states.setdefault(target.node, _TargetState())
        notes: list[str] = []
        pids = target.pids
        current: dict[int, _ProcessState] = {}
        cpu_user = cpu_system = 0.0
        busiest = 0.0
        rss = read = write = 0
        gc: float | None = None
        for pid in pids:
            try:
                if pid not in state.handles:
                    state.handles[pid] = psutil.Process(pid)
                    state.perf_files[pid] = jvmstat.perf_file(pid)
                now, mem, note = _process_state(state.handles[pid], state.perf_files[pid])
            except (psutil.NoSuchProcess, psutil.ZombieProcess, ProcessLookupError):
                continue
            except psutil.AccessDenied:
                notes.append("a process not readable")
                continue
            if note:
                notes.append(note)
            current[pid] = now
            rss += mem
            before = state.processes.get(pid)
            if before is None:
                continue
            user, system = now.cpu_user - before.cpu_user, now.cpu_system - before.cpu_system
            cpu_user += user
            cpu_system += system
            busiest = max(busiest, user + system)
            read += now.read_bytes - before.read_bytes
            write += now.write_bytes - before.write_bytes
            if now.gc_s is not None and before.gc_s is not None:
                gc = (gc or 0.0) + now.gc_s - before.gc_s
        state.processes = current
        thread_busiest = _busiest_thread(state, current) if target.role == "broker" else None
        for gone in set(state.handles) - set(current):
            del state.handles[gone], state.perf_files[gone]
        if target.data_dir is not None and state.device is None:
            state.device = block_device(target.data_dir)
        disk = disk_counters(state.device) if state.device else None
        net = _interface_bytes(target.interface) if target.interface else None
        previous_disk, previous_net = state.disk, state.net
        state.disk, state.net = disk, net
        if not emit or not current:
            return None
        row: dict[str, Any] = {
            "cores": self._cores,
            "processes": len(current),
            "cpu_pct": 100.0 * (cpu_user + cpu_system) / elapsed,
            "cpu_user_pct": 100.0 * cpu_user / elapsed,
            "cpu_system_pct": 100.0 * cpu_system / elapsed,
            "cpu_process_max_pct": 100.0 * busiest / elapsed,
            "cpu_thread_max_pct": None
            if thread_busiest is None
            else 100.0 * thread_busiest / elapsed,
            "rss_bytes": rss,
            "read_bytes_s": read / elapsed,
            "write_bytes_s": write / elapsed,
            "gc_pause_ms_s": None if gc is None else 1000.0 * gc / elapsed,
        }
        row.update(_disk_rates(state.device, previous_disk, disk, elapsed, notes))
        if target.data_dir is not None and time.time() - state.data_at >= DATA_EVERY - 0.5:
            state.data_at = time.time()
            row["data_bytes"] = directory_bytes(target.data_dir)
            if row["data_bytes"] is None:
                notes.append("data directory not readable")
        if net is not None and previous_net is not None:
            row["net_in_bytes_s"] = (net[0] - previous_net[0]) / elapsed
            row["net_out_bytes_s"] = (net[1] - previous_net[1]) / elapsed
        if notes:
            row["note"] = "; ".join(sorted(set(notes)))
        return row

    def _machine(self, elapsed: float, emit: bool) -> dict[str, Any] | None:
        cpu = psutil.cpu_times()
        disk = disk_counters(self._host_device) if self._host_device else None
        counters = psutil.net_io_counters()
        net = (counters.bytes_recv, counters.bytes_sent)
        previous, self._host = self._host, (cpu, disk, net)
        if not emit or previous is None:
            return None
        before_cpu, before_disk, before_net = previous

        def spent(*names: str) -> float:
            return sum(getattr(cpu, n, 0.0) - getattr(before_cpu, n, 0.0) for n in names)

        # The kernel measures idle time exactly, but samples busy time at its timer tick,
        # which misses short bursts (a broker that syncs every commit looks almost idle):
        # busy is the elapsed time on every core less the idle time, split between user
        # and system as the samples are.
        idle = 100.0 * spent("idle", "iowait") / elapsed
        busy = min(100.0 * self._cores, max(0.0, 100.0 * self._cores - idle))
        user, system = spent("user", "nice"), spent("system", "irq", "softirq", "steal")
        user_share = user / (user + system) if user + system > 0 else 0.5
        row: dict[str, Any] = {
            "cores": self._cores,
            "cpu_pct": busy,
            "cpu_user_pct": busy * user_share,
            "cpu_system_pct": busy * (1.0 - user_share),
            "cpu_iowait_pct": 100.0 * spent("iowait") / elapsed,
            "cpu_steal_pct": 100.0 * spent("steal") / elapsed,
            "rss_bytes": psutil.virtual_memory().used,
            "net_in_bytes_s": (net[0] - before_net[0]) / elapsed,
            "net_out_bytes_s": (net[1] - before_net[1]) / elapsed,
        }
        notes: list[str] = []
        row.update(_disk_rates(self._host_device, before_disk, disk, elapsed, notes))
        if notes:
            row["note"] = "; ".join(notes)
        return row


def _disk_rates(
    device: str | None,
    before: DiskCounters | None,
    now: DiskCounters | None,
    elapsed: float,
    notes: list[str],
) -> dict[str, Any]:
    """The device columns of a row from two readings of its counters."""
    if device is None:
        return {}
    if before is None or now is None:
        notes.append(f"device {device} not readable")
        return {"device": device}
    flushes = None
    if now.flushes is not None and before.flushes is not None:
        flushes = (now.flushes - before.flushes) / elapsed
    return {
        "device": device,
        "device_write_ops_s": (now.writes - before.writes) / elapsed,
        "device_write_bytes_s": 512.0 * (now.sectors_written - before.sectors_written) / elapsed,
        "device_busy_pct": min(100.0, 100.0 * (now.busy_ms - before.busy_ms) / 1000.0 / elapsed),
        "device_flushes_s": flushes,
    }


def _interface_bytes(name: str) -> tuple[int, int] | None:
    """(bytes into the node, bytes out of it) on the host end of its interface: what the
    host end sends goes into the node."""
    counters = psutil.net_io_counters(pernic=True).get(name)
    if counters is None:
        return None
    return counters.bytes_sent, counters.bytes_recv


def node_means(rows: Iterable[dict[str, Any]], start: int, end: int) -> list[dict[str, Any]]:
    """Per node, the mean of every :data:`USAGE_MEANS` figure over the rows whose second is
    in ``[start, end]`` (a mean skips the seconds a counter was not read) and the peak
    second's CPU — the Spark job's aggregation, for the live view's closing line."""
    nodes: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for row in rows:
        if start <= row["second"] <= end:
            nodes.setdefault((row["role"], row["node"]), []).append(row)
    means = []
    for (role, node), found in nodes.items():
        mean: dict[str, Any] = {"role": role, "node": node, "seconds": len(found)}
        for column in USAGE_MEANS:
            known = [r[column] for r in found if r.get(column) is not None]
            mean[column] = sum(known) / len(known) if known else None
        mean["cpu_max_pct"] = max((r.get("cpu_pct") or 0.0) for r in found)
        means.append(mean)
    return means
