"""Topics and read-back settings of Kafka-protocol clusters (Kafka, KMQ, Redpanda).

``prepare`` creates a sweep point's topic with the safe settings (docs/measurement.md §6) and waits
until every partition has a leader; ``describe`` reads back from the cluster what a run
really got: the version the brokers announce, the brokers' durability defaults, and the
replication factor, in-sync replicas and topic configs of the topics prepared last.
"""

from __future__ import annotations

import contextlib
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from brokers.base import Destination, Endpoints
from brokers.errors import BrokerError
from brokers.kafka import client
from brokers.kafka.params import KafkaClientParams, KafkaParams, min_insync_for, replication_for

#: Broker settings the run context records (where the cluster has them).
BROKER_KEYS = (
    "default.replication.factor",
    "min.insync.replicas",
    "unclean.leader.election.enable",
    "log.flush.interval.messages",
    "log.flush.interval.ms",
)
#: Topic settings the run context records.
TOPIC_KEYS = (
    "min.insync.replicas",
    "flush.messages",
    "unclean.leader.election.enable",
    "write.caching",
)

#: How long topic creation retries while a cluster is still settling.
SETTLE_TIMEOUT = 60.0

#: Topics prepared by this process, per cluster, for ``describe``.
_prepared: dict[tuple[str, ...], tuple[str, ...]] = {}


def broker_count(admin: Any) -> int:
    return len(admin.describe_cluster()["brokers"])


def transient(exc: BaseException) -> bool:
    """Errors of a cluster still settling (brokers registering, leaders moving); too few
    brokers for the replication factor is one while the named brokers register."""
    from kafka import errors

    return isinstance(
        exc,
        errors.RetriableError | errors.UnknownBrokerIdError | errors.InvalidReplicationFactorError,
    )


def create_topics(
    endpoints: Endpoints,
    params: KafkaClientParams,
    names: Sequence[str],
    configs: Mapping[str, str] | None = None,
    replication: int | None = None,
    timeout: float = SETTLE_TIMEOUT,
) -> None:
    """Create ``names`` (recreated when they exist) and wait for their partition leaders.

    Transient errors are retried with a fresh admin client until ``timeout``.
    """
    from kafka.errors import KafkaError

    deadline = time.monotonic() + timeout
    while True:
        try:
            _create_once(endpoints, params, names, configs, replication)
            break
        except KafkaError as exc:
            if transient(exc) and time.monotonic() < deadline:
                time.sleep(1.0)
                continue
            raise BrokerError(
                f"creating topic {', '.join(names)} on {client.where(endpoints)} failed: "
                f"{type(exc).__name__}: {exc}"
            ) from None
    _prepared[endpoints.hosts] = tuple(names)


def _create_once(
    endpoints: Endpoints,
    params: KafkaClientParams,
    names: Sequence[str],
    configs: Mapping[str, str] | None,
    replication: int | None,
) -> None:
    from kafka.errors import TopicAlreadyExistsError

    admin = client.admin(endpoints)
    try:
        rf = replication or replication_for(params, broker_count(admin))
        spec = {
            name: {
                "num_partitions": params.partitions,
                "replication_factor": rf,
                "configs": dict(configs or {}),
            }
            for name in names
        }
        try:
            admin.create_topics(spec, timeout_ms=60_000, wait_for_metadata=True)
        except TopicAlreadyExistsError:
            _delete(admin, names)
            admin.create_topics(spec, timeout_ms=60_000, wait_for_metadata=True)
        _wait_for_leaders(admin, names, params.partitions)
    finally:
        admin.close()


def _delete(admin: Any, names: Sequence[str]) -> None:
    admin.delete_topics(list(names), timeout_ms=30_000)
    deadline = time.monotonic() + 60
    while set(names) & set(admin.list_topics()):
        if time.monotonic() > deadline:
            raise BrokerError(f"topic {', '.join(names)} still exists after deleting it")
        time.sleep(0.5)


def _wait_for_leaders(admin: Any, names: Sequence[str], partitions: int) -> None:
    deadline = time.monotonic() + 60
    while True:
        topics = admin.describe_topics(list(names))
        ready = all(
            len(t["partitions"]) == partitions and all(p["leader_id"] >= 0 for p in t["partitions"])
            for t in topics
        )
        if ready:
            return
        if time.monotonic() > deadline:
            raise BrokerError(f"topic {', '.join(names)} has partitions without a leader")
        time.sleep(0.5)


def partition_leader(endpoints: Endpoints, topic: str, timeout: float = 10.0) -> int:
    """The node id of the broker leading partition 0 of ``topic`` now (for faults)."""
    admin = client.admin(endpoints, timeout=timeout)
    try:
        (described,) = admin.describe_topics([topic])
    finally:
        admin.close()
    leaders = {p["partition_index"]: p["leader_id"] for p in described["partitions"]}
    if leaders.get(0, -1) < 0:
        raise BrokerError(f"partition 0 of topic {topic} has no leader")
    return int(leaders[0])


