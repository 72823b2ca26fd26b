"""Running the client processes of one tool run and measuring their CPU and the broker's.

The client processes of a run start together and are reaped with ``wait4``, whose resource
usage covers each process and every descendant it waited for (a JVM's threads, the
node processes of ``brokerbench run``). The broker's process tree is read from ``/proc``
when the first client starts and after the last one ends.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from .base import CpuUsage, ToolFailed
from .cpu import CpuSample, machine_busy_seconds, tree_cpu_seconds

GRACE = 10.0
#: Seconds between two readings of the client's and the broker's CPU.
SAMPLE_INTERVAL = 0.25


@dataclass(frozen=True)
class Finished:
    """One client process after it ended."""

    name: str
    returncode: int
    output: str
    cpu_seconds: float
    timed_out: bool

    def check(self) -> str:
        """The output of a process that succeeded; otherwise :class:`ToolFailed`."""
        if self.timed_out:
            raise ToolFailed(f"{self.name} did not finish in time; {last_line(self.output)}")
        if self.returncode != 0:
            raise ToolFailed(
                f"{self.name} exited with code {self.returncode}: {last_line(self.output)}"
            )
        return self.output


def last_line(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    return lines[-1][:200] if lines else "no output"


@dataclass
class _Running:
    name: str
    proc: subprocess.Popen[bytes]
    log: Path
    deadline: float
    status: int | None = None
    cpu: float = 0.0
    timed_out: bool = False


@dataclass
class ToolRun:
    """The client processes of one measured run (e.g. a producer and a consumer)."""

    workdir: Path
    broker_pids: Callable[[], list[int]]
    _running: list[_Running] = field(default_factory=list)
    _started: float = 0.0
    _broker_before: float = 0.0
    _machine_before: float = 0.0
    _samples: list[CpuSample] = field(default_factory=list)
    _sampling: threading.Event = field(default_factory=threading.Event)
    _sampler: threading.Thread | None = None

    def start(
        self,
        name: str,
        cmd: Sequence[str],
        timeout: float,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
    ) -> None:
        """Start one client process; it is stopped when it runs longer than ``timeout``."""
        if not self._running:
            self._broker_before = tree_cpu_seconds(self.broker_pids())
            self._machine_before = machine_busy_seconds()
            self._started = time.monotonic()
        log = self.workdir / f"{name.replace(' ', '-')}.log"
        with log.open("wb") as out:
            try:
                proc = subprocess.Popen(
                    list(cmd),
                    stdout=out,
                    stderr=subprocess.STDOUT,
                    stdin=subprocess.DEVNULL,
                    env={**os.environ, **(env or {})},
                    cwd=cwd or self.workdir,
                    start_new_session=True,
                )
            except OSError as exc:
                self.stop_all()
                raise ToolFailed(f"{name}: cannot start {cmd[0]}: {exc.strerror}") from None
        self._running.append(_Running(name, proc, log, time.monotonic() + timeout))
        if self._sampler is None:
            self._sampler = threading.Thread(target=self._sample, daemon=True)
            self._sampler.start()

    def _sample(self) -> None:
        """Read both process trees every SAMPLE_INTERVAL until the run ends."""
        while not self._sampling.is_set():
            clients = [r.proc.pid for r in self._running if r.status is None]
            self._samples.append(
                CpuSample(
                    time.time(),
                    tree_cpu_seconds(clients) + sum(r.cpu for r in self._running),
                    tree_cpu_seconds(self.broker_pids()),
                    machine_busy_seconds(),
                )
            )
            self._sampling.wait(SAMPLE_INTERVAL)

    def wait(self) -> tuple[list[Finished], CpuUsage]:
        """Wait for every process (stopping those past their deadline); CPU of the run."""
        try:
            self._wait_all()
        except BaseException:  # Ctrl-C: no client process may outlive the benchmark
            self.stop_all()
            raise
        finally:
            self._sampling.set()
            if self._sampler is not None:
                self._sampler.join()
        return self._finished()

    def _wait_all(self) -> None:
        pending = list(self._running)
        while pending:
            for run in list(pending):
                if self._reap(run, block=False):
                    pending.remove(run)
                elif time.monotonic() > run.deadline and not run.timed_out:
                    run.timed_out = True
                    _signal(run.proc, signal.SIGTERM)
                    run.deadline = time.monotonic() + GRACE
                elif time.monotonic() > run.deadline:
                    _signal(run.proc, signal.SIGKILL)
                    self._reap(run, block=True)
                    pending.remove(run)
            time.sleep(0.05)

    def _finished(self) -> tuple[list[Finished], CpuUsage]:
        wall = time.monotonic() - self._started
        broker = tree_cpu_seconds(self.broker_pids()) - self._broker_before
        machine = machine_busy_seconds() - self._machine_before
        finished = [
            Finished(
                r.name,
                r.status if r.status is not None else -1,
                r.log.read_text(errors="replace"),
                r.cpu,
                r.timed_out,
            )
            for r in self._running
        ]
        cpu = CpuUsage(
            client_seconds=sum(r.cpu for r in self._running),
            broker_seconds=broker,
            wall_seconds=wall,
            samples=tuple(self._samples),
            machine_seconds=machine,
        )
        return finished, cpu

    def stop_all(self) -> None:
        """Kill and reap whatever was started (after a failure to start the next one)."""
        for run in self._running:
            if run.status is None:
                _signal(run.proc, signal.SIGKILL)
                self._reap(run, block=True)

    @staticmethod
    def _reap(run: _Running, block: bool) -> bool:
        pid, status, usage = os.wait4(run.proc.pid, 0 if block else os.WNOHANG)
        if pid == 0:
            return False
        run.status = os.waitstatus_to_exitcode(status)
        run.proc.returncode = run.status  # reaped here: Popen must not wait again
        run.cpu = usage.ru_utime + usage.ru_stime
        return True


def _signal(proc: subprocess.Popen[bytes], sig: signal.Signals) -> None:
    try:
        os.killpg(proc.pid, sig)
    except ProcessLookupError:
        pass


def run_tool(
    workdir: Path,
    broker_pids: Callable[[], list[int]],
    commands: Sequence[tuple[str, Sequence[str]]],
    timeout: float,
    env: dict[str, str] | None = None,
    stagger: float = 0.0,
) -> tuple[list[Finished], CpuUsage]:
    """Start ``(name, cmd)`` processes ``stagger`` seconds apart and wait for all of them."""
    run = ToolRun(workdir, broker_pids)
    for index, (name, cmd) in enumerate(commands):
        if index and stagger:
            time.sleep(stagger)
        run.start(name, cmd, timeout, env=env)
    return run.wait()
