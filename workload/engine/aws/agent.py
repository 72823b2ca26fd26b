"""What a client machine runs on AWS (``brokerbench cloud client``), from boot to results in S3.

0. Read the stack's broker password from the parameter store (its name comes in
   ``$BROKERBENCH_PASSWORD_PARAMETER``; the value never is in user-data or in S3).
1. Post ``control/<role>-<node>.started``, then wait until every broker endpoint of the
   scenario accepts TCP connections.
2. For every sweep point, in order: sender 0 (the coordinator, :mod:`workload.engine.coordinator`
   over :class:`~workload.engine.aws.fleet.S3Fleet`) prepares the point (``brokerbench prepare``),
   posts ``control/p<K>.ready``, runs its own sender node and waits until every node of
   the point is done; every other node waits for the ready marker. Nodes that take part in
   the point run their role (``brokerbench node``), upload what they recorded and post
   ``control/p<K>-<role>-<node>.done`` (ok or the error). While its node runs, the agent
   samples the node's processes and the machine (:mod:`workload.engine.telemetry`) into
   ``raw/telemetry/p<K>-<role>-<node>.parquet``, uploaded with the rest. A node that has not posted its
   started marker ``start_grace`` seconds into the run (its machine did not come up or its
   installation failed) is not waited for: the coordinator closes each of its points by
   posting its done marker and node statuses saying so, which ``brokerbench cloud status``
   and the analysis report; if the node starts after all, it skips the closed points.
   With ``[[faults]]`` (a scenario of an AWS stack, :mod:`workload.engine.aws.fault_driver`), the
   coordinator starts the faults' clock when it starts its own sender node, posts each
   fault's begin and end markers for the broker machines' fault agents at their times,
   and, once every node of the point is done, brings a node still down back (another point
   follows) and uploads the point's timeline ``faults/p<K>.json``.
3. Uploads are retried; a file that still cannot be uploaded stays on the machine and the
   done marker and the log say so.
4. Sender 0 posts ``control/end`` when the run is over, however it ended; each client
   machine powers off when its agent exits, each broker machine once the end is posted.

Everything lives under ``s3://<bucket>/runs/<run-id>/`` — the only prefix a client may
write — laid out as a local ``RESULTS_DIR/<run-id>/``. Whether a marker exists is asked by
listing it, never by reading it (see :class:`RunStore`), and a request S3 refuses ends the
agent with one line naming the permission and the object.
"""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import psutil

from workload.engine.aws.fault_agent import port_open
from workload.engine.aws.fault_driver import RunFaults
from workload.engine.aws.fleet import S3Fleet, participants
from workload.engine.aws.store import Log, RunStore, StoreDenied, Uploader, now
from workload.engine.context import now_iso
from workload.engine.coordinator import Coordinator, places
from workload.engine.preflight import preflight
from workload.engine.telemetry import Sampler, Target
from workload.model.errors import RecordsNotWritten, UserError
from workload.model.layout import LAYOUT
from workload.model.record import load_context, write_context
from workload.model.results import write_telemetry
from workload.model.scenario import Scenario, expand
from workload.model.scenario_file import load_scenario
from workload.model.sweep import SweepPoint

#: Names the parameter that holds the stack's broker password (set in the node's env file).
PASSWORD_PARAMETER_ENV = "BROKERBENCH_PASSWORD_PARAMETER"


class ParameterStore(Protocol):
    """The one SSM operation the agent needs (a boto3 SSM client provides it)."""

    def get_parameter(self, **kwargs: Any) -> Any: ...


def read_parameter(
    ssm: ParameterStore, name: str, log: Log, attempts: int = 30, pause: float = 10.0
) -> str | None:
    """A SecureString's value, retried while the machine's role settles; None (logged) if never."""
    error = ""
    for attempt in range(attempts):
        try:
            value = ssm.get_parameter(Name=name, WithDecryption=True)["Parameter"]["Value"]
            return str(value)
        except Exception as exc:  # credentials not yet there, throttling, denied …
            error = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        if attempt + 1 < attempts:
            time.sleep(pause)
    log(f"cannot read {name} from the parameter store: {error}")
    return None


class NodeCommands(Protocol):
    def prepare(self, point: int) -> tuple[bool, str]: ...
    def run_node(self, point: int) -> tuple[bool, str]: ...


