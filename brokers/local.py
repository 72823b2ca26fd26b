"""Shared machinery for brokers started on this machine: ports, processes, readiness, clean-up.

Broker folders use these helpers to build their :class:`~brokers.base.LocalCluster`; the
helpers know nothing about any particular system. Servers listen on loopback, or — for a
scenario that isolates nodes — each node in a network namespace of its own
(:mod:`brokers.netns`).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from brokers.base import ALL_NODES, Destination, Endpoints, FaultTarget, LocalCluster, NodeProcesses
from brokers.errors import BrokerError, BrokerStartError, BrokerUnavailable
from brokers.netns import LOOPBACK, NodeHosts
from brokers.power import DISKS, PowerSupply
from brokers.watchdog import WATCHDOG

__all__ = ["LOOPBACK", "NodeHosts"]


def free_ports(count: int, host: str = LOOPBACK) -> list[int]:
    """``count`` distinct TCP ports that are free on ``host`` right now."""
    with contextlib.ExitStack() as stack:
        sockets = [stack.enter_context(socket.socket()) for _ in range(count)]
        for s in sockets:
            s.bind((host, 0))
        return [s.getsockname()[1] for s in sockets]


def port_open(host: str, port: int, timeout: float = 0.5) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout):
            return True
    except OSError:
        return False


def find_binary(name: str, package: str, search: Sequence[str] = ()) -> str:
    """Absolute path of ``name`` (on PATH or in ``search`` dirs), else a one-line error."""
    for directory in search:
        candidate = Path(directory) / name
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    found = shutil.which(name)
    if found:
        return found
    raise BrokerUnavailable(
        f"{name} not found: install the Debian package {package} "
        f"(apt-get install {package}) or run 'make setup'"
    )


def unavailable(*checks: Callable[[], object]) -> str | None:
    """What the first of ``checks`` to raise :class:`BrokerUnavailable` says (the one line a
    ``missing`` returns), or None when none does."""
    try:
        for check in checks:
            check()
    except BrokerUnavailable as exc:
        return str(exc)
    return None


def log_tail(path: Path, lines: int = 3) -> str:
    try:
        text = path.read_text(errors="replace").strip().splitlines()
    except OSError:
        return ""
    return " | ".join(line.strip() for line in text[-lines:])


def log_contains(path: Path, text: str) -> bool:
    """Whether the log at ``path`` holds ``text`` (False while there is no log)."""
    try:
        return text in path.read_text(errors="replace")
    except OSError:
        return False


def run_checked(cmd: Sequence[str], what: str, timeout: float = 120, **kwargs: object) -> str:
    """Run a helper command (initdb, rabbitmqctl …); a failure names ``what`` and its output.

    It runs in a session of its own registered with the :mod:`~brokers.watchdog` while it
    runs, so that it cannot outlive a coordinator killed during start-up (and write into a
    work directory the watchdog deletes)."""
    try:
        with subprocess.Popen(
            list(cmd),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            stdin=subprocess.DEVNULL,
            text=True,
            start_new_session=True,
            **kwargs,  # type: ignore[call-overload]
        ) as proc:
            WATCHDOG.watch_group(proc.pid)
            try:
                stdout, stderr = proc.communicate(timeout=timeout)
            except BaseException:
                with contextlib.suppress(OSError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                raise
            finally:
                WATCHDOG.release_group(proc.pid)
    except subprocess.TimeoutExpired:
        raise BrokerStartError(f"{what} did not finish within {timeout:.0f} s") from None
    except FileNotFoundError as exc:
        raise BrokerStartError(f"{what}: {exc.filename} not found") from None
    if proc.returncode != 0:
        detail = (stderr or stdout).strip().splitlines()
        raise BrokerStartError(f"{what} failed: {detail[-1] if detail else proc.returncode}")
    return str(stdout)


@dataclass
class ManagedProcess:
    """One server process in its own session (Ctrl-C in the terminal does not reach it).

    The session is registered with the :mod:`~brokers.watchdog` while it runs, so that the
    process cannot outlive the one that started it, however that one ends. A node that was
    killed or stopped can be started again (:meth:`restart`) with the same command,
    environment and working directory — so from the same configuration and data.
    """

    name: str
    cmd: list[str]
    log_path: Path
    env: dict[str, str] | None = None
    cwd: Path | None = None
    #: Whether the server answers (e.g. its port is open): awaited after a restart.
    ready: Callable[[], bool] | None = field(default=None, repr=False)
    #: Its data directory: mounted on the run's disks (:mod:`brokers.power`) before it starts.
    data_dir: Path | None = None
    proc: subprocess.Popen[bytes] | None = field(default=None, repr=False)

    def start(self) -> ManagedProcess:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with self.log_path.open("ab") as log:
            try:
                self.proc = subprocess.Popen(
                    self.cmd,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    env={**os.environ, **(self.env or {})},
                    cwd=self.cwd,
                    start_new_session=True,
                )
            except FileNotFoundError:
                raise BrokerStartError(f"{self.name}: {self.cmd[0]} not found") from None
        WATCHDOG.watch_group(self.proc.pid)
        return self

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def stop(self, timeout: float = 15) -> None:
        if self.proc is None:
            return
        if not self.alive():  # the leader died: end what is left of its group
            self.kill()
            return
        try:
            os.killpg(self.proc.pid, signal.SIGTERM)
            os.killpg(self.proc.pid, signal.SIGCONT)  # a paused node must run to stop
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return
        except ProcessLookupError:
            pass
        WATCHDOG.release_group(self.proc.pid)

    def kill(self) -> None:
        """SIGKILL the whole process group (also what is left of it after the leader died)."""
        if self.proc is None:
            return
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self._reap()

    def _reap(self) -> None:
        """Wait for the killed group's leader. One stuck in the kernel (a stalled disk) ends
        when the kernel lets it, its SIGKILL pending: it stays registered with the watchdog,
        which kills its group again when this process ends, rather than fail the stop."""
        assert self.proc is not None
        try:
            self.proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            return
        WATCHDOG.release_group(self.proc.pid)

    def pause(self) -> None:
        """SIGSTOP the process group: the server stays up but answers nothing."""
        self._signal(signal.SIGSTOP)

    def resume(self) -> None:
        """SIGCONT the process group after :meth:`pause`."""
        self._signal(signal.SIGCONT)

    def _signal(self, signum: int) -> None:
        if not self.alive():
            raise BrokerError(f"{self.name} is not running")
        assert self.proc is not None
        os.killpg(self.proc.pid, signum)

    def restart(self, wait: float = 0.0) -> None:
        """Start the node again after it was killed or stopped; with ``wait`` > 0, wait that
        long for :attr:`ready`."""
        if self.alive():
            raise BrokerError(f"{self.name} is still running")
        self.kill()  # what may be left of the old group; it is released from the watchdog
        self.start()
        if wait > 0 and self.ready is not None:
            wait_until(self.ready, f"{self.name} restarting", wait, self)


@dataclass(frozen=True)
class Deadline:
    """When a cluster's start-up must be done by; each wait in it gets what is left."""

    at: float

    @classmethod
    def after(cls, seconds: float) -> Deadline:
        return cls(time.monotonic() + seconds)

    def left(self, least: float = 1.0) -> float:
        """Seconds left, but at least ``least`` (a last check still gets a moment)."""
        return max(least, self.at - time.monotonic())


