"""Benchmark (not a test): brokerbench against each system's own load tool, on one broker.

For every system it starts ONE local broker with the project's own configuration and runs
on it, back to back at each thread count: brokerbench (a scenario with ``deployment =
"endpoints"`` on that broker) and the system's own tool with equivalent settings
(``peers/``). It prints one table per system: send and receive msgs/s, publish latency
p50/p99, CPU of the client processes and of the broker (% of one core over the tool's run)
and brokerbench's send rate divided by the peer's.

Every system's rows, its settings, the UTC date and the git commit of the run go to a JSON
results file (``results/bench-peers/<UTC time>.json``, or ``--results-file``); with
``--write-results`` the systems run are also merged into ``docs/peers-results.json`` and
``docs/peers.md``'s table is rendered from it (``peers_doc.py``).

    .venv/bin/python tests/benchmarks/bench_peers.py --systems kafka,redis --duration 20
    .venv/bin/python tests/benchmarks/bench_peers.py --quick        # a few seconds per tool
    .venv/bin/python tests/benchmarks/bench_peers.py --write-results  # and update docs/peers.md
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, TypeVar

import peers_doc
from peers import PEERS
from peers.base import LoadSettings, PeerContext, PeerTool, ToolFailed, ToolRow
from peers.brokerbench_tool import (
    IDLE_TIMEOUT,
    RecordedRun,
    analyse,
    cpu_while_sending,
    measurement,
    record,
    warmup_for,
)
from peers.table import BROKERBENCH, disturbed, ratios, render

from brokers import registry
from brokers.base import LocalCluster
from brokers.errors import BrokerError

QUICK_DURATION = 3.0
#: Where a run's results file goes unless ``--results-file`` names one.
RESULTS_DIR = peers_doc.ROOT / "results" / "bench-peers"
#: Said of every row a run measured (the docs' rows say where theirs came from).
MEASURED = "measured by this run"
T = TypeVar("T")


def _say(message: str) -> None:
    print(message, flush=True)


def _key_values(items: list[str], option: str) -> dict[str, Any]:
    """``KEY=VALUE`` pairs; a VALUE that reads as JSON (numbers, true, lists) is taken so."""
    values: dict[str, Any] = {}
    for item in items:
        key, sep, raw = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"bench_peers: {option} expects KEY=VALUE, got {item!r}")
        try:
            values[key.strip()] = json.loads(raw)
        except json.JSONDecodeError:
            values[key.strip()] = raw
    return values


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="brokerbench against each system's own load tool, on the same local broker.",
    )
    parser.add_argument(
        "--systems",
        help=f"comma-separated systems (default: those that run here of {', '.join(PEERS)})",
    )
    parser.add_argument(
        "--duration", type=float, default=None, help="seconds per tool run (default 20)"
    )
    parser.add_argument(
        "--threads",
        default=None,
        help="comma-separated thread counts (brokerbench workers per node, the peer's "
        "clients; default 1,4)",
    )
    parser.add_argument(
        "--max-in-flight",
        type=int,
        default=None,
        help="brokerbench [load] max_in_flight (and the peers' confirm window/pipeline)",
    )
    parser.add_argument(
        "--load",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="another brokerbench [load] key (repeatable), e.g. --load processes=2",
    )
    parser.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a [broker.params] key for the broker and both tools (repeatable)",
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"smoke run: {QUICK_DURATION:g} s per tool, threads 1 (unless given)",
    )
    parser.add_argument("--keep", action="store_true", help="keep the work directories")
    parser.add_argument(
        "--results-file",
        type=Path,
        default=None,
        help="the JSON results file to write (default: results/bench-peers/<UTC time>.json)",
    )
    parser.add_argument(
        "--write-results",
        action="store_true",
        help="also merge the systems run into docs/peers-results.json (replacing their "
        "entries) and render docs/peers.md's table from it",
    )
    args = parser.parse_args(argv)
    if args.write_results and args.quick:
        parser.error("--write-results takes a full run, not --quick")
    if args.duration is None:
        args.duration = QUICK_DURATION if args.quick else 20.0
    if args.threads is None:
        args.threads = "1" if args.quick else "1,4"
    try:
        args.threads = [int(t) for t in args.threads.split(",") if t.strip()]
    except ValueError:
        parser.error(f"--threads: not a list of numbers: {args.threads}")
    if not args.threads or min(args.threads) < 1 or args.duration <= 0:
        parser.error("--threads needs positive numbers and --duration a positive value")
    args.load = _key_values(args.load, "--load")
    args.param = _key_values(args.param, "--param")
    return args


def selected_systems(args: argparse.Namespace) -> list[str]:
    if args.systems:
        names = [n.strip() for n in args.systems.split(",") if n.strip()]
        unknown = [n for n in names if n not in PEERS]
        if unknown:
            raise SystemExit(
                f"bench_peers: no peer tool for {', '.join(unknown)}; known: {', '.join(PEERS)}"
            )
        return names
    runnable = []
    for name in PEERS:
        system = registry.get(name)
        reason = system.local.missing() if system.local else "cannot run locally"
        if reason:
            _say(f"{system.title}: skipped — {reason}")
        else:
            runnable.append(name)
    return runnable


def broker_pids(cluster: LocalCluster) -> list[int]:
    """Pids of the cluster's server processes (their children are found from /proc)."""
    nodes = getattr(cluster, "nodes", [])
    return [n.proc.pid for n in nodes if getattr(n, "proc", None) is not None]