@dataclass
class CliCommands:
    """``brokerbench prepare`` / ``brokerbench node`` of this installation, as subprocesses."""

    role: str
    node: int
    run_id: str
    scenario: Path
    results: Path
    log: Log

    def _run(self, command: str, point: int, *options: str) -> tuple[bool, str]:
        """``brokerbench <command> [options]`` for sweep point ``point`` of this run."""
        args = [
            command,
            *options,
            "--run-id",
            self.run_id,
            "--point",
            str(point),
            "--results",
            str(self.results),
            str(self.scenario),
        ]
        self.log("$ brokerbench " + " ".join(args))
        done = subprocess.run(
            [sys.executable, "-m", "workload.shell.cli", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            check=False,
        )
        lines = done.stdout.strip().splitlines()
        for line in lines:
            self.log(f"  {line}")
        return done.returncode == 0, (lines[-1] if lines else f"exit code {done.returncode}")

    def prepare(self, point: int) -> tuple[bool, str]:
        return self._run("prepare", point)

    def run_node(self, point: int) -> tuple[bool, str]:
        return self._run("node", point, "--role", self.role, "--node", str(self.node))


def wait_for_endpoints(hosts: list[str], timeout: float, log: Log, poll: float = 5.0) -> list[str]:
    """Wait until every ``host:port`` accepts a TCP connection; the ones that never did."""
    pending = list(hosts)
    deadline = time.monotonic() + timeout
    last_report = 0.0
    while pending:
        pending = [h for h in pending if not _reachable(h)]
        if not pending or time.monotonic() >= deadline:
            break
        if time.monotonic() - last_report >= 60:
            log(f"waiting for the brokers: {', '.join(pending)} not reachable yet")
            last_report = time.monotonic()
        time.sleep(max(0.0, min(poll, deadline - time.monotonic())))
    return pending


def _reachable(address: str) -> bool:
    host, _, port = address.rpartition(":")
    return port_open(host.strip("[]"), int(port))


@dataclass
class ClientAgent:
    role: str
    node: int
    store: RunStore
    scenario_path: Path
    results: Path
    commands: NodeCommands
    log: Log = print
    broker_wait: float = 1800.0
    poll: float = 2.0
    #: Slack per sweep point on top of its duration and idle timeout (start-up, uploads).
    point_slack: float = 900.0
    #: How long into the run a node may take to post its started marker (booting and
    #: installing); the coordinator waits no longer for a node that has not.
    start_grace: float = 900.0
    uploader: Uploader | None = None
    #: How long the coordinator waits for a broker machine to act on a fault marker.
    fault_ack_timeout: float = 300.0
    #: Seconds between telemetry samples (the scenario's ``measurement.telemetry_interval``).
    telemetry_interval: float = 1.0
    #: Seconds between uploads of what a node wrote while it runs (the scenario's
    #: ``measurement.flush_interval``: the node's chunks reach S3 as they are written).
    flush_interval: float = 60.0
    #: Telemetry rows whose chunk could not be written while the node ran.
    _unflushed: list[dict[str, Any]] = field(default_factory=list, init=False)
    _began: float = field(default=0.0, init=False)
    _posted: set[int] = field(default_factory=set, init=False)

    @property
    def coordinator(self) -> bool:
        return self.role == "sender" and self.node == 0

    @property
    def run_dir(self) -> Path:
        return self.results / self.store.run_id

    def run(self) -> int:
        """Run every sweep point this node takes part in; 0 when all went well.

        A request S3 refuses ends the run: its one line is logged and, as far as S3 allows,
        posted as the done marker of every point of this node not yet done. The
        coordinator then posts the run's end, however it ended: every machine stops.
        """
        self._began = time.monotonic()
        scenario = load_scenario(self.scenario_path)
        points = expand(scenario)
        mine = [p.index for p in points if (self.role, self.node) in participants(p)]
        code = 1
        try:
            code = self._run(scenario, points, mine)
        except StoreDenied as exc:
            self.log(str(exc))
            self._fail([index for index in mine if index not in self._posted], str(exc))
        finally:
            if self.coordinator:
                self._post_end(code == 0)
        return code

    def _post_end(self, ok: bool) -> None:
        """The run's end marker: the broker machines stop themselves once it is there."""
        try:
            self.store.put_json(LAYOUT.ended, {"ok": ok, "at": now(), "by": "sender-0"})
        except Exception as exc:  # the machines' time to live stops them instead
            self.log(f"could not post the run's end {self.store.uri(LAYOUT.ended)}: {exc}")

    def _run(self, scenario: Scenario, points: list[SweepPoint], mine: list[int]) -> int:
        endpoints = list(scenario.broker.endpoints)
        self.telemetry_interval = scenario.measurement.telemetry_interval
        self.flush_interval = scenario.measurement.flush_interval
        self.uploader = self.uploader or Uploader(self.store, self.run_dir, self.log)
        self.log(
            f"{self.role} node {self.node} of run {self.store.run_id}: {len(points)} sweep point(s), "
            f"results to {self.store.uri('')}"
        )
        self.store.put_json(LAYOUT.started(self.role, self.node), {"at": now()})
        try:  # room and memory for this node's points, before waiting for anything
            preflight(self.results, [p for p in points if p.index in mine])
        except UserError as exc:
            self.log(str(exc))
            self._fail(mine, str(exc))
            return 1
        unreachable = wait_for_endpoints(endpoints, self.broker_wait, self.log)
        if unreachable:
            error = (
                f"brokers not reachable after {self.broker_wait:.0f} s: {', '.join(unreachable)} "
                "(a broker machine whose set-up failed uploaded its logs: brokerbench cloud "
                "status shows their last lines)"
            )
            self.log(error)
            self._fail(mine, error)
            return 1
        if self.coordinator:
            ok = self._coordinate(scenario, points)
            if ok is None:
                return 1
        else:
            ok = self._follow(points, mine)
        self.log(f"{self.role} node {self.node}: {'finished' if ok else 'finished with errors'}")
        return 0 if ok else 1

    def _coordinate(self, scenario: Scenario, points: list[SweepPoint]) -> bool | None:
        """Sender 0: every point through the coordinator over the client machines
        (:class:`~workload.engine.aws.fleet.S3Fleet`); None when the run id was used before."""
        if self.store.keys(LAYOUT.point_markers):
            self.log(
                f"run {self.store.run_id} already has results in {self.store.uri(LAYOUT.markers)}: "
                "give every run its own run id (pulumi config set brokerbench:runId …)"
            )
            return None
        faults = RunFaults.of(self.store, scenario, self.log)
        if faults is not None:
            faults.ack_timeout = self.fault_ack_timeout
            faults.poll = self.poll
        assert self.uploader is not None  # set when the run starts
        fleet = S3Fleet(
            self.store,
            self.uploader,
            self,
            self.log,
            f"{self.role}-{self.node}",
            faults,
            start_grace=self.start_grace,
            poll=self.poll,
        )
        Coordinator(fleet).run(places(points))
        if faults is not None and points:
            faults.finish()
        self._record_end(fleet.ok)
        return fleet.ok

    def _record_end(self, ok: bool) -> None:
        """Write how the run ended into its context and upload it: "complete", or
        "failed" when a node failed or posted nothing in time (``cloud status`` says
        which). A run whose coordinating machine stopped first stays "running"."""
        if not (self.run_dir / LAYOUT.context).exists():
            return  # point 0 was never prepared: there is no context to end
        context = load_context(self.run_dir)
        context.finished = now_iso()
        context.status = "complete" if ok else "failed"
        if not ok and not context.errors:
            context.errors = [
                "a node failed or posted no results in time (brokerbench cloud status)"
            ]
        try:
            write_context(self.run_dir, context)
        except OSError as exc:
            self.log(f"the run's end not recorded: {exc}")
            return
        for name in self.upload_new():
            self.log(f"not uploaded: {name}")

    def _follow(self, points: list[SweepPoint], mine: list[int]) -> bool:
        """Any other node: wait for each point's ready marker, run the points it takes
        part in."""
        ok = True
        start = time.monotonic()
        for position, point in enumerate(points):
            deadline = start + self.broker_wait + self.budget(point) * (position + 1) * 2
            ready = self._await_ready(point.index, deadline)
            if point.index in mine:
                ok = self.take_part(point, ready) and ok
        return ok

    def take_part(
        self,
        point: SweepPoint,
        ready: dict[str, Any] | None,
        starting: Callable[[], None] | None = None,
    ) -> bool:
        """Run this node of ``point`` (``starting`` just before), upload what it recorded
        and post its done marker — unless the point is closed already or was not
        prepared; whether it went well."""
        closed = self.store.get_json(LAYOUT.done(point.index, self.role, self.node))
        if closed is not None:  # closed without this node, or done before a restart
            self.log(f"point {point.index}: skipped, already closed ({closed.get('error')})")
            return bool(closed.get("ok"))
        if ready is None or not ready.get("ok"):
            reason = "never prepared" if ready is None else f"not prepared: {ready.get('error')}"
            self._done(point.index, False, f"point {point.index} {reason}", [])
            return False
        self.log(f"point {point.index} ({point.label}): running {self.role} node {self.node}")
        if starting is not None:
            starting()
        sampler = self.sampler(point).start()
        running = threading.Event()
        uploads = threading.Thread(
            target=self._upload_while_running, args=(sampler, running), daemon=True
        )
        uploads.start()
        try:
            succeeded, message = self.commands.run_node(point.index)
        finally:
            running.set()
            uploads.join()
            self.keep_telemetry(sampler)
        failed = self.upload_new()
        self._done(point.index, succeeded, "" if succeeded else message, failed)
        return succeeded and not failed

    def prepare(self, point: int) -> tuple[bool, str]:
        """``brokerbench prepare`` of ``point`` on this machine (the coordinator's part)."""
        return self.commands.prepare(point)

    def sampler(self, point: SweepPoint) -> Sampler:
        """The resource sampler of this machine while it runs ``point``: its node's
        processes (this agent's descendants) and the machine, named for this node."""
        name = f"{self.role}-{self.node}"

        def targets() -> list[Target]:
            children = psutil.Process().children(recursive=True)
            return [Target(self.role, name, tuple(c.pid for c in children))]

        return Sampler(
            self.store.run_id,
            point.index,
            targets,
            self.telemetry_interval,
            host_data_dir=self.results,
            host=f"host-{name}",
        )

    def _upload_while_running(self, sampler: Sampler, ended: threading.Event) -> None:
        """Every ``flush_interval`` while the node runs: write the sampler's rows as a chunk
        and upload what the node's processes flushed, so that a machine lost midway leaves
        its records up to then in S3. Rows whose chunk cannot be written are written with
        the rest when the node ends; a failure is a line in the log, never the point's."""
        while not ended.wait(self.flush_interval):
            rows = sampler.take()
            if rows:
                try:
                    write_telemetry(self.run_dir, rows, cut=int(time.time()))
                except RecordsNotWritten as exc:
                    self.log(f"telemetry chunk not kept: {exc}")
                    self._unflushed += rows
            try:
                self.upload_new()
            except Exception as exc:  # the end's upload says what stays on the machine
                self.log(f"upload while running failed: {exc}")

    def keep_telemetry(self, sampler: Sampler) -> None:
        """Write the sampler's rows into the run directory (uploaded with the node's
        records); a failure is a line in the log, never the point's."""
        rows = [*self._unflushed, *sampler.stop()]
        self._unflushed = []
        if sampler.failure:
            self.log(sampler.failure)
        try:
            write_telemetry(self.run_dir, rows)
        except RecordsNotWritten as exc:
            self.log(f"telemetry not kept: {exc}")

    def upload_new(self) -> list[str]:
        """Upload what changed in this machine's run directory; what could not be."""
        assert self.uploader is not None  # set when the run starts
        return self.uploader.upload_new()

    @property
    def elapsed(self) -> float:
        """Seconds since this agent started the run."""
        return time.monotonic() - self._began

    def budget(self, point: SweepPoint) -> float:
        """How long a point may take, at most: its duration and idle timeout and the slack."""
        return point.load.duration + point.load.idle_timeout + self.point_slack

    def _done(self, point: int, ok: bool, error: str, failed_uploads: list[str]) -> bool:
        """Post this node's done marker of ``point``; whether it could be posted."""
        value = {
            "ok": ok and not failed_uploads,
            "error": error,
            "failed_uploads": failed_uploads,
            "at": now(),
        }
        if failed_uploads:
            value["error"] = (error + "; " if error else "") + (
                f"{len(failed_uploads)} file(s) not uploaded, kept on {self.role}-{self.node} "
                f"under {self.run_dir}"
            )
        try:
            self.store.put_json(LAYOUT.done(point, self.role, self.node), value)
        except Exception as exc:
            self.log(f"could not post the done marker of point {point}: {exc}")
            return False
        self._posted.add(point)
        return True

    def _fail(self, points: list[int], error: str) -> None:
        """Post ``error`` as the done marker of each of ``points``, up to the first that
        cannot be posted (the next ones could not either)."""
        for point in points:
            if not self._done(point, False, error, []):
                return

    def _await_ready(self, point: int, deadline: float) -> dict[str, Any] | None:
        while True:
            ready = self.store.get_json(LAYOUT.ready(point))
            if ready is not None or time.monotonic() >= deadline:
                return ready
            time.sleep(self.poll)
