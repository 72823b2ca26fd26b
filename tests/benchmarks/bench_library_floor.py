"""Benchmark (not a test): each system's client library alone against brokerbench's adapter.

The peer table (docs/peers.md) compares brokerbench's client CPU per message with each
system's own load tool, which is written in Java, Go or C. This script measures the floor
under brokerbench in Python: what the client library itself costs per message, sending and
receiving, with nothing of brokerbench around it — and, on the same broker in the same
process, brokerbench's adapter through the worker loops a node runs.

Per system it starts the local broker (single node), prepares the destination as a sweep
point does and runs, in this process's main thread (NATS: one asyncio loop), four legs of
``--messages`` messages of 100 bytes in batches of ``--batch``:

1. library floor, send: the fewest library calls that send a batch and learn that each of
   its messages is confirmed, several batches in flight where the library allows;
2. brokerbench, send: the adapter through ``run_sender`` (``run_sender_async``), as a
   sender node runs it (batch choice, stamping, accounting);
3. library floor, receive: receive, read and acknowledge with the fewest library calls;
4. brokerbench, receive: the adapter through ``run_receiver`` (``run_receiver_async``).

Each leg's figure is the process's CPU time (user + system, every thread, ``getrusage``)
per message, and its wall-clock rate; legs alternate (floor, brokerbench) ``--repeats``
times, so that the spread shows. The peer tool's all-client CPU per message is read from
docs/peers-results.json.

    .venv/bin/python tests/benchmarks/bench_library_floor.py --systems pulsar,nats
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import peers_doc

from brokers import registry
from brokers.base import BrokerSystem, LocalCluster
from brokers.connection import Destination, Endpoints
from workload.engine import message
from workload.engine.client_loops import (
    run_receiver,
    run_receiver_async,
    run_sender,
    run_sender_async,
)
from workload.engine.recording import WorkerRecorder
from workload.engine.worker import ReceiverLoop, SenderLoop, WorkerSettings
from workload.model.sections import LoadSection

SYSTEMS = ("pulsar", "nats", "postgresql", "rabbitmq")
#: Messages per leg where ``--messages`` is not given: a leg takes ~2–20 s on one shared core.
DEFAULT_MESSAGES = {"pulsar": 150_000, "nats": 300_000, "postgresql": 60_000, "rabbitmq": 150_000}
#: Batches in flight (the peer table's 8; PostgreSQL's adapter confirms one at a time).
IN_FLIGHT = {"pulsar": 8, "nats": 8, "postgresql": 1, "rabbitmq": 8}
RECEIVE_BATCH = 10
#: Messages a NATS pull request asks for: as many as the adapter's (4 receive batches).
PULL_BATCH = 40
MESSAGE_SIZE = 100
TAG = "floor000.0"
#: A receive leg that gets nothing for this long ends short (its count says so).
IDLE_END = 3.0
#: A floor that waits this long for a batch's confirmation fails (NATS: for its whole leg).
CONFIRM_WAIT = 60.0
LEG_LIMIT = 600.0


@dataclass(frozen=True)
class Leg:
    """One leg's messages, wall-clock seconds and process CPU seconds (user, system)."""

    messages: int
    wall: float
    user: float
    system: float

    @property
    def cpu_us(self) -> float:
        return (self.user + self.system) / max(1, self.messages) * 1e6

    @property
    def rate(self) -> float:
        return self.messages / self.wall if self.wall else 0.0


class Meter:
    """Wall-clock and process CPU time between :meth:`start` and :meth:`stop`: the user and
    system time of every thread of the process, from ``getrusage`` (what ``os.times`` reads,
    to the microsecond rather than the clock tick)."""

    def __init__(self) -> None:
        self.wall = 0.0
        self.usage = resource.getrusage(resource.RUSAGE_SELF)
        self.leg: Leg | None = None

    def start(self) -> None:
        self.wall, self.usage = time.perf_counter(), resource.getrusage(resource.RUSAGE_SELF)

    def stop(self, messages: int) -> Leg:
        after, wall = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter() - self.wall
        self.leg = Leg(
            messages,
            wall,
            after.ru_utime - self.usage.ru_utime,
            after.ru_stime - self.usage.ru_stime,
        )
        return self.leg