def load_settings(args: argparse.Namespace, threads: int, receive_batch: int) -> LoadSettings:
    """The load of one row: ``--load`` batch and message sizes where given (the peer tool
    gets the same), else brokerbench's defaults (the system's own receive batch)."""
    return LoadSettings(
        threads,
        args.duration,
        message_size=int(args.load.get("message_size", 100)),
        max_send_batch=int(args.load.get("max_send_batch", 10)),
        min_send_batch=int(args.load.get("min_send_batch", 1)),
        receive_batch=int(args.load.get("receive_batch", receive_batch)),
        max_in_flight=args.max_in_flight,
    )


def _guarded(run: Callable[[], T]) -> T | str:
    """Run one tool; a failure becomes a one-line error, never a number."""
    try:
        return run()
    except ToolFailed as exc:
        return str(exc)
    except (BrokerError, OSError, ValueError, subprocess.SubprocessError) as exc:
        return f"{type(exc).__name__}: {exc}"


def _peer_row(
    peer: PeerTool,
    threads: int | None,
    ctx: PeerContext,
    load: LoadSettings,
    reference: bool = False,
) -> ToolRow:
    outcome = _guarded(lambda: peer.run(ctx, load))
    if isinstance(outcome, str):
        return ToolRow(peer.title, threads, error=outcome, reference=reference)
    return ToolRow(peer.title, threads, *outcome, reference=reference)


def _brokerbench_row(
    threads: int, recorded: RecordedRun | str, analysis_error: str | None
) -> ToolRow:
    if isinstance(recorded, str):
        return ToolRow(BROKERBENCH, threads, error=recorded)
    outcome = _guarded(lambda: measurement(recorded, analysis_error))
    if isinstance(outcome, str):
        return ToolRow(BROKERBENCH, threads, error=outcome)
    return ToolRow(BROKERBENCH, threads, outcome, cpu_while_sending(recorded))


@dataclass(frozen=True)
class SystemRun:
    """One system's table: what ``bench_system`` measured, and when."""

    system: str
    #: The system as the docs' table names it (its title and broker parameters).
    label: str
    title: str
    settings: list[str]
    rows: list[ToolRow]
    #: The UTC date the system's run began (YYYY-MM-DD).
    date: str

    def table(self) -> str:
        return render(self.title, self.settings, self.rows)


