"""The MongoDB queue adapter (pymongo, blocking): a collection of messages with a
``next_delivery`` time.

``send`` is one ``insert_many`` with the configured write concern (``w = "majority"``,
journaled: it returns once a majority of the replica set has the batch in its journal;
``w = 1`` is the asynchronous variant). ``receive`` repeats, up to ``max_n`` times, a
``find_one_and_update`` of the message whose ``next_delivery`` passed earliest, moving
its ``next_delivery`` a visibility timeout into the future and counting the delivery;
``ack`` deletes the messages by ``_id``.

Endpoints: every ``host:port`` of the replica set (or the one server). Extras:
``replica_set`` (the set's name, makes pymongo discover the primary), ``database``
(default ``brokerbench``), ``username`` / ``password``.

Against FerretDB (the local stand-in, recognised by ``buildInfo.ferretdbVersion``) the
sort is left out: FerretDB v1 sorts ``findAndModify`` candidates in memory over the whole
collection (8 receives/s with a 3 600-message backlog), while without it documents come
back in storage order — oldest first for messages not yet delivered.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from brokers.base import Adapter, Destination, Endpoints, Received
from brokers.errors import BrokerConnectionError

if TYPE_CHECKING:
    from bson import ObjectId
    from pymongo import MongoClient

    from brokers.mongodb.params import MongoParams

DEFAULT_DATABASE = "brokerbench"
#: Server selection (and so "unreachable") gives up after this long.
SELECTION_TIMEOUT_MS = 10_000
SORT = [("next_delivery", 1)]


def mongo_client(endpoints: Endpoints, params: MongoParams | None = None) -> MongoClient[Any]:
    """A client for the endpoints; with ``params``, writes use their write concern."""
    from pymongo import MongoClient

    options: dict[str, Any] = {
        "serverSelectionTimeoutMS": SELECTION_TIMEOUT_MS,
        "connectTimeoutMS": 5_000,
        "maxPoolSize": 4,
        "appname": "brokerbench",
    }
    replica_set = endpoints.get("replica_set")
    if replica_set:
        options["replicaSet"] = replica_set
    elif len(endpoints.hosts) == 1:
        options["directConnection"] = True
    if endpoints.get("username"):
        options["username"] = endpoints.get("username")
        options["password"] = endpoints.get("password")
    if params is not None:
        options["w"] = params.w
        options["journal"] = params.journal
        options["wTimeoutMS"] = params.wtimeout_ms
    return MongoClient(list(endpoints.hosts), **options)


def _unreachable(endpoints: Endpoints, exc: Exception) -> BrokerConnectionError:
    host, port = endpoints.first
    text = str(exc).strip()
    reason = re.split(r" \(configured timeouts|, Timeout:", text)[0].splitlines()[0] if text else ""
    reason = reason or "no answer"
    return BrokerConnectionError(f"cannot reach MongoDB at {host}:{port}: {reason}")


def _admin(client: MongoClient[Any], endpoints: Endpoints, command: str) -> dict[str, Any]:
    from pymongo.errors import ConnectionFailure

    try:
        return dict(client.admin.command(command))
    except ConnectionFailure as exc:
        raise _unreachable(endpoints, exc) from None


def database_name(endpoints: Endpoints) -> str:
    return endpoints.get("database", DEFAULT_DATABASE)


def is_ferretdb(build_info: dict[str, Any]) -> bool:
    return "ferretdbVersion" in build_info


def prepare(endpoints: Endpoints, params: MongoParams, destination: Destination) -> None:
    """A fresh collection for the sweep point, indexed on ``next_delivery``."""
    with mongo_client(endpoints, params) as client:
        _admin(client, endpoints, "ping")
        db = client[database_name(endpoints)]
        db.drop_collection(destination.name)
        db.create_collection(destination.name)
        db[destination.name].create_index(SORT, name="next_delivery")


def describe(endpoints: Endpoints, params: MongoParams) -> dict[str, Any]:
    """Server version, replica-set members and the write concern in force, read back."""
    from pymongo.errors import OperationFailure

    with mongo_client(endpoints) as client:
        build = _admin(client, endpoints, "buildInfo")
        hello = _admin(client, endpoints, "hello")

        def optional(command: str) -> dict[str, Any]:
            try:
                return dict(client.admin.command(command))
            except OperationFailure:
                return {}

        status = optional("replSetGetStatus")
        config = optional("replSetGetConfig").get("config", {})
        defaults = optional("getDefaultRWConcern")
    requested = {"w": params.w, "j": params.journal, "wtimeout_ms": params.wtimeout_ms}
    info: dict[str, Any] = {
        "version": build.get("version", "?"),
        "replica_set": hello.get("setName", ""),
        "members": [
            {"name": m.get("name"), "state": m.get("stateStr"), "health": m.get("health")}
            for m in status.get("members", [])
        ]
        or list(hello.get("hosts", [])),
        "write_concern_requested": requested,
    }
    if defaults:
        info["default_write_concern"] = defaults.get("defaultWriteConcern", {})
    if config:
        info["write_concern_majority_journal_default"] = config.get(
            "writeConcernMajorityJournalDefault"
        )
    if is_ferretdb(build):
        info["version"] = (
            f"FerretDB {build['ferretdbVersion']} (MongoDB {build.get('version')} wire protocol)"
        )
        info["write_concern_in_force"] = (
            "not enforced: FerretDB acknowledges a write once its single PostgreSQL "
            "backend has committed it (flushed to disk); no replication"
        )
    elif info["replica_set"]:
        voting = [m for m in config.get("members", []) if m.get("votes", 1)] or info["members"]
        majority = len(voting) // 2 + 1
        w = params.w if params.w != "majority" else f"majority ({majority} of {len(voting)})"
        info["write_concern_in_force"] = (
            f"w={w}, j={str(params.journal).lower()}, set by the client on every write"
        )
    else:
        info["write_concern_in_force"] = (
            f"w={params.w}, j={str(params.journal).lower()} on a standalone server "
            "(no replication: majority is the server itself)"
        )
    return info


class MongoAdapter(Adapter["ObjectId"]):
    """One worker's client; a received message's receipt is its document's ``_id``."""

    def __init__(self, endpoints: Endpoints, params: MongoParams, destination: Destination):
        from pymongo import ReturnDocument

        self.params = params
        self.client = mongo_client(endpoints, params)
        try:
            build = _admin(self.client, endpoints, "buildInfo")
        except BaseException:
            self.client.close()
            raise
        self.collection = self.client[database_name(endpoints)][destination.name]
        self.sort: list[tuple[str, int]] | None = None if is_ferretdb(build) else SORT
        self.visibility = timedelta(seconds=params.visibility_timeout)
        self.after = ReturnDocument.AFTER

    def send(self, batch: Sequence[bytes]) -> None:
        from bson import Binary

        now = datetime.now(UTC)
        self.collection.insert_many(
            [{"body": Binary(body), "next_delivery": now, "deliveries": 0} for body in batch],
            ordered=True,
        )

    def receive(self, max_n: int) -> list[Received[ObjectId]]:
        received: list[Received[ObjectId]] = []
        for _ in range(max_n):
            now = datetime.now(UTC)
            doc = self.collection.find_one_and_update(
                {"next_delivery": {"$lte": now}},
                {"$set": {"next_delivery": now + self.visibility}, "$inc": {"deliveries": 1}},
                sort=self.sort,
                return_document=self.after,
            )
            if doc is None:
                break
            received.append(
                Received(
                    body=bytes(doc["body"]), receipt=doc["_id"], redelivered=doc["deliveries"] > 1
                )
            )
        if not received:
            time.sleep(self.params.poll_interval)
        return received

    def ack(self, receipts: Sequence[ObjectId]) -> None:
        self.collection.delete_many({"_id": {"$in": list(receipts)}})

    def close(self) -> None:
        self.client.close()


def connect(endpoints: Endpoints, params: MongoParams, destination: Destination) -> MongoAdapter:
    return MongoAdapter(endpoints, params, destination)