def bodies(count: int = 1000) -> list[bytes]:
    """Stamped 100-byte messages, as a sender stamps them: the floor sends these in turn,
    so that every receive leg reads messages of one shape."""
    load = LoadSection.model_validate({"message_size": MESSAGE_SIZE, "pool_size": count})
    pool = message.payload_pool(load, seed=1)
    now = time.time_ns()
    stamper = message.Stamper(TAG, 0, 1)
    return list(stamper.stamp_batch(message.take(pool, 0, count), 0, now, now))


def batches(pool: list[bytes], messages: int, size: int) -> Iterator[list[bytes]]:
    """``messages`` bodies from ``pool``, in batches of ``size`` (the last may be smaller)."""
    sent = 0
    while sent < messages:
        n = min(size, messages - sent)
        start = sent % len(pool)
        batch = pool[start : start + n]
        if len(batch) < n:
            batch += pool[: n - len(batch)]
        yield batch
        sent += n


# -- brokerbench: the adapter through the worker loops -------------------------------------


class CountingReceiverLoop(ReceiverLoop):
    """A receiver's loop that ends once it received ``limit`` of this run's messages."""

    def __init__(self, settings: WorkerSettings, recorder: WorkerRecorder, limit: int) -> None:
        super().__init__(settings, recorder)
        self.limit = limit

    def finished(self) -> bool:
        return self.recorder.total_received >= self.limit or super().finished()


def worker_settings(messages: int, batch: int, in_flight: int) -> WorkerSettings:
    load = LoadSection.model_validate(
        {
            "message_size": MESSAGE_SIZE,
            "min_send_batch": batch,
            "max_send_batch": batch,
            "max_in_flight": in_flight,
            "duration": 3600,
            "messages": messages,
            "receive_batch": RECEIVE_BATCH,
            "idle_timeout": IDLE_END,
        }
    )
    pool = message.payload_pool(load, seed=0)  # as a sender node builds it
    return WorkerSettings(TAG, 0, 0, load, pool, lambda: False, receive_batch=RECEIVE_BATCH)


def ours_send(
    system: BrokerSystem[Any], cluster: LocalCluster, params: Any, destination: Destination,
    messages: int, batch: int, in_flight: int,
) -> Leg:  # fmt: skip
    loop = SenderLoop(worker_settings(messages, batch, in_flight), WorkerRecorder("sender", 0, 0))
    meter = Meter()
    if system.asyncio:

        async def run() -> None:
            adapter = await system.connect_async(cluster.endpoints, params, destination)
            meter.start()
            await run_sender_async(adapter, loop)
            meter.stop(loop.recorder.total_sent)
            await adapter.close()

        asyncio.run(run())
    else:
        adapter = system.connect_blocking(cluster.endpoints, params, destination)
        meter.start()
        run_sender(adapter, loop)
        meter.stop(loop.recorder.total_sent)
        adapter.close()
    assert meter.leg is not None
    return meter.leg


def ours_receive(
    system: BrokerSystem[Any], cluster: LocalCluster, params: Any, destination: Destination,
    messages: int,
) -> Leg:  # fmt: skip
    settings = worker_settings(messages, 1, 1)
    loop = CountingReceiverLoop(settings, WorkerRecorder("receiver", 0, 0), messages)
    meter = Meter()
    if system.asyncio:

        async def run() -> None:
            adapter = await system.connect_async(cluster.endpoints, params, destination)
            meter.start()
            await run_receiver_async(adapter, loop)
            meter.stop(loop.recorder.total_received)
            await adapter.close()

        asyncio.run(run())
    else:
        adapter = system.connect_blocking(cluster.endpoints, params, destination)
        meter.start()
        run_receiver(adapter, loop)
        meter.stop(loop.recorder.total_received)
        adapter.close()
    assert meter.leg is not None
    return meter.leg


