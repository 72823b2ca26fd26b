"""A NATS JetStream point's stream and durable consumer: created (or updated) by
``prepare``, described by ``describe`` (server version, replicas and their placement, the
consumer's settings), each API call retried while a young cluster elects its leaders."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from brokers import credentials
from brokers.base import Destination, Endpoints
from brokers.errors import BrokerError
from brokers.nats.adapter import CONSUMER, open_connection, stream_name

if TYPE_CHECKING:
    from nats.aio.client import Client
    from nats.js import JetStreamContext

    from brokers.nats.params import NatsParams

#: JetStream API calls made while a (new) cluster elects leaders are retried this long.
API_RETRY = 60.0

T = TypeVar("T")


def cluster_size(client: Client) -> int:
    """Servers in the cluster, from the client URLs the server announces (itself included)."""
    urls = client._server_info.get("connect_urls") or []
    return max(1, len(urls))


def stream_replicas(client: Client, params: NatsParams) -> int:
    return params.replicas if params.replicas is not None else min(3, cluster_size(client))


async def _retrying(call: Callable[[], Awaitable[T]], what: str) -> T:
    """Retry JetStream API calls a young cluster answers with 'unavailable' or not at all."""
    import nats.errors
    import nats.js.errors

    deadline = time.monotonic() + API_RETRY
    while True:
        try:
            return await call()
        except (
            nats.js.errors.ServiceUnavailableError,
            nats.errors.TimeoutError,
            nats.errors.NoRespondersError,
        ) as exc:
            if time.monotonic() >= deadline:
                raise BrokerError(f"NATS JetStream: {what} failed: {exc!r}") from None
            await asyncio.sleep(0.5)


async def _create(js: JetStreamContext, client: Client, params: NatsParams, name: str) -> Any:
    """Create (or update) the stream and its durable consumer; return the stream info."""
    from nats.js import api

    config = api.StreamConfig(
        name=name,
        # A keyed message goes to the subject with its key as the last token (``….k7``).
        subjects=[f"brokerbench.{name}", f"brokerbench.{name}.>"],
        retention=api.RetentionPolicy.WORK_QUEUE,
        storage=api.StorageType(params.storage),
        num_replicas=stream_replicas(client, params),
        max_age=params.max_age,
        max_bytes=params.max_bytes,
    )
    info = await _retrying(lambda: js.add_stream(config), f"creating stream {name}")
    consumer = api.ConsumerConfig(
        durable_name=CONSUMER,
        ack_policy=api.AckPolicy.EXPLICIT,
        ack_wait=params.ack_wait,
        max_ack_pending=params.max_ack_pending,
        deliver_policy=api.DeliverPolicy.ALL,
    )
    await _retrying(lambda: js.add_consumer(name, consumer), f"creating consumer of {name}")
    return info


def prepare(endpoints: Endpoints, params: NatsParams, destination: Destination) -> None:
    async def run() -> None:
        client = await open_connection(endpoints, [f"nats://{h}" for h in endpoints.hosts])
        try:
            await _create(client.jetstream(timeout=10), client, params, stream_name(destination))
        finally:
            await client.close()

    asyncio.run(run())


def describe(endpoints: Endpoints, params: NatsParams) -> dict[str, Any]:
    """Server version and the replicas / placement of a stream created like ``prepare``."""

    async def run() -> dict[str, Any]:
        client = await open_connection(endpoints, [f"nats://{h}" for h in endpoints.hosts])
        probe = f"bb_describe_{uuid.uuid4().hex[:12]}"
        try:
            js = client.jetstream(timeout=10)
            await _create(js, client, params, probe)
            try:
                stream = await _retrying(lambda: js.stream_info(probe), f"reading stream {probe}")
                consumer = await _retrying(
                    lambda: js.consumer_info(probe, CONSUMER), f"reading consumer of {probe}"
                )
            finally:
                with contextlib.suppress(Exception):
                    await js.delete_stream(probe)
            server = client._server_info
            cluster = stream.cluster
            followers = (cluster.replicas or []) if cluster else []
            peers = [cluster.leader] if cluster and cluster.leader else []
            peers += [r.name for r in followers if r.name]
            if not peers:  # a server outside a cluster holds the only copy itself
                peers = [str(server.get("server_name", ""))]
            return {
                "version": server.get("version"),
                "server_name": server.get("server_name"),
                "cluster_name": server.get("cluster") or "",
                "cluster_size": cluster_size(client),
                "replicas": stream.config.num_replicas,
                "stream_peers": sorted(peers),
                "stream_leader": cluster.leader if cluster else None,
                "stream_followers_current": sum(1 for r in followers if r.current),
                "storage": _value(stream.config.storage),
                "retention": _value(stream.config.retention),
                "consumer_ack_policy": _value(consumer.config.ack_policy),
                "consumer_ack_wait_s": consumer.config.ack_wait,
                "consumer_max_ack_pending": consumer.config.max_ack_pending,
                "publish": "waits for every message's PubAck",
                "auth": credentials.auth(endpoints.get("password")),
            }
        finally:
            await client.close()

    return asyncio.run(run())


def _value(item: Any) -> Any:
    return getattr(item, "value", item)
