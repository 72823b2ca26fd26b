"""The Redis Streams adapters (blocking).

Messages are spread over ``streams`` keys (in turn; a message with a message key goes to its
key's stream, so that one key's messages keep their order). A batch is one XADD per message
(and an optional WAIT) written in one go; ``send`` reads its replies, ``submit`` leaves them
to be read when its confirmation is awaited, so several batches can be in flight on one
connection (Redis answers in order). ``receive`` reads new entries with XREADGROUP (COUNT, a
short BLOCK) and, every ``claim_after / 2`` seconds, reclaims entries idle longer than
``claim_after`` with XAUTOCLAIM (they count as redelivered); ``ack`` writes one XACK and one
XDEL per stream without waiting: their replies are read with the next command's (one round
trip per receive and ack), and a failed acknowledgement is raised by the next ``ack`` (its
entries are reclaimed later).

Against one master (:class:`RedisAdapter`) a worker writes on two connections of its own
(:mod:`brokers.redis.resp`: a socket, replies parsed by ``hiredis.Reader``), one for
sending (:class:`SendChannel`) and one for receiving (:class:`ReplyChannel`), without
redis-py's per-command pool and retry machinery. Redis Cluster (``mode = cluster``:
:class:`RedisClusterAdapter`) goes through redis-py's cluster client (its public API), one
batch at a time, as do ``prepare`` and ``describe``.
"""

from __future__ import annotations

import contextlib
import itertools
import time
import uuid
from collections import defaultdict
from collections.abc import Sequence
from importlib import metadata
from typing import TYPE_CHECKING, Any

import numpy as np
import redis
import redis.cluster

from brokers import credentials
from brokers.base import Adapter, Confirmation, Destination, Endpoints, Received, ReceivedBatch
from brokers.batches import GroupedReceipts, RowsBatch, keys_of
from brokers.errors import BrokerConnectionError, BrokerError
from brokers.redis.protocol import REPLY_TIMEOUT, ReplyChannel, SendChannel, Written
from brokers.redis.resp import ReplyError, RespConnection, Server, pack, pack_with_ids
from brokers.redis.xadd import FIELD, XaddPacker, stream_of

if TYPE_CHECKING:
    from brokers.redis.params import RedisParams

GROUP = b"brokerbench"
#: How long XREADGROUP blocks when no stream has a new entry (ms).
READ_BLOCK_MS = 500


def is_cluster(endpoints: Endpoints) -> bool:
    return endpoints.get("mode") == "cluster"


def auth_options(endpoints: Endpoints) -> dict[str, Any]:
    """redis-py's ``username`` and ``password`` from the endpoints (None where not given)."""
    return {
        "username": endpoints.get("user") or None,
        "password": endpoints.get("password") or None,
    }


def _client(endpoints: Endpoints) -> Any:
    """A client of the master, or of Redis Cluster (``mode = cluster``: hosts are masters)."""
    host, port = endpoints.first
    options: dict[str, Any] = {
        "socket_connect_timeout": 10,
        "socket_timeout": REPLY_TIMEOUT,
        **auth_options(endpoints),
    }
    try:
        if is_cluster(endpoints):
            nodes = [redis.cluster.ClusterNode(h, p) for h, p in endpoints.addresses()]
            client: Any = redis.cluster.RedisCluster(startup_nodes=nodes, **options)
        else:
            # RESP2, as the workers' own connections speak it (lists, not RESP3 maps).
            client = redis.Redis(host=host, port=port, protocol=2, **options)
        client.ping()
    except redis.RedisError as exc:
        raise BrokerConnectionError(f"cannot reach Redis at {host}:{port}: {exc}") from None
    return client


def server_of(endpoints: Endpoints) -> Server:
    """The master a worker's own connections go to, and its credentials."""
    host, port = endpoints.first
    return Server(host, port, **auth_options(endpoints))


def reply_parser() -> str:
    """What parses the replies of a worker's connections (the sending one counts its XADDs'
    replies itself)."""
    return f"hiredis.Reader (hiredis {metadata.version('hiredis')})"


def stream_keys(destination: Destination, params: RedisParams) -> list[str]:
    # The hash tag keeps one stream per slot group spread across a Redis Cluster.
    return [f"{destination.name}:{{{i}}}" for i in range(params.streams)]


def prepare(endpoints: Endpoints, params: RedisParams, destination: Destination) -> None:
    client = _client(endpoints)
    for key in stream_keys(destination, params):
        client.delete(key)
        client.xgroup_create(key, GROUP, id="0", mkstream=True)


def describe(endpoints: Endpoints, params: RedisParams) -> dict[str, Any]:
    host, port = endpoints.first
    master = redis.Redis(host=host, port=port, socket_connect_timeout=10, **auth_options(endpoints))
    try:
        server = master.info("server")
        replication = master.info("replication")
        config = master.config_get("append*")
        cluster = master.info("cluster").get("cluster_enabled") == 1
        shards = None
        if cluster:
            masters = [
                n for n in master.cluster("nodes").values() if "master" in n["flags"] and n["slots"]
            ]
            shards = len(masters)
    except redis.RedisError as exc:
        raise BrokerConnectionError(f"cannot reach Redis at {host}:{port}: {exc}") from None
    return {
        "version": server.get("redis_version"),
        "role": replication.get("role"),
        "connected_replicas": replication.get("connected_slaves", 0),
        "cluster_shards": shards,
        "settings": {k: config.get(k) for k in ("appendonly", "appendfsync")},
        "replication": "asynchronous",
        "client_parser": reply_parser(),
        "auth": credentials.auth(endpoints.get("password")),
    }