# -- the library floors ------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """What a floor leg sends to or receives from: the started broker and the destination."""

    endpoints: Endpoints
    params: Any
    destination: Destination
    pool: list[bytes]


class Floor:
    """A system's library floor: :meth:`send` and :meth:`receive` run one leg each."""

    #: What the floor's send and receive legs call, for the printout.
    how = ""

    def send(self, target: Target, messages: int, batch: int, in_flight: int) -> Leg:
        raise NotImplementedError

    def receive(self, target: Target, messages: int) -> Leg:
        raise NotImplementedError


def confirmed_in_time(done: threading.Event) -> None:
    if not done.wait(CONFIRM_WAIT):
        raise RuntimeError(f"a batch not confirmed within {CONFIRM_WAIT:.0f} s")


class PulsarFloor(Floor):
    how = (
        "send_async per message, a callback on each batch's last, 8 batches in flight; "
        "receive(), data(), acknowledge() per message"
    )

    def _client(self, target: Target) -> Any:
        import pulsar

        return pulsar.Client(
            "pulsar://" + ",".join(target.endpoints.hosts),
            logger=pulsar.ConsoleLogger(pulsar.LoggerLevel.Warn),
        )

    def send(self, target: Target, messages: int, batch: int, in_flight: int) -> Leg:
        import pulsar

        from brokers.pulsar.admin import topic_url

        params = target.params
        client = self._client(target)
        producer = client.create_producer(
            topic_url(params, target.destination),
            send_timeout_millis=int(params.send_timeout * 1000),
            block_if_queue_full=True,
            batching_enabled=params.batching,
            batching_max_publish_delay_ms=params.batching_max_publish_delay_ms,
            batching_max_messages=params.batching_max_messages,
            max_pending_messages=params.max_pending_messages,
        )
        ok = pulsar.Result.Ok
        failures: list[Any] = []
        pending: deque[threading.Event] = deque()
        meter = Meter()
        meter.start()
        send_async = producer.send_async
        for bodies in batches(target.pool, messages, batch):
            done = threading.Event()

            def confirmed(result: Any, _id: Any, done: threading.Event = done) -> None:
                if result != ok:
                    failures.append(result)
                done.set()

            for body in bodies[:-1]:
                send_async(body, None)
            send_async(bodies[-1], confirmed)
            pending.append(done)
            if len(pending) >= in_flight:
                confirmed_in_time(pending.popleft())
        while pending:
            confirmed_in_time(pending.popleft())
        leg = meter.stop(messages)
        producer.close()
        client.close()
        if failures:
            raise RuntimeError(f"Pulsar: {len(failures)} batches failed: {failures[0]}")
        return leg

    def receive(self, target: Target, messages: int) -> Leg:
        import pulsar

        from brokers.pulsar.admin import SUBSCRIPTION, topic_url

        params = target.params
        client = self._client(target)
        consumer = client.subscribe(
            topic_url(params, target.destination),
            SUBSCRIPTION,
            consumer_type=pulsar.ConsumerType.Shared,
            receiver_queue_size=params.receiver_queue_size,
            unacked_messages_timeout_ms=int(params.ack_timeout * 1000),
            initial_position=pulsar.InitialPosition.Earliest,
            batch_index_ack_enabled=params.batching,
        )
        receive, acknowledge, timeout = consumer.receive, consumer.acknowledge, pulsar.Timeout
        got = nbytes = 0
        meter = Meter()
        meter.start()
        while got < messages:
            try:
                msg = receive(int(IDLE_END * 1000))
            except timeout:
                break
            nbytes += len(msg.data())
            acknowledge(msg)
            got += 1
        leg = meter.stop(got)
        consumer.close()
        client.close()
        return leg


