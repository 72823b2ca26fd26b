"""The telemetry agent of a broker machine on AWS: samples the broker and the machine
through the whole run and streams the rows to the run's S3 prefix.

It runs as a systemd service (``brokerbench-telemetry.service``) beside the broker's own
unit, from the uploaded wheel with Debian's ``python3``, ``python3-boto3`` and
``python3-psutil`` (``PYTHONPATH=<wheel> python3 -m workload.engine.aws.telemetry_agent``), like
the fault agent. Every ``interval`` its :class:`~workload.engine.telemetry.Sampler` reads the
processes of the broker's unit (its cgroup, so a restarted broker is found again; where the
system's recipe names no unit, every process of the machine but the agent) with its
data directory's device, and the machine; every ``batch`` seconds the new rows go up as one
JSON-lines object, ``raw/telemetry-stream/<node>/<second>.jsonl`` (``<second>.<n>.jsonl``
for a further batch beginning in the same second)
(:meth:`workload.model.layout.RunLayout.telemetry_batch`) — the only keys this machine may write.
The rows name no sweep point: the analysis places each row in the point whose measurement
period holds its second.

A batch that cannot be uploaded is kept and sent with the next (up to :attr:`keep` rows,
the oldest dropped first, which is said once); SIGTERM — the machine shutting down —
uploads what is left and ends the agent, which never outlives its machine.

The run's end (``control/end``, posted by the coordinating client) stops the machine: the
agent uploads what is left — all the analysis needs of a broker machine — and, with
``--stop-at-end``, powers the machine off (:attr:`TelemetryAgent.at_end`).
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from workload.engine.aws.store import RunStore, agent_arguments, agent_store
from workload.engine.telemetry import Sampler, Target
from workload.model.layout import LAYOUT

Log = Callable[[str], None]
CGROUPS = Path("/sys/fs/cgroup")


def unit_processes(unit: str, cgroups: Path = CGROUPS) -> tuple[int, ...]:
    """The processes of a systemd service now (cgroup v2); none while it is down. Without a
    unit (a system whose recipe names none), every process of the machine but this agent:
    the machine runs the broker and nothing else of note."""
    if not unit:
        own = os.getpid()
        return tuple(pid for pid in psutil.pids() if pid != own)
    try:
        text = (cgroups / "system.slice" / unit / "cgroup.procs").read_text()
        return tuple(int(pid) for pid in text.split())
    except (OSError, ValueError):
        return ()


@dataclass
class TelemetryAgent:
    """Streams one broker machine's telemetry (see the module)."""

    store: RunStore
    node: str
    unit: str
    data_dir: Path
    interval: float = 1.0
    #: Seconds between uploads.
    batch: float = 10.0
    log: Log = print
    processes: Callable[[str], tuple[int, ...]] = unit_processes
    #: Rows kept for a later upload while uploads fail.
    keep: int = 3600
    stop: threading.Event = field(default_factory=threading.Event)
    #: Seconds between looks for the run's end marker.
    end_poll: float = 30.0
    #: What the agent does once the run has ended and every row is up (power off).
    at_end: Callable[[], None] | None = None
    _dropped: bool = field(default=False, init=False)
    #: Batches uploaded that begin in the latest such second (:meth:`upload` names them apart).
    _parts: dict[int, int] = field(default_factory=dict, init=False)

    def targets(self) -> list[Target]:
        return [Target("broker", self.node, self.processes(self.unit), self.data_dir)]

    def run(self) -> int:
        sampler = Sampler(
            self.store.run_id,
            -1,
            self.targets,
            self.interval,
            host_data_dir=self.data_dir,
            host=f"host-{self.node}",
        ).start()
        self.log(
            f"telemetry agent of {self.node}: unit {self.unit}, every {self.interval:g} s, "
            f"to {self.store.uri(LAYOUT.telemetry_stream)}/{self.node}/"
        )
        pending: list[dict[str, Any]] = []
        looked = time.monotonic()
        ended = False
        while not self.stop.wait(self.batch):
            pending = self.upload(pending + sampler.take())
            if sampler.failure:
                break
            if time.monotonic() - looked >= self.end_poll:
                looked = time.monotonic()
                ended = self.run_ended()
                if ended:
                    break
        pending = self.upload(pending + sampler.stop())
        if sampler.failure:
            self.log(sampler.failure)
        self.log(f"telemetry agent of {self.node}: stopped" + (" (the run ended)" if ended else ""))
        if ended and self.at_end is not None:
            self.at_end()
        return 0

    def run_ended(self) -> bool:
        """Whether the run's end marker is there (a failed look: not yet)."""
        try:
            return self.store.exists(LAYOUT.ended)
        except Exception as exc:
            self.log(f"cannot look for {self.store.uri(LAYOUT.ended)}: {exc}")
            return False

    def upload(self, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """Upload ``rows`` as one batch; what is left to send later."""
        if not rows:
            return []
        second = int(rows[0]["second"])
        part = self._parts.get(second, 0)
        key = LAYOUT.telemetry_batch(self.node, second, part)
        try:
            self.store.put_text(key, "".join(json.dumps(r) + "\n" for r in rows))
            self._parts = {second: part + 1}  # batches begin in seconds that only go up
            return []
        except Exception as exc:  # kept for the next batch
            self.log(f"upload of {key} failed ({exc}); {len(rows)} rows kept for the next")
        if len(rows) > self.keep and not self._dropped:
            self._dropped = True
            self.log(f"more than {self.keep} rows not uploaded: the oldest are dropped")
        return rows[-self.keep :]


def arguments() -> argparse.ArgumentParser:
    parser = agent_arguments(
        "workload.engine.aws.telemetry_agent",
        "The telemetry agent of a broker machine on AWS: samples the broker's processes and "
        "the machine and streams the rows to the run's S3 prefix.",
    )
    parser.add_argument(
        "--unit", default="", help="the broker's systemd unit (none: the machine's processes)"
    )
    parser.add_argument("--data-dir", required=True, help="the broker's data directory")
    parser.add_argument("--interval", type=float, default=1.0, help="seconds between samples")
    parser.add_argument(
        "--stop-at-end", action="store_true", help="power the machine off when the run ends"
    )
    return parser


def power_off() -> None:
    """Stop this machine (its shutdown behaviour: stopped, not terminated)."""
    subprocess.run(["systemctl", "--no-block", "poweroff"], check=False)


def main(argv: list[str] | None = None) -> int:
    """``python3 -m workload.engine.aws.telemetry_agent``: the service every broker machine runs."""
    args = arguments().parse_args(argv)
    log = functools.partial(print, flush=True)
    store = agent_store(args)
    agent = TelemetryAgent(
        store,
        args.node,
        args.unit,
        Path(args.data_dir),
        interval=args.interval,
        log=log,
        at_end=power_off if args.stop_at_end else None,
    )
    signal.signal(signal.SIGTERM, lambda *_: agent.stop.set())
    return agent.run()


if __name__ == "__main__":
    sys.exit(main())
