"""RocketMQ administration over the remoting protocol: the topic and the consumer group of
a sweep point on every master (``prepare``), and the version, broker roles, flush types
and replication state read back from the brokers (``describe``)."""

from __future__ import annotations

import re
import time
from typing import Any

from brokers.base import Destination, Endpoints
from brokers.errors import BrokerError
from brokers.rocketmq import remoting
from brokers.rocketmq.params import RocketMQParams

NAMESRV_PORT = 9876
GET_ROUTEINFO_BY_TOPIC = 105


def namesrv_address(endpoints: Endpoints) -> str:
    """The ``namesrv`` extra, else port 9876 on the first proxy host."""
    given = endpoints.get("namesrv")
    if given:
        return given.split(";")[0]
    host, _ = endpoints.first
    return f"{host}:{NAMESRV_PORT}"


def topic_name(destination: Destination) -> str:
    return re.sub(r"[^A-Za-z0-9_-]", "_", destination.name)[:127]


def group_name(destination: Destination) -> str:
    """The consumer group of a sweep point (clustering mode: each message to one receiver)."""
    return f"{topic_name(destination)}_receivers"[:120]


def masters(namesrv: str) -> dict[str, str]:
    """Broker name → master address."""
    found = {name: ids[0] for name, ids in remoting.cluster_info(namesrv).items() if 0 in ids}
    if not found:
        raise BrokerError(f"RocketMQ name server {namesrv} knows no master broker")
    return found


def prepare(endpoints: Endpoints, params: RocketMQParams, destination: Destination) -> None:
    """Create the topic and its consumer group on every master, then wait for the route; a
    keyed destination's are a FIFO topic and a FIFO consumer group (keys are message groups)."""
    namesrv = namesrv_address(endpoints)
    topic = topic_name(destination)
    for address in masters(namesrv).values():
        remoting.create_topic(address, topic, params.queues, fifo=destination.keyed)
        remoting.create_consumer_group(address, group_name(destination), orderly=destination.keyed)
    deadline = time.monotonic() + 30
    while True:
        try:
            remoting.call(namesrv, GET_ROUTEINFO_BY_TOPIC, {"topic": topic})
            return
        except BrokerError:
            if time.monotonic() > deadline:
                raise BrokerError(
                    f"RocketMQ name server {namesrv} has no route for {topic} after 30 s"
                ) from None
            time.sleep(0.5)


def _version(desc: str) -> str:
    """``V5_3_3`` → ``5.3.3``."""
    return desc.lstrip("V").replace("_", ".") if desc else ""


def describe(endpoints: Endpoints, params: RocketMQParams) -> dict[str, Any]:
    namesrv = namesrv_address(endpoints)
    brokers: list[dict[str, Any]] = []
    versions: set[str] = set()
    clusters: set[str] = set()
    in_sync: dict[str, int] = {}
    for name, ids in sorted(remoting.cluster_info(namesrv).items()):
        for broker_id, address in sorted(ids.items()):
            config = remoting.broker_config(address)
            runtime = remoting.broker_runtime(address)
            versions.add(_version(runtime.get("brokerVersionDesc", "")))
            clusters.add(config.get("brokerClusterName", ""))
            brokers.append(
                {
                    "name": name,
                    "id": broker_id,
                    "address": address,
                    "brokerRole": config.get("brokerRole", ""),
                    "flushDiskType": config.get("flushDiskType", ""),
                    "inSyncReplicas": config.get("inSyncReplicas", ""),
                }
            )
            if broker_id == 0:
                in_sync[name] = int(remoting.ha_status(address).get("inSyncSlaveNums", 0))
    return {
        "version": ", ".join(sorted(versions)),
        "cluster": ", ".join(sorted(clusters)),
        "masters": sum(1 for b in brokers if b["id"] == 0),
        "slaves": sum(1 for b in brokers if b["id"] != 0),
        "broker_roles": sorted({b["brokerRole"] for b in brokers}),
        "flush_disk_types": sorted({b["flushDiskType"] for b in brokers}),
        "in_sync_slaves": in_sync,
        "brokers": brokers,
        "queues_per_master": params.queues,
        "consumer_group_mode": "clustering",
        "invisible_duration_s": params.invisible_duration,
    }