class NatsFloor(Floor):
    """Receiving: pull requests for :data:`PULL_BATCH` messages (what the adapter's ask for)
    published to the consumer's API subject, the messages arriving at one subscription whose
    callback reads and acknowledges each — or, with ``--nats-fetch N``, nats-py's pull
    subscription's ``fetch(N)``, which costs several times as much per message (it waits
    for each message with ``asyncio.wait_for``)."""

    def __init__(self, fetch: int) -> None:
        self.fetch = fetch
        pull = f"fetch({fetch})" if fetch else f"pull requests of {PULL_BATCH} to a subscription"
        self.how = (
            "core publish per message with its batch's reply subject, PubAcks counted by one "
            f"subscription, 8 batches in flight; {pull}, data, ack per message"
        )

    async def _connect(self, target: Target) -> Any:
        import nats

        endpoints = target.endpoints
        login = {"user": endpoints.get("user"), "password": endpoints.get("password")}
        return await nats.connect(
            servers=[f"nats://{h}" for h in endpoints.hosts],
            skip_subject_validation=True,  # the cheapest the library allows
            **(login if login["user"] else {}),
        )

    def send(self, target: Target, messages: int, batch: int, in_flight: int) -> Leg:
        leg = self._send(target, messages, batch, in_flight)
        return asyncio.run(asyncio.wait_for(leg, LEG_LIMIT))

    async def _send(self, target: Target, messages: int, batch: int, in_flight: int) -> Leg:
        from brokers.nats.adapter import subject

        nc = await self._connect(target)
        prefix = nc.new_inbox() + "."
        cut = len(prefix)
        remaining: dict[str, int] = {}
        done: dict[str, asyncio.Future[None]] = {}
        failures = 0

        async def on_ack(msg: Any) -> None:
            nonlocal failures
            key = msg.subject[cut:]
            if not msg.data.startswith(b'{"stream"'):
                failures += 1
            left = remaining[key] = remaining[key] - 1
            if not left:
                del remaining[key]
                done.pop(key).set_result(None)

        await nc.subscribe(prefix + "*", cb=on_ack)
        publish, to = nc.publish, subject(target.destination)
        loop = asyncio.get_running_loop()
        pending: deque[asyncio.Future[None]] = deque()
        meter = Meter()
        meter.start()
        for k, bodies in enumerate(batches(target.pool, messages, batch)):
            key = str(k)
            reply = prefix + key
            remaining[key] = len(bodies)
            future = done[key] = loop.create_future()
            for body in bodies:
                await publish(to, body, reply=reply)
            pending.append(future)
            if len(pending) >= in_flight:
                await pending.popleft()
        while pending:
            await pending.popleft()
        leg = meter.stop(messages)
        await nc.close()
        if failures:
            raise RuntimeError(f"NATS: {failures} messages not stored")
        return leg

    def receive(self, target: Target, messages: int) -> Leg:
        return asyncio.run(asyncio.wait_for(self._receive(target, messages), LEG_LIMIT))

    async def _receive(self, target: Target, messages: int) -> Leg:
        if self.fetch:
            return await self._fetch(target, messages)
        from brokers.nats.adapter import CONSUMER, stream_name

        nc = await self._connect(target)
        api = f"$JS.API.CONSUMER.MSG.NEXT.{stream_name(target.destination)}.{CONSUMER}"
        inbox = nc.new_inbox()
        publish = nc.publish
        got = nbytes = owed = 0
        answered = asyncio.Event()

        async def on_message(msg: Any) -> None:
            nonlocal got, nbytes, owed
            if msg.headers:  # a status: the request expired (408) or was refused
                owed = 0
            else:
                nbytes += len(msg.data)
                await publish(msg.reply, b"+ACK")
                got += 1
                owed -= 1
            if not owed:
                answered.set()

        await nc.subscribe(inbox, cb=on_message)
        meter = Meter()
        meter.start()
        while got < messages:
            owed = min(PULL_BATCH, messages - got)
            request = b'{"batch":%d,"expires":%d}' % (owed, int(IDLE_END * 1e9))
            answered.clear()
            before = got
            await publish(api, request, reply=inbox)
            await answered.wait()
            if got == before:
                break  # nothing came within IDLE_END
        leg = meter.stop(got)
        await nc.close()
        return leg

    async def _fetch(self, target: Target, messages: int) -> Leg:
        import nats.errors

        from brokers.nats.adapter import CONSUMER, stream_name

        nc = await self._connect(target)
        js = nc.jetstream()
        sub = await js.pull_subscribe_bind(durable=CONSUMER, stream=stream_name(target.destination))
        fetch = sub.fetch
        got = nbytes = 0
        meter = Meter()
        meter.start()
        while got < messages:
            try:
                msgs = await fetch(min(self.fetch, messages - got), timeout=IDLE_END)
            except nats.errors.TimeoutError:
                break
            for msg in msgs:
                nbytes += len(msg.data)
                await msg.ack()
            got += len(msgs)
        leg = meter.stop(got)
        await nc.close()
        return leg


