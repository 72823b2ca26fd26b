"""The PostgreSQL queue adapter (psycopg, blocking).

Each operation is one prepared statement, hence one transaction and one round trip.
``send`` inserts the whole batch (``unnest`` of a bytea array); it returns once committed,
i.e. once the standbys the server's ``synchronous_standby_names`` requires have the WAL
(``remote_write``). ``receive`` locks up to ``max_n`` due rows with ``FOR UPDATE SKIP
LOCKED`` and moves their ``next_delivery`` into the future in the same statement; ``ack``
deletes them (``id = ANY(array)``).

The table is laid out so that the queue holds its rate (:data:`TABLE_OPTIONS`):

* the due rows are found in the order of the primary key (``ORDER BY id``), the oldest
  first; ``next_delivery`` has no index, so moving it is a HOT update (room is left on each
  page for it) that writes no index entry, and the scan for the next due row starts at the
  oldest row and passes only the rows received and not yet acknowledged (an index on
  ``next_delivery`` collected an entry per claim, dead ones at its head; the planner then
  read the whole heap for the first due row);
* the table's own autovacuum settings vacuum it after every few thousand dead rows, not
  after a fifth of the table, so the rows that acknowledgements delete are gone within
  seconds, inside a point (the server wakes autovacuum every second, ``postgresql.conf``).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import psycopg
from psycopg import sql

from brokers import credentials
from brokers.base import Adapter, Destination, Endpoints, Received
from brokers.errors import BrokerConnectionError

if TYPE_CHECKING:
    from brokers.postgresql.params import PostgresParams


def _connect(
    endpoints: Endpoints, autocommit: bool = False, connect_timeout: int = 10
) -> psycopg.Connection[Any]:
    """A connection to the first host (the primary) with the endpoints' user and password."""
    host, port = endpoints.first
    try:
        return psycopg.connect(
            host=host,
            port=port,
            dbname=endpoints.get("dbname", "postgres"),
            user=endpoints.get("user", "postgres"),
            password=endpoints.get("password") or None,
            connect_timeout=connect_timeout,
            autocommit=autocommit,
        )
    except psycopg.OperationalError as exc:
        reason = str(exc).strip().splitlines()[-1] if str(exc).strip() else "no answer"
        raise BrokerConnectionError(f"cannot reach PostgreSQL at {host}:{port}: {reason}") from None


def _table(destination: Destination) -> sql.Identifier:
    return sql.Identifier(destination.name)


#: Storage parameters of a queue table: room on every page for the claims' HOT updates, and
#: a vacuum after every 2,000 dead rows, without cost-based pauses.
TABLE_OPTIONS = (
    "fillfactor = 50, autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 2000, "
    "autovacuum_vacuum_insert_scale_factor = 0, autovacuum_vacuum_insert_threshold = 20000, "
    "autovacuum_analyze_scale_factor = 0, autovacuum_analyze_threshold = 20000, "
    "autovacuum_vacuum_cost_delay = 0"
)


def prepare(endpoints: Endpoints, params: PostgresParams, destination: Destination) -> None:
    with _connect(endpoints, autocommit=True) as conn:
        table = _table(destination)
        conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(table))
        conn.execute(
            sql.SQL(
                "CREATE TABLE {} (id bigserial PRIMARY KEY, content bytea NOT NULL, "
                "next_delivery timestamptz NOT NULL DEFAULT now(), "
                "deliveries integer NOT NULL DEFAULT 0) WITH ({})"
            ).format(table, sql.SQL(TABLE_OPTIONS))
        )


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
        "auth": credentials.auth(endpoints.get("password")),
    }


def statements(destination: Destination) -> tuple[bytes, bytes, bytes]:
    """The queue's three statements on ``destination``'s table — insert a batch, claim up to
    n due rows (SKIP LOCKED, in key order, hidden for the visibility timeout), delete acked
    rows — rendered once: psycopg would compose a sql.Composed again at every execute (a
    tenth of a receiver's CPU in py-spy), where a query of bytes is found in its cache."""
    table = _table(destination)
    insert = sql.SQL("INSERT INTO {} (content) SELECT unnest(%b::bytea[])").format(table)
    claim = sql.SQL(
        "UPDATE {t} SET next_delivery = now() + make_interval(secs => %b), "
        "deliveries = {t}.deliveries + 1 "
        "FROM (SELECT id FROM {t} WHERE next_delivery <= now() ORDER BY id "
        "LIMIT %b FOR UPDATE SKIP LOCKED) AS due WHERE {t}.id = due.id "
        "RETURNING {t}.id, {t}.content, {t}.deliveries"
    ).format(t=table)
    delete = sql.SQL("DELETE FROM {} WHERE id = ANY(%b::bigint[])").format(table)
    insert_b, claim_b, delete_b = (s.as_bytes(None) for s in (insert, claim, delete))
    return insert_b, claim_b, delete_b


class PostgresAdapter(Adapter[int]):
    """One worker's connection (autocommit: every statement is its own transaction); a
    received message's receipt is its row's id.

    A lost connection (a server stopped, killed or restarted) fails the operation under way
    with a :class:`BrokerConnectionError`; the next operation connects again. A send whose
    connection was lost is not confirmed, even if the server had committed it: such
    messages are counted as received without a confirmation, never as lost.
    """

    def __init__(self, endpoints: Endpoints, params: PostgresParams, destination: Destination):
        self.endpoints = endpoints
        self.params = params
        self.conn: psycopg.Connection[Any] | None = None
        self.cursor: psycopg.Cursor[Any] | None = None
        self._insert, self._claim, self._delete = statements(destination)
        self._open()

    def _open(self) -> psycopg.Cursor[Any]:
        self.conn = _connect(self.endpoints, autocommit=True)
        if self.params.asynchronous_commit:
            self.conn.execute("SET synchronous_commit = off")
        elif self.params.replication == "asynchronous":
            self.conn.execute("SET synchronous_commit = local")
        # Binary parameters and results: bytea and integer arrays travel unescaped.
        self.cursor = self.conn.cursor(binary=True)
        return self.cursor

    def _execute(self, statement: bytes, values: tuple[Any, ...]) -> psycopg.Cursor[Any]:
        cursor = self.cursor if self.cursor is not None else self._open()
        try:
            return cursor.execute(statement, values, prepare=True)
        except psycopg.OperationalError as exc:
            if self.conn is not None and not self.conn.closed:
                raise  # the server refused the statement: the connection is fine
            self.conn = self.cursor = None
            host, port = self.endpoints.first
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else "closed"
            raise BrokerConnectionError(
                f"PostgreSQL {host}:{port}: connection lost ({reason}); connecting again"
            ) from None

    def send(self, batch: Sequence[bytes]) -> None:
        # One statement, so one transaction: it returns once committed with the
        # session's synchronous_commit (the standbys' acknowledgement included).
        self._execute(self._insert, (list(batch),))

    def receive(self, max_n: int) -> list[Received[int]]:
        rows = self._execute(self._claim, (self.params.visibility_timeout, max_n)).fetchall()
        if not rows:
            time.sleep(self.params.poll_interval)
        return [Received(content, id_, deliveries > 1) for id_, content, deliveries in rows]

    def ack(self, receipts: Sequence[int]) -> None:
        self._execute(self._delete, (list(receipts),))

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()


def connect(
    endpoints: Endpoints, params: PostgresParams, destination: Destination
) -> PostgresAdapter:
    return PostgresAdapter(endpoints, params, destination)
