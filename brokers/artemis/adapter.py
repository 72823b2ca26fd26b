"""The ActiveMQ Artemis client side: worker connections, queue creation, settings read-back.

Client protocol: **STOMP 1.2** (stomp.py), chosen over AMQP 1.0 (python-qpid-proton)
because it gives the confirmation the safe configuration needs with a library the project
already ships: Artemis sends the RECEIPT of a ``persistent:true`` SEND only from
``afterCompleteOperations``, i.e. once the message is synced to the journal and — in a
replicated pair — confirmed by the backup. Each SEND carries a receipt header and
``send`` waits for every receipt of the batch. Receivers subscribe with
``ack:client-individual`` and a bounded ``consumer-window-size``; an unacknowledged
message returns to the queue when its consumer's connection closes. (AMQP 1.0 would give
the same guarantee through settled dispositions, but needs an extra native client and an
event-loop wrapper per worker, for no gain in what is measured.)

Endpoints: ``hosts`` are the STOMP/CORE acceptors of the live brokers; ``extra`` holds
``user``, ``password``, ``backups`` (the backup acceptor of each live, same order, tried
after its live), ``jolokia`` / ``jolokia_backups`` (management ``host:port`` of the lives
/ backups). Without ``jolokia``, queues are auto-created by the first SEND/SUBSCRIBE and
``describe`` reports only what the STOMP CONNECTED frame says.
"""

from __future__ import annotations

import logging
import random
from typing import TYPE_CHECKING, Any

from brokers.artemis.jolokia import Jolokia
from brokers.connection import Destination, Endpoints, split_host_port
from brokers.stomp import StompAdapter, StompOptions, server_header

if TYPE_CHECKING:
    from brokers.artemis.params import ArtemisParams


def _list(endpoints: Endpoints, key: str) -> list[str]:
    return [item for item in endpoints.get(key).split(",") if item]


def _credentials(endpoints: Endpoints) -> tuple[str, str]:
    return endpoints.get("user", "brokerbench"), endpoints.get("password", "brokerbench")


def stomp_options(
    endpoints: Endpoints, params: ArtemisParams, destination: str, live: int = 0
) -> StompOptions:
    """Options for a connection to live broker ``live`` (its backup second)."""
    user, password = _credentials(endpoints)
    backups = _list(endpoints, "backups")
    hosts = [endpoints.hosts[live]] + ([backups[live]] if live < len(backups) else [])
    return StompOptions(
        hosts=tuple(split_host_port(h) for h in hosts),
        destination=destination,
        user=user,
        password=password,
        send_headers={"persistent": "true", "destination-type": "ANYCAST"},
        subscribe_headers={
            "subscription-type": "ANYCAST",
            "consumer-window-size": str(params.consumer_window_size),
        },
        send_timeout=params.send_timeout,
    )


def connect(endpoints: Endpoints, params: ArtemisParams, destination: Destination) -> StompAdapter:
    """One worker's client, on a live broker chosen at random (spreads workers over pairs)."""
    # stomp.py logs every refused connection attempt; through a failover those are expected,
    # and a connection that cannot be made at all fails the call with its own message.
    logging.getLogger("stomp.py").setLevel(logging.ERROR)
    live = random.randrange(len(endpoints.hosts))
    return StompAdapter(stomp_options(endpoints, params, destination.name, live))


def _managers(endpoints: Endpoints, key: str) -> list[Jolokia]:
    user, password = _credentials(endpoints)
    return [Jolokia(address, user, password) for address in _list(endpoints, key)]


def prepare(endpoints: Endpoints, params: ArtemisParams, destination: Destination) -> None:
    """Create the durable anycast queue on every live broker."""
    managers = _managers(endpoints, "jolokia")
    for manager in managers:
        manager.create_anycast_queue(destination.name)
    if not managers:  # no management API: check that the broker answers at all
        server_header(stomp_options(endpoints, params, destination.name))


def describe(endpoints: Endpoints, params: ArtemisParams) -> dict[str, Any]:
    """Version, HA policy and replication state read back from every broker."""
    server = server_header(stomp_options(endpoints, params, "brokerbench.describe"))
    info: dict[str, Any] = {"stomp_server": server, "version": server.split(" ")[0]}
    nodes: dict[str, dict[str, Any]] = {}
    for manager in _managers(endpoints, "jolokia") + _managers(endpoints, "jolokia_backups"):
        attributes = manager.broker()
        nodes[str(attributes.get("Name") or manager.address)] = {
            "address": manager.address,
            "version": attributes.get("Version"),
            "ha_policy": attributes.get("HAPolicy"),
            "backup": attributes.get("Backup"),
            "active": attributes.get("Active"),
            "replica_sync": attributes.get("ReplicaSync"),
            "node_id": attributes.get("NodeID"),
            "persistence_enabled": attributes.get("PersistenceEnabled"),
            "journal_type": attributes.get("JournalType"),
            "journal_sync_non_transactional": attributes.get("JournalSyncNonTransactional"),
        }
    if nodes:
        lives = [n for n in nodes.values() if not n["backup"]]
        backups = [n for n in nodes.values() if n["backup"]]
        info.update(
            version=next(iter(nodes.values()))["version"],
            nodes=nodes,
            ha_policies=sorted({str(n["ha_policy"]) for n in nodes.values()}),
            live_brokers=len(lives),
            backup_brokers=len(backups),
            replicated=bool(backups) and all(n["replica_sync"] for n in lives),
            persistence_enabled=all(n["persistence_enabled"] for n in nodes.values()),
            journal_sync_non_transactional=all(
                n["journal_sync_non_transactional"] for n in nodes.values()
            ),
        )
    info.update(
        persistent_messages=True,
        ack_mode="client-individual",
        consumer_window_size=params.consumer_window_size,
        confirmed_sends="STOMP receipt per message",
    )
    return info
