"""brokerbench itself as one of the compared tools: a scenario with ``deployment =
"endpoints"`` on the broker already running, run by the ``brokerbench`` command.

Each run is recorded with ``--no-analysis`` (its CPU is measured); once the broker is
stopped, all runs of a system are analysed by one ``brokerbench report`` (not measured)
and the figures come from each run's ``analysis/summary.csv``.
"""

from __future__ import annotations

import csv
import json
import math
import subprocess
import sys
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from workload.model.sections import default_warmup

from .base import CpuUsage, LoadSettings, Measurement, PeerContext, ToolFailed
from .process import Finished, last_line, run_tool

#: How long receivers wait for more once senders are done.
IDLE_TIMEOUT = 5.0
#: Spark start-up and analysis of one small run.
REPORT_TIMEOUT = 600.0


def brokerbench_bin() -> str:
    return str(Path(sys.executable).with_name("brokerbench"))


def warmup_for(duration: float) -> float:
    """brokerbench's own default (a fifth of a short run, at most 10 s): its figures are
    what a user's run reports. A client that must first join a group (Kafka) receives
    nothing for its first seconds; a shorter warm-up would count the backlog of the join
    in the end-to-end latency, which the peers' consumers leave out."""
    return round(default_warmup(duration), 3)


def _toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    raise TypeError(f"no TOML form for {value!r}")


def _table(name: str, values: dict[str, Any]) -> list[str]:
    return [f"[{name}]", *(f"{key} = {_toml_value(v)}" for key, v in values.items()), ""]


def scenario_toml(
    ctx: PeerContext,
    load: LoadSettings,
    extra_load: dict[str, Any],
    broker_params: dict[str, Any],
) -> str:
    """The scenario of one brokerbench row, on the running broker's endpoints."""
    warmup = warmup_for(load.duration)
    # One window over the measured period, in whole seconds as windows must be.
    window = float(max(1, math.floor(load.duration - warmup)))
    load_section: dict[str, Any] = {
        "threads": load.threads,
        "sender_nodes": 1,
        "message_size": load.message_size,
        "max_send_batch": load.max_send_batch,
        "receive_batch": load.receive_batch,
        "duration": load.duration,
        "idle_timeout": IDLE_TIMEOUT,
    }
    if load.max_in_flight is not None and ctx.system.can_pipeline:
        # (a system whose adapter cannot pipeline sends one batch at a time, as it must)
        load_section["max_in_flight"] = load.max_in_flight
    load_section.update(extra_load)
    lines = [
        f'name = "bench-peers-{ctx.system.name}-t{load.threads}"',
        "",
        "[broker]",
        f"system = {_toml_value(ctx.system.name)}",
        'deployment = "endpoints"',
        f"endpoints = {_toml_value(list(ctx.endpoints.hosts))}",
        "",
        *_table("broker.options", dict(ctx.endpoints.extra)),
        *_table("broker.params", broker_params),
        *_table("load", load_section),
        *_table("measurement", {"warmup": warmup, "window": window, "step": window}),
    ]
    return "\n".join(lines)


@dataclass(frozen=True)
class RecordedRun:
    """A brokerbench run recorded (not analysed yet) and the CPU it used."""

    run_dir: Path | None
    finished: Finished
    cpu: CpuUsage


def record(
    ctx: PeerContext,
    load: LoadSettings,
    extra_load: dict[str, Any],
    broker_params: dict[str, Any],
    results: Path,
) -> RecordedRun:
    """Run one scenario with ``--no-analysis`` into ``results`` (its CPU is measured)."""
    workdir = ctx.workdir / f"brokerbench-t{load.threads}"
    workdir.mkdir(parents=True, exist_ok=True)
    scenario = workdir / "scenario.toml"
    scenario.write_text(scenario_toml(ctx, load, extra_load, broker_params))
    before = set(results.glob("*/context.json"))
    cmd = [brokerbench_bin(), "run", str(scenario), "--results", str(results), "--no-analysis"]
    timeout = load.duration * 3 + IDLE_TIMEOUT + 120
    (finished,), cpu = run_tool(workdir, ctx.broker_pids, [("brokerbench run", cmd)], timeout)
    new = sorted(set(results.glob("*/context.json")) - before)
    return RecordedRun(new[-1].parent if new else None, finished, cpu)


def analyse(results: Path) -> str | None:
    """``brokerbench report`` over every run in ``results`` (one Spark start); an error line."""
    if not any(results.glob("*/context.json")):
        return None
    done = subprocess.run(
        [brokerbench_bin(), "report", str(results)],
        capture_output=True,
        text=True,
        timeout=REPORT_TIMEOUT,
        check=False,
    )
    if done.returncode != 0:
        return f"brokerbench report failed: {last_line(done.stderr + done.stdout)}"
    return None


