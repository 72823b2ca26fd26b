"""PostgreSQL's own tool: ``pgbench`` running custom scripts that do the queue cycle of
brokerbench's PostgreSQL adapter on a table created by the system's own ``prepare``.

* senders (``threads`` clients): one INSERT of a batch of uniform size in
  [min_send_batch, max_send_batch] per transaction;
* receivers (twice as many clients, like brokerbench's two receiver nodes): claim up to
  ``receive_batch`` due rows with ``FOR UPDATE SKIP LOCKED`` and move their
  ``next_delivery`` forward (one transaction), then delete them (the ack); a receiver that
  found nothing sleeps the adapter's poll interval.

Message counts come from the table itself (the id sequence and the rows left); the send
latency percentiles from pgbench's per-transaction log of the senders.
"""

from __future__ import annotations

import glob
import re
from pathlib import Path

from psycopg import sql

from brokers.base import Endpoints
from brokers.errors import BrokerUnavailable
from brokers.local import find_binary
from brokers.postgresql.adapter import _connect

from .base import CpuUsage, LoadSettings, Measurement, PeerContext, PeerTool, ToolFailed
from .process import run_tool
from .units import percentile

SEARCH = sorted(glob.glob("/usr/lib/postgresql/*/bin"), reverse=True)

_PROCESSED = re.compile(r"number of transactions actually processed: (\d+)")
_TPS = re.compile(r"tps = ([\d.]+) \(without initial connection time\)")


def parse_pgbench(text: str) -> dict[str, float]:
    """Transactions processed, tps, and the seconds they took (processed ÷ tps)."""
    processed, tps = _PROCESSED.search(text), _TPS.search(text)
    if not processed or not tps:
        raise ToolFailed("pgbench printed no result (transactions processed, tps)")
    count, rate = float(processed.group(1)), float(tps.group(1))
    return {"transactions": count, "tps": rate, "seconds": count / rate if rate else 0.0}


def parse_pgbench_log(lines: list[str]) -> list[float]:
    """Latencies (ms) from pgbench ``--log`` lines: ``client txn latency_us script …``."""
    latencies = []
    for line in lines:
        fields = line.split()
        if len(fields) >= 3 and fields[2].isdigit():
            latencies.append(int(fields[2]) / 1000.0)
    return latencies


def send_script(table: str, batches: tuple[int, int], size: int) -> str:
    """One batch per transaction, its size uniform in ``batches`` (smallest, largest):
    ``size`` pseudo-random bytes per message."""
    quoted = _ident(table)
    smallest, largest = batches
    return (
        f"\\set n random({smallest}, {largest})\n"
        f"INSERT INTO {quoted} (content) SELECT decode(lpad('', {2 * size}, "
        "md5(random()::text)), 'hex') FROM generate_series(1, :n);\n"
    )


def receive_script(table: str, batch: int, visibility_timeout: float, poll_ms: int) -> str:
    """Claim (receive) then delete (ack), as two transactions; sleep when nothing was due."""
    t = _ident(table)
    return (
        f"WITH due AS (SELECT id FROM {t} WHERE next_delivery <= now() ORDER BY id LIMIT {batch} "
        f"FOR UPDATE SKIP LOCKED), claimed AS (UPDATE {t} SET next_delivery = now() + "
        f"make_interval(secs => {visibility_timeout}), deliveries = {t}.deliveries + 1 "
        f"FROM due WHERE {t}.id = due.id RETURNING {t}.id) SELECT count(*) AS got, "
        "coalesce(string_agg(id::text, ','), '0') AS ids FROM claimed \\gset\n"
        f"DELETE FROM {t} WHERE id IN (:ids);\n"
        "\\if :got = 0\n"
        f"\\sleep {poll_ms} ms\n"
        "\\endif\n"
    )