def wait_until(
    ready: Callable[[], bool],
    what: str,
    timeout: float,
    process: ManagedProcess | None = None,
    interval: float = 0.2,
) -> None:
    """Poll ``ready`` until true; a timeout or an exited ``process`` raises naming ``what``
    (and the process's log)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if ready():
            return
        if process is not None and not process.alive():
            code = process.proc.returncode if process.proc else "?"
            raise BrokerStartError(
                f"{what} exited with code {code} while starting; "
                f"log {process.log_path}: {log_tail(process.log_path)}"
            )
        time.sleep(interval)
    log = f"; log: {process.log_path}" if process is not None else ""
    raise BrokerStartError(f"{what} did not start within {timeout:.0f} s{log}")


def wait_for_port(process: ManagedProcess, host: str, port: int, timeout: float = 60) -> None:
    wait_until(lambda: port_open(host, port), f"{process.name} ({host}:{port})", timeout, process)


class ProcessCluster(LocalCluster):
    """A set of :class:`ManagedProcess` nodes under one work directory.

    ``stop`` ends the nodes — the groups named by ``stop_order`` one after the other, the
    nodes of a group (and all others, last) at once, since their data is thrown away and a
    quorum stopped node by node waits for peers that are gone — then deletes the work
    directory and ``cleanup`` (unless ``keep`` is set, for debugging). Safe to call twice.
    Should this process die first, the :mod:`~brokers.watchdog` ends the nodes and deletes
    the directories instead.

    ``hosts`` says where the nodes listen (:mod:`brokers.netns`): a node added with a
    ``slot`` runs on that slot's host (:meth:`host`); where the hosts are namespaces, such
    a node can be isolated (``fault(name, "isolate")``) and reconnected.
    """

    #: Node-name prefixes stopped group after group.
    stop_order: tuple[str, ...] = ()
    #: Seconds a node may take to stop before it is killed.
    stop_timeout: float = 15.0

    def __init__(
        self, topology: str, workdir: Path, keep: bool = False, hosts: NodeHosts | None = None
    ) -> None:
        self.topology = topology
        self.workdir = workdir
        self.keep = keep
        self.hosts = hosts or NodeHosts()
        self.nodes: list[ManagedProcess] = []
        #: The host slot of each node added with one.
        self.slots: dict[str, int] = {}
        #: Further directories removed with the work directory (e.g. data owned by another user).
        self.cleanup: list[Path] = []
        self.endpoints = Endpoints(hosts=())
        disks = DISKS.get()
        #: The nodes' data directories on disks that can lose power (``power-loss``).
        self.power = PowerSupply(disks) if disks is not None else None
        self._stopped = False
        self._watched: list[Path] = []
        self._watch(workdir)  # before anything is written into it

    def private_dir(self, prefix: str) -> Path:
        """A new directory of this cluster's outside its work directory (e.g. one another
        user owns), removed with the cluster — or by the watchdog, from the moment it
        exists, should this process die."""
        directory = Path(tempfile.mkdtemp(prefix=prefix))
        self.cleanup.append(directory)
        self._watch(directory)
        return directory

    def _watch(self, directory: Path) -> None:
        if not self.keep and directory not in self._watched:
            WATCHDOG.watch_dir(directory)
            self._watched.append(directory)

    def host(self, slot: int) -> str:
        """The address the node in ``slot`` listens on (loopback unless the hosts are
        network namespaces)."""
        return self.hosts.address(slot)

    def add(self, node: ManagedProcess, slot: int | None = None) -> ManagedProcess:
        """Start ``node`` (on the host of ``slot``, when given) and keep it."""
        if slot is not None:
            node.cmd = self.hosts.command(slot, node.cmd)
            self.slots[node.name] = slot
        for directory in [self.workdir, *self.cleanup]:
            self._watch(directory)
        if self.power is not None and node.data_dir is not None:
            self.power.mount(node.name, node.data_dir)
        self.nodes.append(node.start())
        return node

    def dead_nodes(self) -> list[str]:
        return [n.name for n in self.nodes if not n.alive()]

    def death(self, name: str) -> str:
        node = self.node(name)
        code = node.proc.returncode if node.proc is not None else None
        if code is None:
            how = ""
        elif code < 0:
            try:
                how = f"killed by {signal.Signals(-code).name}"
            except ValueError:
                how = f"killed by signal {-code}"
        else:
            how = f"exit code {code}"
        tail = log_tail(node.log_path)[-400:]
        return "; ".join(part for part in (how, f"its log ends: {tail}" if tail else "") if part)

    def processes(self) -> list[NodeProcesses]:
        """Each node's process group (the session it was started in), the work directory
        its data is in and, in a namespace, its bridge port."""
        return [
            NodeProcesses(
                node.name,
                node.proc.pid if node.proc is not None and node.alive() else None,
                self.workdir,
                self.hosts.interface(self.slots[node.name]) if node.name in self.slots else None,
            )
            for node in self.nodes
        ]

    def node(self, name: str) -> ManagedProcess:
        return next(n for n in self.nodes if n.name == name)

    def fault_nodes(self) -> list[str]:
        """The broker nodes faults act on, in the order ``node = <index>`` counts them;
        by default every node (a system leaves out helpers such as epmd)."""
        return [n.name for n in self.nodes]

    def leader(self, destination: Destination) -> str:
        """The name of the node leading now (what it leads is the system's to say)."""
        raise BrokerError(f"faults are not supported by this {self.topology} cluster")

    def fault_target(self, selector: str | int, destination: Destination) -> FaultTarget:
        """The leader, the first follower that runs, or the node at an index."""
        if selector == ALL_NODES:  # a power-loss of every node: the leader's among them
            return FaultTarget(ALL_NODES, True)
        names = self.fault_nodes()
        leader = self.leader(destination)
        if selector == "leader":
            name = leader
        elif selector == "follower":
            running = [n for n in names if n != leader and self.node(n).alive()]
            if not running:
                raise BrokerError(f"no follower of {leader} is running")
            name = running[0]
        elif isinstance(selector, int) and 0 <= selector < len(names):
            name = names[selector]
        else:
            raise BrokerError(f"no node {selector!r} among {', '.join(names)}")
        return FaultTarget(name, name == leader)

    def fault(self, name: str, action: str) -> None:
        if action == "power-loss":
            return self._cut_power(self._named(name))
        node = self.node(name)
        if action == "kill":
            node.kill()
        elif action == "stop":
            node.stop(timeout=self.stop_timeout)
        elif action == "pause":
            node.pause()
        elif action == "isolate":
            self.hosts.cut(self._slot(name))
        else:
            raise BrokerError(f"{action} is not available for nodes started here")

    def recover(self, name: str, action: str, wait: float = 0.0) -> None:
        if action == "power-loss":
            return self._restore_power(self._named(name), wait)
        node = self.node(name)
        if action == "pause":
            node.resume()
        elif action == "isolate":
            self.hosts.mend(self._slot(name))
        else:
            node.restart(wait)

    def _named(self, name: str) -> list[ManagedProcess]:
        """The node ``name``, or every broker node for ``"all"``."""
        return [self.node(n) for n in (self.fault_nodes() if name == ALL_NODES else [name])]

    def _cut_power(self, nodes: list[ManagedProcess]) -> None:
        """Every disk of ``nodes`` loses what was not synced at one instant, and at once
        (nothing more can become durable) every process of theirs gets SIGKILL."""
        if self.power is None:
            raise BrokerError("power-loss needs the data directories on the lazy filesystem")
        groups = [n.proc.pid for n in nodes if n.proc is not None and n.alive()]
        self.power.cut([n.name for n in nodes], groups)
        for node in nodes:
            node.kill()  # reaped; what is left of a group is killed again

    def _restore_power(self, nodes: list[ManagedProcess], wait: float) -> None:
        """The disks come back with only what was synced, then the nodes start again."""
        assert self.power is not None
        self.power.restore([n.name for n in nodes])
        for node in nodes:
            node.restart()
        for node in nodes:
            if wait > 0 and node.ready is not None:
                wait_until(node.ready, f"{node.name} restarting", wait, node)

    def _slot(self, name: str) -> int:
        if name not in self.slots:
            raise BrokerError(f"{name} does not run on a host of its own: it cannot be isolated")
        return self.slots[name]

    def stop(self) -> None:
        if self._stopped:
            return
        self._stopped = True
        groups = [[n for n in self.nodes if n.name.startswith(p)] for p in self.stop_order]
        grouped = {id(n) for group in groups for n in group}
        groups.append([n for n in self.nodes if id(n) not in grouped])
        for group in groups:
            if group:
                with ThreadPoolExecutor(max_workers=len(group)) as pool:
                    list(pool.map(self._stop_node, group))
        if self.power is not None:
            self.power.unmount()
        self.hosts.close()
        if not self.keep:
            for directory in [self.workdir, *self.cleanup]:
                shutil.rmtree(directory, ignore_errors=True)
            for directory in self._watched:
                WATCHDOG.release_dir(directory)

    def _stop_node(self, node: ManagedProcess) -> None:
        try:
            node.stop(timeout=self.stop_timeout)
        except Exception:
            node.kill()


def start_cluster(
    cluster: ProcessCluster, build: Callable[[ProcessCluster], None]
) -> ProcessCluster:
    """Run ``build`` (which adds and waits for nodes); on any failure stop what started."""
    try:
        build(cluster)
    except BaseException:
        cluster.stop()
        raise
    return cluster