def measurement(run: RecordedRun, analysis_error: str | None) -> Measurement:
    """The figures of an analysed run; a run that failed keeps its figures, said in a note."""
    if run.run_dir is None:
        run.finished.check()
        raise ToolFailed(
            f"brokerbench run wrote no run directory: {last_line(run.finished.output)}"
        )
    summary = run.run_dir / "analysis" / "summary.csv"
    if not summary.exists():
        run.finished.check()
        raise ToolFailed(analysis_error or f"{summary} was not written")
    with summary.open() as f:
        rows = list(csv.DictReader(f))
    if not rows:
        raise ToolFailed(f"{summary} has no rows")
    result = summary_measurement(rows[0])
    if run.finished.returncode != 0 or run.finished.timed_out:
        failure = "timed out" if run.finished.timed_out else f"exit code {run.finished.returncode}"
        note = f"brokerbench run {failure}: {last_line(run.finished.output)}"
        result = replace(result, notes=(*result.notes, note))
    return result


@dataclass(frozen=True)
class SendingSeconds:
    """The wall-clock seconds a run's CPU per message is taken over, and the messages its
    senders confirmed and its receivers took in them."""

    start: float
    end: float
    sent: int
    received: int


def sending_period(run_dir: Path) -> SendingSeconds | None:
    """The whole seconds in which the run's senders confirmed messages, less the first and
    the last: the workers start and stop within those two, and the first holds what is left
    of their start-up (imports, the payload pool — 49 % of a core in a run whose senders
    used 14 % while sending), which is no cost per message. A run with fewer than three
    such seconds keeps them all."""
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    seconds = run_dir / "raw" / "seconds"
    if not seconds.is_dir():
        return None
    table = ds.dataset(seconds, format="parquet").to_table(columns=["second", "sent", "received"])
    sending = table.filter(pc.greater(table["sent"], 0))["second"]
    if len(sending) == 0:
        return None
    bounds = pc.min_max(sending)
    first, last = int(bounds["min"].as_py()), int(bounds["max"].as_py())
    if last - first >= 2:
        first, last = first + 1, last - 1
    inside = table.filter(
        pc.and_(pc.greater_equal(table["second"], first), pc.less_equal(table["second"], last))
    )
    return SendingSeconds(
        float(first),
        float(last + 1),
        int(pc.sum(inside["sent"]).as_py() or 0),
        int(pc.sum(inside["received"]).as_py() or 0),
    )


def role_cpu(run_dir: Path, period: tuple[float, float]) -> dict[str, float]:
    """CPU (% of one core) of the run's sender and of its receiver nodes over ``period``,
    from its telemetry: each node's mean over the seconds within the period, summed by
    role."""
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    folder = run_dir / "raw" / "telemetry"
    if not folder.is_dir():
        return {}
    table = ds.dataset(folder, format="parquet").to_table(
        columns=["role", "node", "second", "cpu_pct"]
    )
    start, end = period
    inside = pc.and_(
        pc.greater_equal(table["second"], int(start)), pc.less(table["second"], int(end))
    )
    rows = table.filter(inside).to_pylist()
    by_node: dict[tuple[str, str], list[float]] = {}
    for row in rows:
        if row["role"] in ("sender", "receiver") and row["cpu_pct"] is not None:
            by_node.setdefault((row["role"], row["node"]), []).append(row["cpu_pct"])
    totals: dict[str, float] = {}
    for (role, _), values in by_node.items():
        totals[role] = totals.get(role, 0.0) + sum(values) / len(values)
    return totals


def cpu_while_sending(run: RecordedRun) -> CpuUsage:
    """The run's CPU over its sending seconds (:func:`sending_period`: start-up, stop and
    the receivers' idle wait left out), with the messages sent and received in them, or
    over the whole run when those are not known; split into senders and receivers from
    the run's own telemetry."""
    period = sending_period(run.run_dir) if run.run_dir is not None else None
    if period is None or run.run_dir is None:
        return run.cpu
    usage = run.cpu.within(period.start, period.end, scope="sending seconds")
    usage = replace(usage, sent_in_scope=period.sent, received_in_scope=period.received)
    roles = role_cpu(run.run_dir, (period.start, period.end))
    if not roles:
        return usage
    wall = usage.wall_seconds
    return usage.with_roles(
        roles.get("sender", 0.0) / 100 * wall, roles.get("receiver", 0.0) / 100 * wall
    )


def _number(row: dict[str, str], column: str) -> float | None:
    value = (row.get(column) or "").strip()
    try:
        return float(value) if value else None
    except ValueError:
        return None


def summary_measurement(row: dict[str, str]) -> Measurement:
    """Send/receive rates and whole-run send-call latency p50/p99 of one summary row; its
    end-to-end latency (send to receipt) and problems as notes."""
    notes = []
    for column in ("lost", "errors"):
        count = _number(row, column)
        if count:
            notes.append(f"brokerbench: {column} = {count:g}")
    if (row.get("receivers_kept_up") or "").strip().lower() in ("false", "0"):
        notes.append("brokerbench: receivers did not keep up")
    p50, p99 = (
        _number(row, "processing_latency_run_p50_ms"),
        _number(row, "processing_latency_run_p99_ms"),
    )
    if p50 is not None and p99 is not None:
        notes.append(
            f"brokerbench: end-to-end (processing) latency p50 {p50:,.1f} ms, p99 {p99:,.1f} ms"
        )
    return Measurement(
        send_per_s=_number(row, "send_msgs_per_s"),
        receive_per_s=_number(row, "receive_msgs_per_s"),
        publish_p50_ms=_number(row, "send_latency_run_p50_ms"),
        publish_p99_ms=_number(row, "send_latency_run_p99_ms"),
        notes=tuple(notes),
    )
