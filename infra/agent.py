"""What a client machine runs on AWS (``brokerbench cloud client``), from boot to results in S3.

1. Wait until every broker endpoint of the scenario accepts TCP connections.
2. For every sweep point, in order: sender 0 (the coordinator) waits until every node of
   the previous point is done, prepares the point (``brokerbench prepare``) and posts
   ``control/p<K>.ready``; every other node waits for that marker. Nodes that take part in
   the point run their role (``brokerbench node``), upload what they recorded and post
   ``control/p<K>-<role>-<node>.done`` (ok or the error).
3. Uploads are retried; a file that still cannot be uploaded stays on the machine and the
   done marker and the log say so.

Everything lives under ``s3://<bucket>/runs/<run-id>/`` — the only prefix a client may
write — laid out as a local ``RESULTS_DIR/<run-id>/``.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from workload.scenario import load_scenario
from workload.sweep import SweepPoint, expand

Log = Callable[[str], None]


def now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


class ObjectStore(Protocol):
    """The few S3 operations the agent needs (a boto3 S3 client provides them)."""

    def put_object(self, **kwargs: Any) -> Any: ...
    def get_object(self, **kwargs: Any) -> Any: ...
    def upload_file(self, Filename: str, Bucket: str, Key: str) -> Any: ...
    def list_objects_v2(self, **kwargs: Any) -> Any: ...


@dataclass
class RunStore:
    """One run's prefix in the results bucket."""

    s3: ObjectStore
    bucket: str
    run_id: str

    @property
    def prefix(self) -> str:
        return f"runs/{self.run_id}/"

    def uri(self, key: str) -> str:
        return f"s3://{self.bucket}/{self.prefix}{key}"

    def put_json(self, key: str, value: dict[str, Any]) -> None:
        self.s3.put_object(
            Bucket=self.bucket, Key=self.prefix + key, Body=json.dumps(value).encode()
        )

    def get_json(self, key: str) -> dict[str, Any] | None:
        try:
            body = self.s3.get_object(Bucket=self.bucket, Key=self.prefix + key)["Body"].read()
        except Exception as exc:
            if _is_missing(exc):
                return None
            raise
        value: dict[str, Any] = json.loads(body)
        return value

    def keys(self, under: str) -> set[str]:
        """Keys (relative to the run prefix) starting with ``under``."""
        found: set[str] = set()
        token: str | None = None
        while True:
            extra = {"ContinuationToken": token} if token else {}
            page = self.s3.list_objects_v2(Bucket=self.bucket, Prefix=self.prefix + under, **extra)
            found.update(item["Key"][len(self.prefix) :] for item in page.get("Contents", []))
            token = page.get("NextContinuationToken")
            if not token:
                return found

    def upload(self, path: Path, key: str) -> None:
        self.s3.upload_file(str(path), self.bucket, self.prefix + key)


def _is_missing(exc: Exception) -> bool:
    code = getattr(exc, "response", {}).get("Error", {}).get("Code", "")
    return code in ("NoSuchKey", "404", "NotFound")


def ready_key(point: int) -> str:
    return f"control/p{point}.ready"


def done_key(point: int, role: str, node: int) -> str:
    return f"control/p{point}-{role}-{node}.done"


def participants(point: SweepPoint) -> list[tuple[str, int]]:
    """(role, node) of every client node that takes part in a sweep point."""
    return [("sender", n) for n in range(point.load.sender_nodes)] + [
        ("receiver", n) for n in range(point.receiver_nodes)
    ]


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

    def _run(self, args: list[str]) -> tuple[bool, str]:
        command = [sys.executable, "-m", "workload.cli", *args]
        self.log("$ brokerbench " + " ".join(args))
        done = subprocess.run(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, check=False
        )
        lines = done.stdout.strip().splitlines()
        for line in lines:
            self.log(f"  {line}")
        return done.returncode == 0, (lines[-1] if lines else f"exit code {done.returncode}")

    def prepare(self, point: int) -> tuple[bool, str]:
        return self._run(
            [
                "prepare",
                "--run-id",
                self.run_id,
                "--point",
                str(point),
                "--results",
                str(self.results),
                str(self.scenario),
            ]
        )

    def run_node(self, point: int) -> tuple[bool, str]:
        return self._run(
            [
                "node",
                "--role",
                self.role,
                "--node",
                str(self.node),
                "--run-id",
                self.run_id,
                "--point",
                str(point),
                "--results",
                str(self.results),
                str(self.scenario),
            ]
        )


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
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=3):
            return True
    except OSError:
        return False


