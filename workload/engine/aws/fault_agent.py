"""The fault agent of a broker machine on AWS: performs a scenario's ``[[faults]]`` on this
node's broker when the coordinator's control markers in S3 say so.

The coordinator (sender 0, :mod:`workload.engine.aws.fault_driver`) posts, under ``runs/<run-id>/``:

* ``control/faults/<node>/p<K>-f<I>.begin`` when fault ``I`` of sweep point ``K`` begins
  (its ``at``), with the action;
* ``control/faults/<node>/p<K>-f<I>.end`` when it ends (its ``until``, or between points
  for a fault without ``until``);
* ``control/faults/<node>/finished`` when the run has no more points: the agent exits.

(The keys are :class:`workload.model.layout.RunLayout`'s.)

The agent of ``<node>`` (``broker-1``, the node's name in the stack's plan) lists its own
prefix every ``poll`` seconds, acts on each marker it has not answered yet and answers it
with ``<marker>.ack``: ``{"acted_ns": …, "ok": …, "error": …}``, ``acted_ns`` being the
wall-clock time (ns) at which it issued the command — the point's timeline takes the
fault's ``began_ns`` / ``ended_ns`` from there. What it does to the broker's systemd unit:

========  =====================================================  ==========================
action    begin                                                  end
========  =====================================================  ==========================
kill      ``systemctl kill --signal=SIGKILL <unit>``, with a      drop-in removed,
          runtime drop-in ``Restart=no`` so systemd does not      ``systemctl start <unit>``
          restart it by itself
stop      ``systemctl stop <unit>``                               ``systemctl start <unit>``
pause     ``systemctl kill --signal=SIGSTOP <unit>``              ``… --signal=SIGCONT …``
isolate   an iptables chain dropping TCP to and from the broker   the chain removed
          ports (loopback and the node's own address excepted),
          so SSH and HTTPS to S3 stay open
========  =====================================================  ==========================

Commands go through a :data:`Runner` (tests pass a stand-in). Standard library only, with
boto3 imported by :func:`main`: the machine runs it with Debian's ``python3`` and
``python3-boto3`` straight from the uploaded wheel (``PYTHONPATH=<wheel> python3 -m
workload.engine.aws.fault_agent``), without installing the project.
"""

from __future__ import annotations

import argparse
import functools
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from workload.engine.aws.store import RunStore, agent_arguments, agent_store
from workload.model.layout import BEGIN, END, LAYOUT

#: The iptables chain of an isolated node.
CHAIN = "brokerbench-isolate"
#: Ports an isolation must never cut: SSH and HTTPS (S3, the parameter store).
KEPT_PORTS = frozenset({22, 443})
#: Where systemd reads runtime drop-ins.
RUNTIME_UNITS = Path("/run/systemd/system")
DROP_IN = "brokerbench-fault.conf"

Log = Callable[[str], None]
#: Runs one command; raises :class:`FaultFailed` (one line) when it fails.
Runner = Callable[[Sequence[str]], None]


class FaultFailed(Exception):
    """A fault command failed: one line naming the command and its error."""