def kafka_topic_configs(params: KafkaParams, replication: int) -> dict[str, str]:
    configs = {"min.insync.replicas": str(min_insync_for(params, replication))}
    if params.log_flush_interval_messages is not None:
        configs["flush.messages"] = str(params.log_flush_interval_messages)
    if params.retention is not None:
        configs["retention.ms"] = str(round(params.retention * 1000))
    if params.retention_bytes is not None:
        configs["retention.bytes"] = str(params.retention_bytes)
    if params.segment_bytes is not None:
        configs["segment.bytes"] = str(params.segment_bytes)
    return configs


def prepare(endpoints: Endpoints, params: KafkaParams, destination: Destination) -> None:
    prepare_topics(endpoints, params, [destination.name])


def prepare_topics(endpoints: Endpoints, params: KafkaParams, names: Sequence[str]) -> None:
    """Kafka's topics: replicated, ``min.insync.replicas``, optional ``flush.messages`` and
    retention (``retention.ms``, ``retention.bytes``, ``segment.bytes``)."""
    admin = client.admin(endpoints)
    try:
        # Every broker the endpoints name counts, also one not registered (yet) or briefly
        # missing from the metadata of a loaded cluster: replication never silently drops.
        rf = replication_for(params, max(broker_count(admin), len(endpoints.hosts)))
    finally:
        admin.close()
    create_topics(endpoints, params, names, kafka_topic_configs(params, rf), replication=rf)


def _all_configs(admin: Any, kind: str, name: str) -> dict[str, Any]:
    from kafka.admin import ConfigResource

    found = admin.describe_configs([ConfigResource(kind, name)], config_filter="all")
    entries: dict[str, Any] = found.get(kind.lower(), {}).get(name, {})
    return {key: entry.get("value") for key, entry in entries.items()}


def _configs(admin: Any, kind: str, name: str, keys: Sequence[str]) -> dict[str, Any]:
    entries = _all_configs(admin, kind, name)
    return {key: entries[key] for key in keys if key in entries}


def _topic_settings(admin: Any, name: str, timeout: float = 30.0) -> dict[str, Any]:
    # A broker that has not caught up with the metadata log yet reports no partitions
    # and no configs for a topic just created: ask again until it knows.
    deadline = time.monotonic() + timeout
    while True:
        (topic,) = admin.describe_topics([name])
        partitions = topic["partitions"]
        every = _all_configs(admin, "TOPIC", name)
        if partitions and all(p["leader_id"] >= 0 for p in partitions) and every:
            break
        if time.monotonic() > deadline:
            raise BrokerError(f"topic {name}: the cluster reports no partitions or settings")
        time.sleep(0.5)
    replicas = [len(p["replica_nodes"]) for p in partitions]
    in_sync = [len(p["isr_nodes"]) for p in partitions]
    return {
        "name": name,
        "partitions": len(partitions),
        "replication_factor": min(replicas),
        "in_sync_replicas_min": min(in_sync),
        "configs": {key: every[key] for key in TOPIC_KEYS if key in every},
    }


def _version(admin: Any, broker: int) -> str:
    version = admin.get_broker_version_data(broker).broker_version
    return ".".join(str(part) for part in version) if version else "unknown"


Prepare = Callable[[Endpoints, Any, Destination], None]


def describe(
    endpoints: Endpoints, params: KafkaClientParams, probe: Prepare | None = None
) -> dict[str, Any]:
    """Version, brokers and durability settings as the cluster reports them.

    Topic settings are read from the topics this process prepared last; before any
    (the runner describes a run before its first sweep point), ``probe`` creates a
    throw-away topic exactly as a sweep point's, which is read back and deleted.
    """
    names = _prepared.get(endpoints.hosts, ())
    probed: tuple[str, ...] = ()
    if not names and probe is not None:
        probe(endpoints, params, Destination(f"bb_describe_{secrets.token_hex(4)}"))
        names = probed = _prepared.pop(endpoints.hosts, ())
    admin = client.admin(endpoints)
    try:
        cluster = admin.describe_cluster()
        brokers = sorted(b["broker_id"] for b in cluster["brokers"])
        result: dict[str, Any] = {
            "version": _version(admin, brokers[0]),
            "version_source": "inferred by kafka-python from the API versions the brokers announce",
            "cluster_id": cluster.get("cluster_id"),
            "brokers": len(brokers),
            "broker_configs": {
                str(b): _configs(admin, "BROKER", str(b), BROKER_KEYS) for b in brokers
            },
            "producer_acks": params.acks,
            "commit_interval_s": params.commit_interval,
        }
        if endpoints.get("kafka_version"):
            result["local_distribution"] = f"kafka_2.13-{endpoints.get('kafka_version')} jars"
        if names:
            result["topics"] = [_topic_settings(admin, name) for name in names]
            result["topic_settings_from"] = (
                "a probe topic created like every sweep point's"
                if probed
                else "the last prepared topic"
            )
            first = result["topics"][0]
            result["replication_factor"] = first["replication_factor"]
            result["min_insync_replicas"] = first["configs"].get("min.insync.replicas")
        return result
    finally:
        if probed:
            with contextlib.suppress(Exception):
                admin.delete_topics(list(probed), timeout_ms=30_000)
        admin.close()