@dataclass
class Uploader:
    """Uploads new or changed files of the local run directory, with retries."""

    store: RunStore
    run_dir: Path
    log: Log
    attempts: int = 5
    backoff: float = 2.0
    sleep: Callable[[float], None] = time.sleep
    sent: dict[str, tuple[int, float]] = field(default_factory=dict)

    def upload_new(self) -> list[str]:
        """Upload what changed since the last call; the files that could not be uploaded."""
        failed: list[str] = []
        if not self.run_dir.is_dir():
            return failed
        for path in sorted(p for p in self.run_dir.rglob("*") if p.is_file()):
            if path.name.startswith("."):
                continue
            key = path.relative_to(self.run_dir).as_posix()
            stat = path.stat()
            if self.sent.get(key) == (stat.st_size, stat.st_mtime):
                continue
            if self.upload(path, key):
                self.sent[key] = (stat.st_size, stat.st_mtime)
            else:
                failed.append(key)
        return failed

    def upload(self, path: Path, key: str) -> bool:
        error: Exception | None = None
        for attempt in range(1, self.attempts + 1):
            try:
                self.store.upload(path, key)
                return True
            except Exception as exc:
                error = exc
                if attempt < self.attempts:
                    self.sleep(self.backoff * 2 ** (attempt - 1))
        self.log(
            f"upload of {key} to {self.store.uri(key)} failed after {self.attempts} attempts "
            f"({error}); the local copy stays at {path}"
        )
        return False


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
    uploader: Uploader | None = None

    @property
    def coordinator(self) -> bool:
        return self.role == "sender" and self.node == 0

    def run(self) -> int:
        """Run every sweep point this node takes part in; 0 when all went well."""
        scenario = load_scenario(self.scenario_path)
        points = expand(scenario)
        uploader = self.uploader or Uploader(self.store, self.results / self.store.run_id, self.log)
        self.log(
            f"{self.role} node {self.node} of run {self.store.run_id}: {len(points)} sweep point(s), "
            f"results to {self.store.uri('')}"
        )
        unreachable = wait_for_endpoints(
            list(scenario.broker.endpoints), self.broker_wait, self.log
        )
        if unreachable:
            error = (
                f"brokers not reachable after {self.broker_wait:.0f} s: {', '.join(unreachable)}"
            )
            self.log(error)
            for point in points:
                if (self.role, self.node) in participants(point):
                    self._done(point.index, False, error, [])
            return 1
        if self.coordinator and self.store.keys("control/"):
            self.log(
                f"run {self.store.run_id} already has results in {self.store.uri('control/')}: "
                "give every run its own run id (pulumi config set brokerbench:runId …)"
            )
            return 1
        ok = True
        start = time.monotonic()
        for position, point in enumerate(points):
            budget = point.load.duration + point.load.idle_timeout + self.point_slack
            if self.coordinator:
                if position > 0:
                    self._await_previous(points[position - 1], budget)
                prepared, message = self.commands.prepare(point.index)
                uploader.upload_new()
                self.store.put_json(
                    ready_key(point.index),
                    {"ok": prepared, "error": "" if prepared else message, "at": now()},
                )
            deadline = start + self.broker_wait + budget * (position + 1) * 2
            ready = self._await_ready(point.index, deadline)
            if (self.role, self.node) not in participants(point):
                continue
            if ready is None or not ready.get("ok"):
                reason = (
                    "never prepared" if ready is None else f"not prepared: {ready.get('error')}"
                )
                ok = False
                self._done(point.index, False, f"point {point.index} {reason}", [])
                continue
            self.log(f"point {point.index} ({point.label}): running {self.role} node {self.node}")
            succeeded, message = self.commands.run_node(point.index)
            failed = uploader.upload_new()
            ok = ok and succeeded and not failed
            self._done(point.index, succeeded, "" if succeeded else message, failed)
        self.log(f"{self.role} node {self.node}: {'finished' if ok else 'finished with errors'}")
        return 0 if ok else 1

    def _done(self, point: int, ok: bool, error: str, failed_uploads: list[str]) -> None:
        value = {
            "ok": ok and not failed_uploads,
            "error": error,
            "failed_uploads": failed_uploads,
            "at": now(),
        }
        if failed_uploads:
            value["error"] = (error + "; " if error else "") + (
                f"{len(failed_uploads)} file(s) not uploaded, kept on {self.role}-{self.node} "
                f"under {self.results / self.store.run_id}"
            )
        try:
            self.store.put_json(done_key(point, self.role, self.node), value)
        except Exception as exc:
            self.log(f"could not post the done marker of point {point}: {exc}")

    def _await_ready(self, point: int, deadline: float) -> dict[str, Any] | None:
        while True:
            ready = self.store.get_json(ready_key(point))
            if ready is not None or time.monotonic() >= deadline:
                return ready
            time.sleep(self.poll)

    def _await_previous(self, point: SweepPoint, budget: float) -> None:
        expected = {done_key(point.index, r, n) for r, n in participants(point)}
        deadline = time.monotonic() + budget
        while True:
            missing = expected - self.store.keys(f"control/p{point.index}-")
            if not missing or time.monotonic() >= deadline:
                break
            time.sleep(self.poll)
        if missing:
            self.log(
                f"point {point.index}: no result from {len(missing)} node(s) in time; going on"
            )