class PostgresFloor(Floor):
    """The insert is one statement per batch; ``--pg-insert`` picks how psycopg sends it:
    ``values`` (a prepared multi-row VALUES, one parameter per message) cost the least here,
    then ``unnest`` of one bytea array (the adapter's), ``copy`` (``write_row`` per message)
    and ``executemany`` (a statement per message, pipelined), about 13× ``values``."""

    INSERTS = ("unnest", "values", "executemany", "copy")

    def __init__(self, insert: str) -> None:
        self.insert = insert
        self.how = (
            f"one INSERT per batch ({insert}), prepared, binary; the adapter's claim "
            "(FOR UPDATE SKIP LOCKED, 10) and DELETE statements"
        )

    def _connect(self, target: Target) -> Any:
        import psycopg

        host, port = target.endpoints.first
        return psycopg.connect(
            host=host,
            port=port,
            dbname=target.endpoints.get("dbname", "postgres"),
            user=target.endpoints.get("user", "postgres"),
            password=target.endpoints.get("password") or None,
            autocommit=True,
        )

    def send(self, target: Target, messages: int, batch: int, in_flight: int) -> Leg:
        from psycopg import sql

        table = sql.Identifier(target.destination.name)
        conn = self._connect(target)
        cursor = conn.cursor(binary=True)
        meter = Meter()
        if self.insert == "unnest":
            query = sql.SQL("INSERT INTO {} (content) SELECT unnest(%b::bytea[])").format(table)
            statement = query.as_bytes(None)
            meter.start()
            for bodies in batches(target.pool, messages, batch):
                cursor.execute(statement, (bodies,), prepare=True)
        elif self.insert == "values":
            statements: dict[int, bytes] = {}
            meter.start()
            for bodies in batches(target.pool, messages, batch):
                n = len(bodies)
                if n not in statements:
                    rows = sql.SQL(", ").join([sql.SQL("(%b)")] * n)
                    query = sql.SQL("INSERT INTO {} (content) VALUES {}").format(table, rows)
                    statements[n] = query.as_bytes(None)
                cursor.execute(statements[n], bodies, prepare=True)
        elif self.insert == "executemany":
            statement = sql.SQL("INSERT INTO {} (content) VALUES (%b)").format(table).as_bytes(None)
            meter.start()
            for bodies in batches(target.pool, messages, batch):
                with conn.transaction():
                    cursor.executemany(statement, [(body,) for body in bodies])
        else:
            statement = sql.SQL("COPY {} (content) FROM STDIN").format(table).as_bytes(None)
            meter.start()
            for bodies in batches(target.pool, messages, batch):
                with cursor.copy(statement) as copy:
                    for body in bodies:
                        copy.write_row((body,))
        leg = meter.stop(messages)
        conn.close()
        return leg

    def receive(self, target: Target, messages: int) -> Leg:
        from brokers.postgresql.adapter import statements

        _, claim_b, delete_b = statements(target.destination)  # the adapter's claim and delete
        conn = self._connect(target)
        cursor = conn.cursor(binary=True)
        execute = cursor.execute
        visibility = float(target.params.visibility_timeout)
        got = nbytes = 0
        idle_since = None
        meter = Meter()
        meter.start()
        while got < messages:
            n = min(RECEIVE_BATCH, messages - got)
            rows = execute(claim_b, (visibility, n), prepare=True).fetchall()
            if not rows:
                idle_since = idle_since or time.monotonic()
                if time.monotonic() - idle_since > IDLE_END:
                    break
                time.sleep(0.01)
                continue
            idle_since = None
            ids = []
            for id_, content, _deliveries in rows:
                nbytes += len(content)
                ids.append(id_)
            execute(delete_b, (ids,), prepare=True)
            got += len(rows)
        leg = meter.stop(got)
        conn.close()
        return leg