#: A received message's receipt: its stream key and entry id.
StreamEntry = tuple[bytes, bytes]


class _StreamsAdapter(Adapter[StreamEntry]):
    """What both adapters share: the stream keys, the consumer name and the claim clock."""

    def __init__(self, endpoints: Endpoints, params: RedisParams, destination: Destination):
        self.params = params
        self.keys = stream_keys(destination, params)
        self.consumer = f"c-{uuid.uuid4().hex[:12]}".encode()
        self.claim_idle_ms = int(params.claim_after * 1000)
        self.next_claim = time.monotonic() + params.claim_after / 2

    def _claim_due(self) -> bool:
        if time.monotonic() < self.next_claim:
            return False
        self.next_claim = time.monotonic() + self.params.claim_after / 2
        return True


class RedisAdapter(_StreamsAdapter):
    """A worker's client of one master: a sending and a receiving connection (each lazy)."""

    pipelined = True

    def __init__(self, endpoints: Endpoints, params: RedisParams, destination: Destination):
        super().__init__(endpoints, params, destination)
        self.server = server_of(endpoints)
        #: The connection that showed the master reachable; the first channel takes it.
        self._spare: RespConnection | None = _reached(self.server)
        self.raw_keys = [key.encode() for key in self.keys]
        self.xadds = XaddPacker(self.raw_keys)
        self.wait_command = (b"WAIT", params.wait_replicas, params.wait_timeout_ms)
        self._sending: SendChannel | None = None
        self._receiving: ReplyChannel | None = None
        self._read_count = 0
        self._read_command = b""  # in RESP, for the current COUNT
        #: The last XACK/XDEL written; its replies are read with the next command's.
        self._acking: Written | None = None

    def submit(self, batch: Sequence[bytes]) -> Confirmation:
        return self._write(batch)

    def send(self, batch: Sequence[bytes]) -> None:
        written = self._write(batch)
        written.channel.settle(written, None)

    def _write(self, batch: Sequence[bytes]) -> Written:
        if self._sending is None:
            self._sending = SendChannel(self._connection())
        keys = keys_of(batch)
        packed: list[bytes | np.ndarray]
        if keys is not None:
            packed = [self.xadds.pack_keyed(batch, keys)]
        elif isinstance(batch, RowsBatch):
            packed = [self.xadds.pack_rows(batch)]  # (no bytes object per message)
        else:
            packed = [self.xadds.pack(batch)]
        count = len(batch)
        if self.params.wait_replicas:
            packed.append(pack(*self.wait_command))
            count += 1
        return self._sending.write_packed(packed, count, self.params.wait_replicas)

    def _channel(self) -> ReplyChannel:
        if self._receiving is None:
            self._receiving = ReplyChannel(self._connection())
        return self._receiving

    def _connection(self) -> RespConnection:
        """A connection of the worker's own (connected at its first write)."""
        spare, self._spare = self._spare, None
        return spare or RespConnection(self.server)

    def receive(self, max_n: int) -> list[Received[StreamEntry]]:
        if self._claim_due():
            claimed = self._claim(max_n)
            if claimed:
                return claimed
        out: list[Received[StreamEntry]] = []
        for key, entries in self._read(max_n) or ():
            out += [Received(fields[1], (key, entry_id)) for entry_id, fields in entries]
        return out

    def receive_batch(self, max_n: int) -> ReceivedBatch[StreamEntry]:
        """:meth:`receive` as columns: the bodies, and the entry ids by key as the receipt."""
        if self._claim_due():
            claimed = self._claim(max_n)
            if claimed:
                return ReceivedBatch.of(claimed)
        bodies: list[bytes] = []
        by_key: dict[bytes, list[bytes]] = {}
        for key, entries in self._read(max_n) or ():
            if entries:
                by_key[key] = [entry_id for entry_id, _ in entries]
                bodies += [fields[1] for _, fields in entries]
        return ReceivedBatch(bodies, GroupedReceipts(by_key, len(bodies)))

    def _read(self, max_n: int) -> Any:
        """One XREADGROUP of every key: its reply, ``[(key, [(entry id, fields)…])…]``."""
        if max_n != self._read_count:
            # COUNT applies per stream: ask each key for its share so the total stays
            # ≤ max_n (an entry read but not returned would sit unacknowledged until
            # XAUTOCLAIM).
            per_key = max(1, max_n // len(self.raw_keys))
            self._read_count = max_n
            command: list[bytes | int] = [b"XREADGROUP", b"GROUP", GROUP, self.consumer]
            command += [b"COUNT", per_key, b"BLOCK", READ_BLOCK_MS, b"STREAMS"]
            command += [*self.raw_keys, *[b">"] * len(self.raw_keys)]
            self._read_command = pack(*command)
        return self._channel().call_packed(self._read_command)

    def _claim(self, max_n: int) -> list[Received[StreamEntry]]:
        channel = self._channel()
        out: list[Received[StreamEntry]] = []
        for key in self.raw_keys:
            reply = channel.call(
                *(b"XAUTOCLAIM", key, GROUP, self.consumer, self.claim_idle_ms),
                *(b"0-0", b"COUNT", max_n),
            )
            out += [
                Received(fields[1], (key, entry_id), redelivered=True)
                for entry_id, fields in reply[1]
                if fields
            ]
            if len(out) >= max_n:
                break
        return out

    def ack(self, receipts: Sequence[StreamEntry]) -> None:
        packed = [
            command
            for key, ids in _by_key(receipts).items()
            for command in (
                pack_with_ids((b"XACK", key, GROUP), ids),
                pack_with_ids((b"XDEL", key), ids),
            )
        ]
        earlier, self._acking = self._acking, None
        if earlier is not None and earlier.error is not None:
            raise BrokerError(f"an earlier acknowledgement failed: {earlier.error}")
        if packed:
            self._acking = self._channel().write_packed(b"".join(packed), len(packed))

    def close(self) -> None:
        if self._acking is not None and self._receiving is not None:
            # The last acknowledgement reaches the server before the connection goes.
            with contextlib.suppress(Exception):
                self._receiving.settle(self._acking, 5.0)
        for channel in (self._sending, self._receiving):
            if channel is not None:
                channel.connection.close()
        if self._spare is not None:
            self._spare.close()


class RedisClusterAdapter(_StreamsAdapter):
    """A worker's client of Redis Cluster, which routes every key to its shard's master."""

    def __init__(self, endpoints: Endpoints, params: RedisParams, destination: Destination):
        if params.wait_replicas:
            raise ValueError("wait_replicas is not supported with Redis Cluster")
        super().__init__(endpoints, params, destination)
        self.client = _client(endpoints)
        self.next_key = itertools.cycle(self.keys).__next__
        self.read_key = itertools.cycle(self.keys).__next__

    def send(self, batch: Sequence[bytes]) -> None:
        pipe = self.client.pipeline(transaction=False)
        keys = keys_of(batch)
        streams = (
            [self.next_key() for _ in batch]
            if keys is None
            else [self.keys[stream_of(key, len(self.keys))] for key in keys]
        )
        for body, stream in zip(batch, streams, strict=True):
            pipe.xadd(stream, {FIELD: body})
        pipe.execute()

    def receive(self, max_n: int) -> list[Received[StreamEntry]]:
        if self._claim_due():
            claimed = self._claim(max_n)
            if claimed:
                return claimed
        # Redis Cluster cannot read keys of different slots at once: try them in turn.
        for _ in range(len(self.keys)):
            key = self.read_key()
            reply = self.client.xreadgroup(GROUP, self.consumer, {key: ">"}, count=max_n)
            if reply:
                return [
                    Received(fields[FIELD], (stream, entry_id))
                    for stream, entries in reply
                    for entry_id, fields in entries
                ]
        time.sleep(0.05)
        return []

    def _claim(self, max_n: int) -> list[Received[StreamEntry]]:
        out: list[Received[StreamEntry]] = []
        for key in self.keys:
            claimed: Any = self.client.xautoclaim(
                key, GROUP, self.consumer, self.claim_idle_ms, start_id="0-0", count=max_n
            )
            out += [
                Received(fields[FIELD], (key.encode(), entry_id), redelivered=True)
                for entry_id, fields in claimed[1]
                if fields
            ]
            if len(out) >= max_n:
                break
        return out

    def ack(self, receipts: Sequence[StreamEntry]) -> None:
        pipe = self.client.pipeline(transaction=False)
        for key, ids in _by_key(receipts).items():
            pipe.xack(key, GROUP, *ids)
            pipe.xdel(key, *ids)
        pipe.execute()

    def close(self) -> None:
        self.client.close()


def _reached(server: Server) -> RespConnection:
    """A connection to ``server``, connected and answering (PING); raises when it is not."""
    connection = RespConnection(server)
    try:
        reply = connection.call(b"PING")
    except BrokerConnectionError:
        connection.close()
        raise
    if isinstance(reply, ReplyError):
        connection.close()
        raise BrokerConnectionError(f"cannot reach Redis at {server.where}: {reply}")
    return connection


def _by_key(receipts: Sequence[StreamEntry]) -> dict[bytes, list[bytes]]:
    """Entry ids by stream key, from ``(key, entry id)`` receipts."""
    if isinstance(receipts, GroupedReceipts):
        return receipts.groups
    by_key: dict[bytes, list[bytes]] = defaultdict(list)
    for key, entry_id in receipts:
        by_key[key].append(entry_id)
    return by_key


def connect(endpoints: Endpoints, params: RedisParams, destination: Destination) -> _StreamsAdapter:
    if is_cluster(endpoints):
        return RedisClusterAdapter(endpoints, params, destination)
    return RedisAdapter(endpoints, params, destination)