def bench_system(name: str, args: argparse.Namespace) -> SystemRun | str:
    """Start the broker, run both tools at every thread count, stop it; the rows (or why
    the system was skipped)."""
    date = datetime.now(UTC).date().isoformat()
    system = registry.get(name)
    peer: PeerTool = PEERS[name]
    if system.local is None:
        return f"{system.title}: skipped — it cannot run on this machine"
    reason = system.local.missing()
    if reason:
        return f"{system.title}: skipped — {reason}"
    try:
        peer.install(_say)
    except (BrokerError, OSError) as exc:
        _say(f"{peer.title}: could not be fetched: {exc}")
    peer_missing = peer.missing()
    broker_params = {**peer.broker_params, **args.param}
    params = system.params_model.model_validate(broker_params)
    workdir = Path(tempfile.mkdtemp(prefix=f"bench-peers-{name}-"))
    results = workdir / "brokerbench-results"
    results.mkdir()
    # Rows in order; a brokerbench row is completed once its run is analysed.
    pending: list[tuple[int, RecordedRun | str] | ToolRow] = []
    try:
        _say(f"starting {system.title} (single) …")
        started = time.monotonic()
        cluster = system.local.start("single", params, workdir / "broker")
        _say(f"  ready in {time.monotonic() - started:.0f} s")
        try:
            ctx = PeerContext(
                system, params, cluster.endpoints, workdir, lambda: broker_pids(cluster)
            )
            if not peer_missing:
                # The peer on its own first, on the idle broker: what it does undisturbed.
                load = load_settings(args, args.threads[0], system.receive_batch)
                _say(f"  {peer.title} on its own (the reference) …")
                peer_threads = args.threads[0] if peer.scales_with_threads else None
                pending.append(_peer_row(peer, peer_threads, ctx, load, reference=True))
            for index, threads in enumerate(args.threads):
                load = load_settings(args, threads, system.receive_batch)
                _say(f"  brokerbench, threads {threads} …")
                recorded = _guarded(
                    functools.partial(record, ctx, load, args.load, broker_params, results)
                )
                pending.append((threads, recorded))
                if index and not peer.scales_with_threads:
                    continue
                peer_threads = threads if peer.scales_with_threads else None
                if peer_missing:
                    pending.append(ToolRow(peer.title, peer_threads, error=peer_missing))
                    continue
                _say(f"  {peer.title}, threads {threads} …")
                pending.append(_peer_row(peer, peer_threads, ctx, load))
        finally:
            cluster.stop()
        _say("  analysing the brokerbench runs (brokerbench report) …")
        analysis_error = analyse(results)
        rows = [
            item
            if isinstance(item, ToolRow)
            else _brokerbench_row(item[0], item[1], analysis_error)
            for item in pending
        ]
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    example = load_settings(args, args.threads[0], system.receive_batch)
    shown = ", ".join(f"{k}={v}" for k, v in broker_params.items()) or "system defaults"
    extra = "".join(
        f", {k} = {v}"
        for k, v in args.load.items()
        if k not in ("max_send_batch", "min_send_batch", "receive_batch", "message_size")
    )
    in_flight = f", max_in_flight = {args.max_in_flight}" if args.max_in_flight else ""
    settings = [
        f"brokerbench: threads per node, 1 sender node, 2 receiver nodes, "
        f"{example.message_size}-byte messages, {example.batches}, "
        f"receive batch {example.receive_batch}{in_flight}{extra}, "
        f"warm-up {warmup_for(args.duration):g}"
        f" s, idle_timeout {IDLE_TIMEOUT:g} s",
        f"{peer.title} (threads {example.threads}): {peer.settings(example)}",
        "CPU: % of one core over 'CPU s' seconds, the tool's sending period where it is "
        "known (brokerbench: the whole seconds in which its senders confirmed messages but "
        "the first and last, within which its workers start and stop, from its per-second "
        "records, which also count the messages µs/msg divides by; pulsar-perf: from its "
        "log), else its whole run (start-up included); client = the tool's processes and their "
        "children, broker = the server processes and their children, other = the rest of "
        "the machine; µs/msg = CPU µs of the sending / receiving / all client processes "
        "per message (brokerbench's split by node role from its telemetry); the CPU ratio "
        "compares all client CPU where the peer receives too, else the sending side's",
    ]
    title = (
        f"{system.title} — single node, broker params: {shown}; {args.duration:g} s per tool run"
    )
    label = f"{system.title}, {shown}" if broker_params else system.title
    return SystemRun(name, label, title, settings, rows, date)