def run_command(command: Sequence[str]) -> None:
    """Run ``command``; :class:`FaultFailed` with its last line of output if it fails."""
    try:
        done = subprocess.run(
            list(command),
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            check=False,
            timeout=120,
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise FaultFailed(f"{' '.join(command)}: {exc}") from None
    if done.returncode != 0:
        lines = done.stdout.strip().splitlines()
        reason = lines[-1] if lines else f"exit code {done.returncode}"
        raise FaultFailed(f"{' '.join(command)}: {reason}")


def port_open(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=3):
            return True
    except OSError:
        return False


@dataclass
class NodeFaults:
    """The faults of one broker node: what each action does to its systemd ``unit``."""

    unit: str
    #: The broker's TCP ports (clients and peers): what ``isolate`` cuts.
    ports: list[int]
    runner: Runner = run_command
    #: The node's private address: its traffic to itself is not cut by ``isolate``.
    address: str = ""
    runtime_units: Path = RUNTIME_UNITS

    def begin(self, action: str) -> None:
        if action == "kill":
            self._hold_down()
            self.runner(["systemctl", "kill", "--signal=SIGKILL", self.unit])
        elif action == "stop":
            self.runner(["systemctl", "stop", self.unit])
        elif action == "pause":
            self.runner(["systemctl", "kill", "--signal=SIGSTOP", self.unit])
        elif action == "isolate":
            self._isolate()
        else:
            raise FaultFailed(f"unknown fault action {action!r}")

    def end(self, action: str) -> None:
        if action == "kill":
            self._release()
            self.runner(["systemctl", "start", self.unit])
        elif action == "stop":
            self.runner(["systemctl", "start", self.unit])
        elif action == "pause":
            self.runner(["systemctl", "kill", "--signal=SIGCONT", self.unit])
        elif action == "isolate":
            self._rejoin()
        else:
            raise FaultFailed(f"unknown fault action {action!r}")

    @property
    def _drop_in(self) -> Path:
        return self.runtime_units / f"{self.unit}.d" / DROP_IN

    def _hold_down(self) -> None:
        """A killed unit stays down: systemd would restart it (``Restart=``) otherwise."""
        try:
            self._drop_in.parent.mkdir(parents=True, exist_ok=True)
            self._drop_in.write_text("[Service]\nRestart=no\n")
        except OSError as exc:
            raise FaultFailed(f"cannot write {self._drop_in}: {exc}") from None
        self.runner(["systemctl", "daemon-reload"])

    def _release(self) -> None:
        if self._drop_in.exists():
            self._drop_in.unlink()
            self.runner(["systemctl", "daemon-reload"])

    def _isolate(self) -> None:
        kept = sorted(KEPT_PORTS.intersection(self.ports))
        if kept:
            raise FaultFailed(f"isolate would cut port {kept[0]} (SSH or S3): not done")
        if not self.ports:
            raise FaultFailed(f"{self.unit}: no broker ports known to cut")
        ports = ",".join(str(p) for p in sorted(self.ports))
        rule = ["iptables", "-A", CHAIN]
        commands = [["iptables", "-N", CHAIN]]
        commands += [[*rule, "-s", "127.0.0.0/8", "-j", "RETURN"]]
        if self.address:
            commands += [[*rule, "-s", self.address, "-d", self.address, "-j", "RETURN"]]
        commands += [
            [*rule, "-p", "tcp", "-m", "multiport", "--dports", ports, "-j", "DROP"],
            [*rule, "-p", "tcp", "-m", "multiport", "--sports", ports, "-j", "DROP"],
            ["iptables", "-I", "INPUT", "1", "-j", CHAIN],
            ["iptables", "-I", "OUTPUT", "1", "-j", CHAIN],
        ]
        for command in commands:
            self.runner(command)

    def _rejoin(self) -> None:
        for command in (
            ["iptables", "-D", "INPUT", "-j", CHAIN],
            ["iptables", "-D", "OUTPUT", "-j", CHAIN],
            ["iptables", "-F", CHAIN],
            ["iptables", "-X", CHAIN],
        ):
            self.runner(command)


@dataclass
class FaultAgent:
    """Answers the fault markers of one broker node (see the module's description)."""

    store: RunStore
    node: str
    faults: NodeFaults
    log: Log = print
    poll: float = 1.0
    #: After an end between points (``"restore"``), how long to wait for the broker's
    #: first port to accept connections before answering.
    ready_timeout: float = 180.0
    ready: Callable[[], bool] | None = None
    clock: Callable[[], int] = time.time_ns
    #: Markers answered by this agent (their acknowledgement may not be listed yet).
    answered: set[str] = field(default_factory=set)

    def step(self) -> bool:
        """Act on every marker not answered yet, in order; False once the run is finished."""
        keys = self.store.keys(LAYOUT.fault_node(self.node))
        pending = sorted(
            (m for k in keys if (m := _parse(k)) is not None and LAYOUT.fault_ack(k) not in keys),
            key=lambda m: (m[1], m[2], m[3] == END),
        )
        for key, *_ in pending:
            if key not in self.answered:
                self._answer(key)
        return LAYOUT.fault_finished(self.node) not in keys

    def run(self) -> int:
        self.log(f"fault agent of {self.node}: unit {self.faults.unit}, markers under "
                 f"{self.store.uri(LAYOUT.fault_node(self.node))}")  # fmt: skip
        while self.step():
            time.sleep(self.poll)
        self.log(f"fault agent of {self.node}: the run is finished")
        return 0

    def _answer(self, key: str) -> None:
        marker = self.store.read_json(key) or {}
        action = str(marker.get("action", ""))
        kind = key.rsplit(".", 1)[-1]
        acted = self.clock()
        error = ""
        try:
            if kind == BEGIN:
                self.faults.begin(action)
            else:
                self.faults.end(action)
                if marker.get("why") == "restore" and self.ready is not None:
                    self._await_ready()
        except FaultFailed as exc:
            error = str(exc)
        self.log(f"{key}: {action} {kind}" + (f" FAILED: {error}" if error else ""))
        self.store.put_json(
            LAYOUT.fault_ack(key),
            {"acted_ns": acted, "ok": not error, "error": error, "node": self.node},
        )
        self.answered.add(key)

    def _await_ready(self) -> None:
        assert self.ready is not None
        deadline = time.monotonic() + self.ready_timeout
        while not self.ready():
            if time.monotonic() >= deadline:
                raise FaultFailed(
                    f"{self.faults.unit} not accepting connections {self.ready_timeout:.0f} s "
                    "after it was started again"
                )
            time.sleep(1.0)


def _parse(key: str) -> tuple[str, int, int, str] | None:
    marker = LAYOUT.fault_marker_of(key)
    return None if marker is None else (key, *marker)


def arguments() -> argparse.ArgumentParser:
    """The command line of ``python3 -m workload.engine.aws.fault_agent``."""
    parser = agent_arguments(
        "workload.engine.aws.fault_agent",
        "The fault agent of a broker machine on AWS: acts on this node's fault markers in the "
        "run's S3 prefix and acknowledges them.",
    )
    parser.add_argument("--unit", required=True, help="the broker's systemd unit")
    parser.add_argument("--ports", default="", help="the broker's TCP ports, comma-separated")
    parser.add_argument("--address", default="", help="this node's private address")
    return parser


def main(argv: list[str] | None = None) -> int:
    """``python3 -m workload.engine.aws.fault_agent``: the service a broker machine runs with faults."""
    args = arguments().parse_args(argv)
    log = functools.partial(print, flush=True)
    ports = [int(p) for p in args.ports.split(",") if p]
    host = args.address or "127.0.0.1"
    store = agent_store(args)
    agent = FaultAgent(
        store,
        args.node,
        NodeFaults(args.unit, ports, address=args.address),
        log=log,
        ready=(lambda: port_open(host, ports[0])) if ports else None,
    )
    return agent.run()


if __name__ == "__main__":
    sys.exit(main())
