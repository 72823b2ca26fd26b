"""The ActiveMQ Classic client side over STOMP: worker connections, queues, settings read-back.

Sends are ``persistent:true`` SEND frames, each with a receipt: ActiveMQ Classic handles a
SEND that asks for a receipt as a synchronous producer send and answers only once the
message is written to KahaDB (synced, ``journalDiskSyncStrategy=always``). Receivers
subscribe with ``ack:client-individual`` and ``activemq.prefetchSize``; unacknowledged
messages return to the queue (flagged ``redelivered``) when the consumer disconnects.

``describe`` reads the version from the STOMP CONNECTED frame and the store settings from
the broker's statistics plugin (``ActiveMQ.Statistics.Broker``, answered as a JSON map).

Endpoints: ``hosts`` holds the one STOMP address; ``extra`` may hold ``user`` and
``password``.
"""

from __future__ import annotations

import json
import queue
import uuid
from typing import TYPE_CHECKING, Any

from brokers.base import Destination, Endpoints
from brokers.stomp import StompAdapter, StompConnection, StompFailure, StompOptions, server_header

if TYPE_CHECKING:
    from brokers.activemq.params import ActiveMQParams

STATISTICS = "/queue/ActiveMQ.Statistics.Broker"


def queue_destination(name: str) -> str:
    return f"/queue/{name}"


def stomp_options(
    endpoints: Endpoints,
    destination: str,
    prefetch: int = 100,
    send_timeout: float = 30.0,
    send_headers: dict[str, str] | None = None,
) -> StompOptions:
    return StompOptions(
        hosts=tuple(endpoints.addresses()),
        destination=destination,
        user=endpoints.get("user", "brokerbench"),
        password=endpoints.get("password", "brokerbench"),
        send_headers=send_headers if send_headers is not None else {"persistent": "true"},
        subscribe_headers={"activemq.prefetchSize": str(prefetch)},
        send_timeout=send_timeout,
    )


def connect(endpoints: Endpoints, params: ActiveMQParams, destination: Destination) -> StompAdapter:
    return StompAdapter(
        stomp_options(
            endpoints, queue_destination(destination.name), params.prefetch, params.send_timeout
        )
    )


def prepare(endpoints: Endpoints, params: ActiveMQParams, destination: Destination) -> None:
    """Create the (persistent) queue by subscribing to it once."""
    connection = StompConnection(stomp_options(endpoints, queue_destination(destination.name)))
    try:
        subscription = f"prepare-{uuid.uuid4().hex[:8]}"
        connection.subscribe(subscription)
        connection.unsubscribe(subscription)
    finally:
        connection.close()


def broker_statistics(endpoints: Endpoints, timeout: float = 15.0) -> dict[str, Any]:
    """The statistics plugin's answer: store, memory and connector settings of the broker."""
    reply_to = f"/temp-queue/brokerbench-{uuid.uuid4().hex[:8]}"
    options = stomp_options(endpoints, STATISTICS, send_headers={"reply-to": reply_to})
    connection = StompConnection(options)
    try:
        connection.conn.subscribe(
            reply_to, id="statistics", ack="auto", headers={"transformation": "jms-map-json"}
        )
        connection.send_confirmed([b""])
        try:
            frame = connection.listener.messages.get(timeout=timeout)
        except queue.Empty:
            raise StompFailure(
                f"ActiveMQ at {endpoints.hosts[0]} did not answer on {STATISTICS} "
                f"within {timeout:.0f} s (is the statisticsBrokerPlugin configured?)"
            ) from None
        return parse_map_json(frame.body)
    finally:
        connection.close()


def parse_map_json(body: bytes | str) -> dict[str, Any]:
    """A JMS MapMessage in ActiveMQ's ``jms-map-json`` form → a plain dict."""
    entries = json.loads(body)["map"]["entry"]
    if isinstance(entries, dict):
        entries = [entries]
    out: dict[str, Any] = {}
    for entry in entries:
        key = entry["string"]
        if isinstance(key, list):  # a string value: ["key", "value"]
            out[str(key[0])] = key[1] if len(key) > 1 else ""
        else:
            out[str(key)] = next((v for k, v in entry.items() if k != "string"), None)
    return out


def describe(endpoints: Endpoints, params: ActiveMQParams) -> dict[str, Any]:
    """Version (CONNECTED frame) and store settings (statistics plugin), read back."""
    server = server_header(stomp_options(endpoints, STATISTICS))
    stats = broker_statistics(endpoints)
    return {
        "stomp_server": server,
        "version": server.partition("/")[2] or server,
        "broker_name": stats.get("brokerName"),
        "data_directory": stats.get("dataDirectory"),
        "store_limit_bytes": stats.get("storeLimit"),
        "store_usage_bytes": stats.get("storeUsage"),
        "memory_limit_bytes": stats.get("memoryLimit"),
        "replicated": False,
        "replication": "none (single broker)",
        "persistent_messages": True,
        "ack_mode": "client-individual",
        "prefetch": params.prefetch,
        "confirmed_sends": "STOMP receipt per message",
    }