def _figure(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


def result_row(row: ToolRow, rows: Sequence[ToolRow]) -> dict[str, Any]:
    """One row of the results file: what the table prints of ``row``, as numbers."""
    m, cpu = row.measurement, row.cpu
    send_ratio, cpu_ratio = ratios(row, rows)
    return {
        "tool": row.tool,
        "threads": row.threads,
        "reference": row.reference,
        "send_msgs_per_s": _figure(m.send_per_s) if m else None,
        "receive_msgs_per_s": _figure(m.receive_per_s) if m else None,
        "publish_p50_ms": _figure(m.publish_p50_ms) if m else None,
        "publish_p99_ms": _figure(m.publish_p99_ms) if m else None,
        "client_cpu_pct": _figure(cpu.client_pct) if cpu else None,
        "broker_cpu_pct": _figure(cpu.broker_pct) if cpu else None,
        "other_cpu_pct": _figure(cpu.other_pct) if cpu else None,
        "cpu_seconds": _figure(cpu.wall_seconds) if cpu else None,
        "cpu_over": cpu.scope if cpu else None,
        "send_us_per_msg": _figure(row.send_us),
        "receive_us_per_msg": _figure(row.receive_us),
        "client_us_per_msg": _figure(row.client_us),
        "receives": m is not None and m.receive_per_s is not None,
        "send_ratio": send_ratio or None,
        "cpu_ratio": cpu_ratio or None,
        "peer_disturbed": disturbed(row, rows),
        "notes": list(m.notes) if m else [],
        "error": row.error,
        "source": MEASURED,
    }


def system_entry(
    run: SystemRun, commit: str | None, dirty: bool | None, command: str
) -> dict[str, Any]:
    """One system's entry of the results file."""
    notes: list[str] = []
    for row in run.rows:
        for note in (*(row.measurement.notes if row.measurement else ()), row.error):
            if note and note not in notes:
                notes.append(note)
    return {
        "system": run.system,
        "label": run.label,
        "date": run.date,
        "commit": commit,
        "dirty": dirty,
        "machine": f"a machine of {os.cpu_count()} cores",
        "title": run.title,
        "command": command,
        "settings": run.settings,
        "rows": [result_row(row, run.rows) for row in run.rows],
        "notes": notes,
    }


def write_results(runs: Sequence[SystemRun], args: argparse.Namespace, argv: Sequence[str]) -> None:
    """The run's results file, and with ``--write-results`` the docs' file and page."""
    commit, dirty = peers_doc.git_state()
    command = " ".join(["tests/benchmarks/bench_peers.py", *argv])
    entries = [system_entry(run, commit, dirty, command) for run in runs]
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    path = args.results_file or RESULTS_DIR / f"{stamp}.json"
    empty = {"format": peers_doc.FORMAT, "notes": [], "systems": []}
    peers_doc.write(peers_doc.merge(empty, entries), path)
    _say(f"results: {path}")
    if not args.write_results:
        return
    # A system without figures of both tools keeps the entry the docs have.
    complete = [e for e in entries if None not in peers_doc.shown_rows(e)]
    for entry in entries:
        if entry not in complete:
            _say(f"{entry['label']}: not written to the docs (no figures of both tools)")
    if complete:
        merged = peers_doc.merge(peers_doc.load(peers_doc.RESULTS), complete)
        peers_doc.write(merged, peers_doc.RESULTS)
        page = peers_doc.PAGE
        text = peers_doc.update_page(page.read_text(encoding="utf-8"), merged)
        page.write_text(text, encoding="utf-8")
        _say(f"updated {peers_doc.RESULTS} and the table of {page}")


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    names = selected_systems(args)
    failed = False
    runs: list[SystemRun] = []
    for name in names:
        try:
            outcome = bench_system(name, args)
        except KeyboardInterrupt:
            _say("interrupted")
            return 130
        except Exception as exc:  # one system's failure must not hide the others' tables
            failed = True
            traceback.print_exc()
            outcome = f"{registry.get(name).title}: FAILED — {type(exc).__name__}: {exc}"
        if isinstance(outcome, SystemRun):
            runs.append(outcome)
        print()
        print(outcome.table() if isinstance(outcome, SystemRun) else outcome, flush=True)
        print()
    if runs:
        write_results(runs, args, argv)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