class RabbitMQFloor(Floor):
    """pika's asynchronous connection (``SelectConnection``): its blocking channel's confirm
    mode waits for each message's confirm, the asynchronous channel lets batches be in flight."""

    how = (
        "SelectConnection: basic_publish per message on a confirm-mode channel, 8 batches "
        "in flight; basic_consume with the adapter's prefetch, a multiple ack per quarter of it"
    )

    def _run(self, target: Target, on_channel: Callable[[Any, Any], None]) -> None:
        """Open a connection and a channel, hand them to ``on_channel``, and run the I/O
        loop until the connection closes."""
        import pika

        from brokers.rabbitmq.adapter import login

        host, port = target.endpoints.first
        errors: list[Any] = []

        def opened(connection: Any) -> None:
            connection.channel(on_open_callback=lambda channel: on_channel(connection, channel))

        def closed(connection: Any, reason: Any) -> None:
            connection.ioloop.stop()

        def failed(connection: Any, error: Any) -> None:
            errors.append(error)
            connection.ioloop.stop()

        parameters = pika.ConnectionParameters(
            host=host,
            port=port,
            virtual_host=target.endpoints.get("vhost", "/"),
            credentials=pika.PlainCredentials(*login(target.endpoints)),
        )
        connection = pika.SelectConnection(
            parameters,
            on_open_callback=opened,
            on_open_error_callback=failed,
            on_close_callback=closed,
        )
        connection.ioloop.start()
        if errors:
            raise RuntimeError(f"RabbitMQ: {errors[0]}")

    def send(self, target: Target, messages: int, batch: int, in_flight: int) -> Leg:
        import pika
        import pika.spec

        queue = target.destination.name
        properties = pika.BasicProperties(delivery_mode=2 if target.params.persistent else 1)
        meter = Meter()
        source = batches(target.pool, messages, batch)
        ends: deque[int] = deque()  # each batch's last delivery tag
        published = confirmed = 0
        early: set[int] = set()  # single confirms ahead of the confirmed prefix
        problems: list[str] = []

        def on_channel(connection: Any, channel: Any) -> None:
            def publish_batch() -> bool:
                nonlocal published
                bodies = next(source, None)
                if bodies is None:
                    return False
                publish = channel.basic_publish
                for body in bodies:
                    publish("", queue, body, properties, mandatory=True)
                published += len(bodies)
                ends.append(published)
                return True

            def on_confirm(frame: Any) -> None:
                nonlocal confirmed
                method = frame.method
                if isinstance(method, pika.spec.Basic.Nack):
                    problems.append("nack")
                tag = method.delivery_tag
                if method.multiple:
                    confirmed = max(confirmed, tag)
                else:
                    early.add(tag)
                while confirmed + 1 in early:
                    confirmed += 1
                    early.discard(confirmed)
                while ends and ends[0] <= confirmed:
                    ends.popleft()
                    publish_batch()
                if not ends:
                    meter.stop(confirmed)
                    connection.close()

            def on_selected(_frame: Any) -> None:
                meter.start()
                for _ in range(in_flight):
                    publish_batch()

            channel.add_on_return_callback(lambda *_: problems.append("returned"))
            channel.confirm_delivery(ack_nack_callback=on_confirm, callback=on_selected)

        self._run(target, on_channel)
        if problems:
            raise RuntimeError(f"RabbitMQ: {len(problems)} messages {problems[0]}")
        assert meter.leg is not None
        return meter.leg

    def receive(self, target: Target, messages: int) -> Leg:
        queue = target.destination.name
        prefetch = target.params.prefetch
        ack_every = max(1, prefetch // 4)
        meter = Meter()
        got = unacked = nbytes = 0

        def on_channel(connection: Any, channel: Any) -> None:
            def finish() -> None:
                if meter.leg is None:
                    meter.stop(got)
                    connection.close()

            def on_message(channel: Any, method: Any, _properties: Any, body: bytes) -> None:
                nonlocal got, unacked, nbytes
                if got >= messages:
                    return  # beyond the leg: not acknowledged, delivered again later
                got += 1
                unacked += 1
                nbytes += len(body)
                if unacked >= ack_every or got == messages:
                    channel.basic_ack(method.delivery_tag, multiple=True)
                    unacked = 0
                    idle.clear()
                if got == messages:
                    finish()

            idle: list[bool] = []

            def watch() -> None:  # ends a leg that gets nothing for IDLE_END seconds
                if meter.leg is None:
                    if idle:
                        finish()
                        return
                    idle.append(True)
                    connection.ioloop.call_later(IDLE_END, watch)

            def on_qos(_frame: Any) -> None:
                meter.start()
                channel.basic_consume(queue, on_message, auto_ack=False)
                connection.ioloop.call_later(IDLE_END, watch)

            channel.basic_qos(prefetch_count=prefetch, callback=on_qos)

        self._run(target, on_channel)
        assert meter.leg is not None
        return meter.leg


FLOORS: dict[str, Callable[[argparse.Namespace], Floor]] = {
    "pulsar": lambda _: PulsarFloor(),
    "nats": lambda args: NatsFloor(args.nats_fetch),
    "postgresql": lambda args: PostgresFloor(args.pg_insert),
    "rabbitmq": lambda _: RabbitMQFloor(),
}


# -- the run -------------------------------------------------------------------------------


def peer_us(system: str) -> tuple[str, float | None]:
    """The peer tool's name and its all-client CPU µs per message in the peer table."""
    for entry in peers_doc.load()["systems"]:
        if entry["system"] == system:
            _, theirs = peers_doc.shown_rows(entry)
            if theirs is not None:
                return str(theirs["tool"]), theirs.get("client_us_per_msg")
    return "peer", None


def line(name: str, leg: Leg) -> str:
    return (
        f"  {name:<28} {leg.messages:>9,} msgs  {leg.rate:>9,.0f} msgs/s  "
        f"{leg.cpu_us:7.2f} µs CPU/msg (user {leg.user / max(1, leg.messages) * 1e6:.2f}, "
        f"system {leg.system / max(1, leg.messages) * 1e6:.2f})"
    )


def median_us(legs: list[Leg]) -> float:
    return statistics.median(leg.cpu_us for leg in legs)


@contextmanager
def profiled(directory: Path | None, name: str) -> Iterator[None]:
    """With ``--profile DIR``: py-spy samples this process while the block runs, into
    ``DIR/<name>.txt`` (collapsed stacks, every thread; py-spy must be installed)."""
    if directory is None:
        yield
        return
    directory.mkdir(parents=True, exist_ok=True)
    spy = subprocess.Popen(
        [shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy")), "record", "--pid", str(os.getpid()), "--rate", "250", "--format", "raw",
         "--threads", "--output", str(directory / f"{name}.txt")],
        stdout=subprocess.DEVNULL,
    )  # fmt: skip
    time.sleep(1.0)  # attached
    try:
        yield
    finally:
        spy.send_signal(signal.SIGINT)
        spy.wait()


@contextmanager
def started(system: BrokerSystem[Any], params: Any) -> Iterator[LocalCluster]:
    with tempfile.TemporaryDirectory(prefix="bench-floor-") as workdir:
        cluster = system.local.start("single", params, Path(workdir) / "broker")  # type: ignore[union-attr]
        try:
            yield cluster
        finally:
            cluster.stop()


def measure(name: str, args: argparse.Namespace) -> None:
    system = registry.get(name)
    if system.local is None or (reason := system.local.missing()):
        print(f"{system.title}: skipped — {reason or 'not started locally'}")
        return
    messages = args.messages or DEFAULT_MESSAGES[name]
    in_flight = IN_FLIGHT[name]
    floor = FLOORS[name](args)
    params = system.params_model()
    print(
        f"{system.title}: {messages:,} messages of {MESSAGE_SIZE} B a leg, batches of "
        f"{args.batch}, {in_flight} in flight, receive batches of {RECEIVE_BATCH}\n"
        f"  library floor: {floor.how}",
        flush=True,
    )
    legs: dict[str, list[Leg]] = {}
    with started(system, params) as cluster:
        destination = Destination("bench_library_floor")
        system.prepare(cluster.endpoints, params, destination)
        target = Target(cluster.endpoints, params, destination, bodies())
        runs: list[tuple[str, Callable[[], Leg]]] = [
            ("library floor, send", lambda: floor.send(target, messages, args.batch, in_flight)),
            (
                "brokerbench, send",
                lambda: ours_send(
                    system, cluster, params, destination, messages, args.batch, in_flight
                ),
            ),
            ("library floor, receive", lambda: floor.receive(target, messages)),
            (
                "brokerbench, receive",
                lambda: ours_receive(system, cluster, params, destination, messages),
            ),
        ]
        for repeat in range(args.repeats):
            print(f" run {repeat + 1}", flush=True)
            for leg_name, run in runs:
                slug = leg_name.replace(", ", "-").replace(" ", "-")
                with profiled(args.profile, f"{name}-{slug}-{repeat + 1}"):
                    leg = run()
                legs.setdefault(leg_name, []).append(leg)
                print(line(leg_name, leg), flush=True)
    report(name, legs)


def report(name: str, legs: dict[str, list[Leg]]) -> None:
    floor_send = median_us(legs["library floor, send"])
    ours_send_ = median_us(legs["brokerbench, send"])
    floor_rx = median_us(legs["library floor, receive"])
    ours_rx = median_us(legs["brokerbench, receive"])
    tool, peer = peer_us(name)
    floor_all, ours_all = floor_send + floor_rx, ours_send_ + ours_rx
    print(
        f"  medians, µs CPU/msg: floor send {floor_send:.2f} + receive {floor_rx:.2f} = "
        f"{floor_all:.2f}; brokerbench send {ours_send_:.2f} + receive {ours_rx:.2f} = "
        f"{ours_all:.2f}\n"
        f"  brokerbench ÷ library floor: send {ours_send_ / floor_send:.2f}×, receive "
        f"{ours_rx / floor_rx:.2f}×, both {ours_all / floor_all:.2f}×"
    )
    if peer:
        print(
            f"  {tool}'s all-client CPU (docs/peers-results.json): {peer:.2f} µs/msg; "
            f"library floor ÷ {tool}: {floor_all / peer:.2f}× "
            f"(2× {tool} = {2 * peer:.2f} µs/msg)",
            flush=True,
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--systems", default=",".join(SYSTEMS), help="comma-separated")
    parser.add_argument("--batch", type=int, default=50, help="messages per send batch")
    parser.add_argument("--messages", type=int, default=0, help="per leg (default per system)")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument(
        "--pg-insert",
        choices=PostgresFloor.INSERTS,
        default="values",
        help="how the PostgreSQL floor inserts a batch",
    )
    parser.add_argument(
        "--nats-fetch",
        type=int,
        default=0,
        help="the NATS floor receives with nats-py's fetch(N) (default: raw pull requests)",
    )
    parser.add_argument(
        "--profile",
        type=Path,
        default=None,
        metavar="DIR",
        help="py-spy every leg into DIR/<system>-<leg>-<run>.txt (collapsed stacks)",
    )
    args = parser.parse_args()
    for name in args.systems.split(","):
        measure(name.strip(), args)


if __name__ == "__main__":
    main()
