"""Benchmark (not a test): brokerbench against each system's own load tool, on one broker.

For every system it starts ONE local broker with the project's own configuration and runs
on it, back to back at each thread count: brokerbench (a scenario with ``deployment =
"endpoints"`` on that broker) and the system's own tool with equivalent settings
(``peers/``). It prints one table per system: send and receive msgs/s, publish latency
p50/p99, CPU of the client processes and of the broker (% of one core over the tool's run)
and brokerbench's send rate divided by the peer's.

    .venv/bin/python tests/benchmarks/bench_peers.py --systems kafka,redis --duration 20
    .venv/bin/python tests/benchmarks/bench_peers.py --quick        # a few seconds per tool
"""

from __future__ import annotations

import argparse
import functools
import json
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

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
from peers.table import BROKERBENCH, render

from brokers import registry
from brokers.base import LocalCluster
from brokers.errors import BrokerError

QUICK_DURATION = 3.0
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
    args = parser.parse_args(argv)
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


def bench_system(name: str, args: argparse.Namespace) -> str:
    """Start the broker, run both tools at every thread count, stop it; the table."""
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
    return render(title, settings, rows)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    names = selected_systems(args)
    failed = False
    for name in names:
        try:
            table = bench_system(name, args)
        except KeyboardInterrupt:
            _say("interrupted")
            return 130
        except Exception as exc:  # one system's failure must not hide the others' tables
            failed = True
            traceback.print_exc()
            table = f"{registry.get(name).title}: FAILED — {type(exc).__name__}: {exc}"
        print()
        print(table, flush=True)
        print()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
