"""The PostgreSQL queue adapter (psycopg, blocking).

``send`` inserts a batch in one transaction; the commit returns once the standbys the
server's ``synchronous_standby_names`` requires have the WAL (``remote_write``).
``receive`` locks up to ``max_n`` due rows with ``FOR UPDATE SKIP LOCKED`` and moves their
``next_delivery`` into the future in the same transaction; ``ack`` deletes them.
"""

from __future__ import annotations

import time
from collections.abc import Hashable, Sequence
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import sql

from brokers.base import Adapter, Destination, Endpoints, Received
from brokers.errors import BrokerConnectionError

if TYPE_CHECKING:
    from brokers.postgresql import PostgresParams


def _connect(endpoints: Endpoints, autocommit: bool = False) -> psycopg.Connection[Any]:
    host, port = endpoints.first
    try:
        return psycopg.connect(
            host=host,
            port=port,
            dbname=endpoints.get("dbname", "postgres"),
            user=endpoints.get("user", "postgres"),
            password=endpoints.get("password") or None,
            connect_timeout=10,
            autocommit=autocommit,
        )
    except psycopg.OperationalError as exc:
        reason = str(exc).strip().splitlines()[-1] if str(exc).strip() else "no answer"
        raise BrokerConnectionError(f"cannot reach PostgreSQL at {host}:{port}: {reason}") from None


def _table(destination: Destination) -> sql.Identifier:
    return sql.Identifier(destination.name)


def prepare(endpoints: Endpoints, params: PostgresParams, destination: Destination) -> None:
    with _connect(endpoints, autocommit=True) as conn:
        table = _table(destination)
        conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(table))
        conn.execute(
            sql.SQL(
                "CREATE TABLE {} (id bigserial PRIMARY KEY, content bytea NOT NULL, "
                "next_delivery timestamptz NOT NULL DEFAULT now(), "
                "deliveries integer NOT NULL DEFAULT 0)"
            ).format(table)
        )
        conn.execute(sql.SQL("CREATE INDEX ON {} (next_delivery)").format(table))


def describe(endpoints: Endpoints, params: PostgresParams) -> dict[str, Any]:
    with _connect(endpoints, autocommit=True) as conn:
        setting = {
            name: conn.execute(sql.SQL("SHOW {}").format(sql.Identifier(name))).fetchone()[0]  # type: ignore[index]
            for name in (
                "server_version",
                "synchronous_commit",
                "synchronous_standby_names",
                "fsync",
            )
        }
        standbys = conn.execute(
            "SELECT application_name, state, sync_state FROM pg_stat_replication ORDER BY 1"
        ).fetchall()
    return {
        "version": setting.pop("server_version"),
        "settings": setting,
        "standbys": [{"name": n, "state": s, "sync_state": ss} for n, s, ss in standbys],
    }


class PostgresAdapter(Adapter["PostgresParams"]):
    def __init__(self, endpoints: Endpoints, params: PostgresParams, destination: Destination):
        self.params = params
        self.conn = _connect(endpoints)
        if params.replication == "asynchronous":
            self.conn.execute("SET synchronous_commit = local")
            self.conn.commit()
        table = _table(destination)
        self._insert = sql.SQL("INSERT INTO {} (content) VALUES (%s)").format(table)
        self._claim = sql.SQL(
            "UPDATE {t} SET next_delivery = now() + make_interval(secs => %s), "
            "deliveries = {t}.deliveries + 1 "
            "FROM (SELECT id FROM {t} WHERE next_delivery <= now() "
            "LIMIT %s FOR UPDATE SKIP LOCKED) AS due WHERE {t}.id = due.id "
            "RETURNING {t}.id, {t}.content, {t}.deliveries"
        ).format(t=table)
        self._delete = sql.SQL("DELETE FROM {} WHERE id = ANY(%s)").format(table)

    def send(self, batch: Sequence[bytes]) -> None:
        with self.conn.transaction(), self.conn.cursor() as cur:
            cur.executemany(self._insert, [(body,) for body in batch])

    def receive(self, max_n: int) -> list[Received]:
        with self.conn.transaction():
            rows = self.conn.execute(
                self._claim, (self.params.visibility_timeout, max_n)
            ).fetchall()
        if not rows:
            time.sleep(self.params.poll_interval)
        return [Received(bytes(content), id_, deliveries > 1) for id_, content, deliveries in rows]

    def ack(self, receipts: Sequence[Hashable]) -> None:
        with self.conn.transaction():
            self.conn.execute(self._delete, (list(receipts),))

    def close(self) -> None:
        self.conn.close()


def connect(
    endpoints: Endpoints, params: PostgresParams, destination: Destination
) -> PostgresAdapter:
    return PostgresAdapter(endpoints, params, destination)
