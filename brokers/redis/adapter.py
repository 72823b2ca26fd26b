"""The Redis Streams adapter (redis-py, blocking).

Messages are spread over ``streams`` keys. ``send`` pipelines one XADD per message (and
an optional WAIT); ``receive`` reads new entries with XREADGROUP and, every
``claim_after / 2`` seconds, reclaims entries idle longer than ``claim_after`` with
XAUTOCLAIM (they count as redelivered); ``ack`` is XACK plus XDEL.
"""

from __future__ import annotations

import itertools
import time
import uuid
from collections import defaultdict
from collections.abc import Hashable, Sequence
from typing import TYPE_CHECKING, Any

import redis
import redis.cluster

from brokers.base import Adapter, Destination, Endpoints, Received
from brokers.errors import BrokerConnectionError

if TYPE_CHECKING:
    from brokers.redis import RedisParams

GROUP = "brokerbench"
FIELD = b"m"


def is_cluster(endpoints: Endpoints) -> bool:
    return endpoints.get("mode") == "cluster"


def _client(endpoints: Endpoints) -> Any:
    """A client of the master, or of Redis Cluster (``mode = cluster``: hosts are masters)."""
    host, port = endpoints.first
    try:
        if is_cluster(endpoints):
            nodes = [redis.cluster.ClusterNode(h, p) for h, p in endpoints.addresses()]
            client: Any = redis.cluster.RedisCluster(
                startup_nodes=nodes, socket_connect_timeout=10, socket_timeout=30
            )
        else:
            client = redis.Redis(host=host, port=port, socket_connect_timeout=10, socket_timeout=30)
        client.ping()
    except redis.RedisError as exc:
        raise BrokerConnectionError(f"cannot reach Redis at {host}:{port}: {exc}") from None
    return client


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
    master = redis.Redis(host=host, port=port, socket_connect_timeout=10)
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
    }


class RedisAdapter(Adapter["RedisParams"]):
    def __init__(self, endpoints: Endpoints, params: RedisParams, destination: Destination):
        self.params = params
        self.client = _client(endpoints)
        self.keys = stream_keys(destination, params)
        self.next_key = itertools.cycle(self.keys)
        self.cluster = is_cluster(endpoints)
        if self.cluster and params.wait_replicas:
            raise ValueError("wait_replicas is not supported with Redis Cluster")
        self.consumer = f"c-{uuid.uuid4().hex[:12]}"
        self.read_key = itertools.cycle(self.keys)
        self.next_claim = time.monotonic() + params.claim_after / 2

    def send(self, batch: Sequence[bytes]) -> None:
        pipe = self.client.pipeline(transaction=False)
        for body in batch:
            pipe.xadd(next(self.next_key), {FIELD: body})
        if self.params.wait_replicas:
            pipe.execute_command("WAIT", self.params.wait_replicas, self.params.wait_timeout_ms)
        replies = pipe.execute()
        if self.params.wait_replicas and replies[-1] < self.params.wait_replicas:
            raise RuntimeError(
                f"WAIT: only {replies[-1]} of {self.params.wait_replicas} replicas confirmed"
            )

    def receive(self, max_n: int) -> list[Received]:
        if time.monotonic() >= self.next_claim:
            self.next_claim = time.monotonic() + self.params.claim_after / 2
            claimed = self._claim(max_n)
            if claimed:
                return claimed
        if self.cluster:
            reply = self._read_cluster(max_n)
        else:
            # COUNT applies per stream: ask each key for its share so the total stays ≤ max_n
            # (an entry read but not returned would sit unacknowledged until XAUTOCLAIM).
            per_key = max(1, max_n // len(self.keys))
            reply = self.client.xreadgroup(
                GROUP, self.consumer, {k: ">" for k in self.keys}, count=per_key, block=500
            )
        out: list[Received] = []
        for key, entries in reply or []:
            for entry_id, fields in entries:
                out.append(Received(fields[FIELD], (key, entry_id)))
        return out

    def _read_cluster(self, max_n: int) -> Any:
        """Redis Cluster cannot read keys of different slots at once: try them in turn."""
        for _ in range(len(self.keys)):
            key = next(self.read_key)
            reply = self.client.xreadgroup(GROUP, self.consumer, {key: ">"}, count=max_n)
            if reply:
                return reply
        time.sleep(0.05)
        return []

    def _claim(self, max_n: int) -> list[Received]:
        idle_ms = int(self.params.claim_after * 1000)
        out: list[Received] = []
        for key in self.keys:
            claimed: Any = self.client.xautoclaim(
                key, GROUP, self.consumer, idle_ms, start_id="0-0", count=max_n
            )
            entries = claimed[1]
            out += [
                Received(fields[FIELD], (key.encode(), entry_id), redelivered=True)
                for entry_id, fields in entries
                if fields
            ]
            if len(out) >= max_n:
                break
        return out

    def ack(self, receipts: Sequence[Hashable]) -> None:
        by_key: dict[Any, list[Any]] = defaultdict(list)
        for receipt in receipts:
            pair: tuple[Any, Any] = receipt  # type: ignore[assignment]
            by_key[pair[0]].append(pair[1])
        pipe = self.client.pipeline(transaction=False)
        for key, ids in by_key.items():
            pipe.xack(key, GROUP, *ids)
            pipe.xdel(key, *ids)
        pipe.execute()

    def close(self) -> None:
        self.client.close()


def connect(endpoints: Endpoints, params: RedisParams, destination: Destination) -> RedisAdapter:
    return RedisAdapter(endpoints, params, destination)