def _ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def table_counts(endpoints: Endpoints, table: str) -> tuple[int, int]:
    """Rows ever inserted (the id sequence) and rows still in the table."""
    with _connect(endpoints, autocommit=True) as conn:
        seq = conn.execute("SELECT pg_get_serial_sequence(%s, 'id')", (_ident(table),)).fetchone()
        assert seq is not None and seq[0]
        row = conn.execute(
            sql.SQL("SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM {}").format(
                sql.SQL(seq[0])
            )
        ).fetchone()
        left = conn.execute(sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(table)))
        remaining = left.fetchone()
    assert row is not None and remaining is not None
    return int(row[0]), int(remaining[0])


class PostgresPeer(PeerTool):
    system = "postgresql"
    title = "pgbench"

    def missing(self) -> str | None:
        try:
            find_binary("pgbench", "postgresql-client", SEARCH)
        except BrokerUnavailable as exc:
            return str(exc)
        return None

    def settings(self, load: LoadSettings) -> str:
        return (
            f"pgbench -n -T {load.duration:g}: send.sql -c {load.threads} (INSERT of "
            f"random({load.min_send_batch}, {load.max_send_batch}) rows), receive.sql -c {load.receivers} "
            f"(claim ≤ {load.receive_batch} SKIP LOCKED, then DELETE)"
        )

    def _pgbench(self, ctx: PeerContext, script: Path, clients: int, load: LoadSettings) -> list:
        host, port = ctx.endpoints.first
        return [
            find_binary("pgbench", "postgresql-client", SEARCH),
            "-n",
            "-h",
            host,
            "-p",
            str(port),
            "-U",
            ctx.endpoints.get("user", "postgres"),
            "-c",
            str(clients),
            "-j",
            str(clients),
            "-T",
            str(max(1, round(load.duration))),
            "-f",
            str(script),
        ]

    def run(self, ctx: PeerContext, load: LoadSettings) -> tuple[Measurement, CpuUsage]:
        table = ctx.destination(f"bench_peers_pgbench_t{load.threads}").name
        work = ctx.workdir / f"pgbench-t{load.threads}"
        work.mkdir(parents=True, exist_ok=True)
        send, receive = work / "send.sql", work / "receive.sql"
        batches = (load.min_send_batch, load.max_send_batch)
        send.write_text(send_script(table, batches, load.message_size))
        poll_ms = max(1, round(ctx.params.poll_interval * 1000))
        receive.write_text(
            receive_script(table, load.receive_batch, ctx.params.visibility_timeout, poll_ms)
        )
        log_prefix = work / "send-latency"
        env = {"PGDATABASE": ctx.endpoints.get("dbname", "postgres")}
        if ctx.endpoints.get("password"):
            env["PGPASSWORD"] = ctx.endpoints.get("password")
        finished, cpu = run_tool(
            work,
            ctx.broker_pids,
            [
                ("pgbench receive", self._pgbench(ctx, receive, load.receivers, load)),
                (
                    "pgbench send",
                    [
                        *self._pgbench(ctx, send, load.threads, load),
                        "-l",
                        "--log-prefix",
                        str(log_prefix),
                    ],
                ),
            ],
            timeout=2 * load.duration + 60,
            env=env,
        )
        receiver, sender = finished
        sent = parse_pgbench(sender.check())
        received = parse_pgbench(receiver.check())
        inserted, remaining = table_counts(ctx.endpoints, table)
        latencies: list[float] = []
        for path in work.glob("send-latency.*"):
            latencies += parse_pgbench_log(path.read_text().splitlines())
        latencies.sort()
        return (
            Measurement(
                send_per_s=inserted / sent["seconds"] if sent["seconds"] else None,
                messages=inserted,
                receive_per_s=(inserted - remaining) / received["seconds"]
                if received["seconds"]
                else None,
                publish_p50_ms=percentile(latencies, 50) if latencies else None,
                publish_p99_ms=percentile(latencies, 99) if latencies else None,
                notes=(
                    f"pgbench: {inserted} rows inserted in {sent['transactions']:.0f} send "
                    f"transactions, {inserted - remaining} deleted; rates over pgbench's own "
                    "run time; latency is per send transaction (one batch)",
                ),
            ),
            cpu.with_roles(sender.cpu_seconds, receiver.cpu_seconds),
        )
