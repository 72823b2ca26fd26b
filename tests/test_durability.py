"""The durability line: what each system derives from the settings its servers reported,
and where a reader sees it (the terminal table, the report, ``compare``)."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from analysis.columns import SUMMARY_COLUMNS
from analysis.compare import compare_runs, text_report
from analysis.console import run_summary
from analysis.report import write_html
from brokers import registry
from brokers.durability import Durability
from workload.model.record import RunContext

POSTGRES = registry.get("postgresql")
REDIS = registry.get("redis")

STANDBYS = [
    {"name": "s1", "state": "streaming", "sync_state": "quorum"},
    {"name": "s2", "state": "streaming", "sync_state": "quorum"},
]


def postgres(settings: dict[str, str], standbys: list[dict[str, str]], **params: Any) -> str:
    described = {"version": "16.4", "settings": settings, "standbys": standbys}
    return POSTGRES.durability(described, POSTGRES.params_model(**params)).line  # type: ignore[misc]


def redis(replicas: int, appendfsync: str = "everysec", **params: Any) -> str:
    described = {
        "version": "7.2.4",
        "role": "master",
        "connected_replicas": replicas,
        "cluster_shards": None,
        "settings": {"appendonly": "yes", "appendfsync": appendfsync},
    }
    return REDIS.durability(described, REDIS.params_model(**params)).line  # type: ignore[misc]


SINGLE = {"synchronous_commit": "on", "synchronous_standby_names": "", "fsync": "on"}
CLUSTER = {
    "synchronous_commit": "remote_write",
    "synchronous_standby_names": "ANY 1 (s1, s2)",
    "fsync": "on",
}


def test_a_single_postgresql_asked_for_synchronous_replication_is_said_not_replicated() -> None:
    assert postgres(SINGLE, []) == (
        "single node, not replicated (replication=synchronous, synchronous_standby_names "
        "empty); fsync per commit; confirmed = committed locally"
    )


def test_postgresql_standbys_synchronous_or_not() -> None:
    assert postgres(CLUSTER, STANDBYS) == (
        "replicated synchronously ('ANY 1 (s1, s2)' of 2 standbys streaming); fsync per "
        "commit; confirmed = committed locally and written (not fsynced) by a synchronous standby"
    )
    # replication = "asynchronous": the workers' commits are local.
    assert postgres(CLUSTER, STANDBYS, replication="asynchronous") == (
        "replicated asynchronously to 2 standbys: a confirmed message can be lost on a "
        "fail-over; fsync per commit; confirmed = committed locally"
    )
    assert "fsync off: a confirmed message can be lost on a crash" in postgres(
        {**SINGLE, "fsync": "off"}, []
    )
    # asynchronous_commit: the workers' commits return before their WAL is flushed.
    assert postgres(SINGLE, [], asynchronous_commit=True).endswith(
        "commit returns before its WAL is fsynced (synchronous_commit=off): a confirmed "
        "message can be lost on a crash; confirmed = accepted by the primary"
    )


def test_redis_says_what_appendfsync_and_asynchronous_replication_cost() -> None:
    assert redis(0) == (
        "single node, not replicated; fsync every second (appendfsync everysec): a confirmed "
        "message can be lost on a crash; confirmed = executed by the master, in memory (AOF "
        "not yet fsynced)"
    )
    assert redis(2, "always", wait_replicas=1) == (
        "replicated to 2 replicas, each batch WAITs for 1; fsync per write (appendfsync "
        "always); confirmed = appended to the master's AOF and fsynced and received by 1 replica"
    )
    assert redis(2).startswith(
        "replicated asynchronously to 2 replicas: a confirmed message can be lost on a fail-over;"
    )


def line(system: str, described: dict[str, Any], **params: Any) -> str:
    """The durability line ``system`` derives from ``described`` and ``params``."""
    derive = registry.get(system).durability
    assert derive is not None
    return derive(described, registry.get(system).params_model(**params)).line


def test_every_system_derives_a_durability_line() -> None:
    assert [name for name, s in registry.systems().items() if s.durability is None] == []


#: Kafka's flush.messages when nothing sets it (Long.MAX_VALUE: never).
NEVER = "9223372036854775807"


def kafka_described(
    brokers: int, replicas: int, min_insync: int, flush: str = NEVER, **extra: Any
) -> dict[str, Any]:
    """What Kafka's ``describe`` reads back (brokers/kafka/admin.py), one topic per name."""
    topic_configs = {
        "min.insync.replicas": str(min_insync),
        "flush.messages": flush,
        "unclean.leader.election.enable": "false",
    }
    return {
        "version": "3.9",
        "brokers": brokers,
        "broker_configs": {
            str(b): {"min.insync.replicas": str(min_insync), "log.flush.interval.ms": None}
            for b in range(1, brokers + 1)
        },
        "producer_acks": extra.pop("acks", "all"),
        "topics": [
            {
                "name": name,
                "partitions": 8,
                "replication_factor": replicas,
                "in_sync_replicas_min": replicas,
                "configs": extra.pop("configs", topic_configs),
            }
            for name in extra.pop("names", ["t"])
        ],
        "replication_factor": replicas,
        "min_insync_replicas": str(min_insync),
    }


KAFKA_CLUSTER = (
    "replicated to 3, confirmed once all in-sync replicas (at least min.insync.replicas=2) "
    "have it; fsync left to the OS (log.flush.*): a confirmed message can be lost if the "
    "in-sync replicas crash together; confirmed = appended by every in-sync replica (at "
    "least 2), in the page cache"
)


def test_kafka_says_its_replicas_and_that_fsync_is_left_to_the_os() -> None:
    assert line("kafka", kafka_described(1, 1, 1)) == (
        "single node, not replicated; fsync left to the OS (log.flush.*): a confirmed "
        "message can be lost on a crash; confirmed = appended by the leader, in the page cache"
    )
    assert line("kafka", kafka_described(3, 3, 2)) == KAFKA_CLUSTER
    # kafka-flush-every-message: the topic's flush.messages = 1.
    flushed = kafka_described(3, 3, 2, flush="1")
    assert line("kafka", flushed, log_flush_interval_messages=1) == (
        "replicated to 3, confirmed once all in-sync replicas (at least min.insync.replicas=2) "
        "have it; fsync per append on every replica (flush.messages=1); confirmed = appended "
        "by every in-sync replica (at least 2), fsynced"
    )
    assert line("kafka", kafka_described(3, 3, 2, acks="1"), acks="1") == (
        "replicated asynchronously to 3 (acks=1: the leader alone confirms): a confirmed "
        "message can be lost on a fail-over; fsync left to the OS (log.flush.*): a confirmed "
        "message can be lost on a crash; confirmed = appended by the leader, in the page cache"
    )
    assert line("kafka", kafka_described(3, 3, 2, flush="1000")).startswith(
        "replicated to 3, confirmed once all in-sync replicas (at least min.insync.replicas=2) "
        "have it; fsync every 1000 messages (flush.messages), else left to the OS:"
    )
    unknown = kafka_described(3, 3, 2, configs={})
    assert "replicated to 3, min.insync.replicas not read back; fsync: not read back" in line(
        "kafka", unknown
    )


def test_kmq_reads_its_queue_and_markers_topics_as_kafka() -> None:
    both = kafka_described(3, 3, 2, names=["q", "q__markers"])
    assert line("kmq", both) == KAFKA_CLUSTER


def test_redpanda_fsyncs_every_batch_on_a_majority_without_write_caching() -> None:
    uncached = {"write.caching": "false"}
    assert line("redpanda", kafka_described(3, 3, 2, configs=uncached)) == (
        "replicated to 3 (Raft), confirmed once a majority (2) have it; fsync per batch "
        "before it is confirmed (write.caching=false); confirmed = written by a majority (2 "
        "of 3) of the replicas, fsynced"
    )
    assert line("redpanda", kafka_described(1, 1, 1, configs=uncached)) == (
        "single node, not replicated; fsync per batch before it is confirmed "
        "(write.caching=false); confirmed = written by the leader, fsynced"
    )
    cached = kafka_described(3, 3, 2, configs={"write.caching": "true"})
    assert "(write.caching=true): a confirmed message can be lost if a majority crash" in line(
        "redpanda", cached
    )
    assert line("redpanda", kafka_described(3, 3, 2, acks="1", configs=uncached)) == (
        "replicated asynchronously to 3 (acks=1: the leader alone confirms): a confirmed "
        "message can be lost on a fail-over; fsync in the background (acks=1): a confirmed "
        "message can be lost on a crash; confirmed = written by the leader, not yet fsynced"
    )


def rabbitmq_described(members: list[str] | str, queue_type: str = "quorum") -> dict[str, Any]:
    """What RabbitMQ's ``describe`` reads back (brokers/rabbitmq/adapter.py)."""
    described: dict[str, Any] = {
        "version": "3.13.7",
        "client_settings": {"delivery_mode": "persistent", "publisher_confirms": "per batch"},
        "queue_members": members,
    }
    if isinstance(members, list):
        described.update(
            cluster_nodes=["bb1@localhost", "bb2@localhost", "bb3@localhost"][: len(members)],
            queue_type=queue_type,
            queue_durable=True,
            replicas=len(members),
        )
    return described


def test_rabbitmq_quorum_queues_confirm_once_a_majority_fsynced() -> None:
    assert line("rabbitmq", rabbitmq_described(["bb1@localhost"])) == (
        "single node, not replicated (a quorum queue of one member); fsync by each member "
        "before it counts (quorum queue); confirmed = fsynced by the queue's only member"
    )
    three = rabbitmq_described(["bb1@localhost", "bb2@localhost", "bb3@localhost"])
    assert line("rabbitmq", three) == (
        "replicated to 3 (quorum queue, Raft), confirmed once a majority (2) have it; fsync "
        "by each member before it counts (quorum queue); confirmed = fsynced by a majority (2 "
        "of 3) of the queue's members"
    )
    # Nodes rabbitmqctl cannot reach (AWS): the members are not known.
    remote = rabbitmq_described("unknown (rabbitmqctl cannot reach these nodes)")
    assert line("rabbitmq", remote).startswith(
        "quorum queue (Raft), members not read back (no rabbitmqctl access);"
    )
    transient = {**three, "client_settings": {"delivery_mode": "transient"}}
    assert line("rabbitmq", {**transient, "queue_type": "classic"}, queue_type="classic") == (
        "classic queue on one of 3 nodes, not replicated; not persisted (transient messages "
        "or queue): a confirmed message can be lost on a crash; confirmed = held in the "
        "node's memory"
    )


def artemis_node(backup: bool, replica_sync: bool) -> dict[str, Any]:
    return {
        "ha_policy": "Replication Backup" if backup else "Replication Primary",
        "backup": backup,
        "active": not backup,
        "replica_sync": replica_sync,
        "persistence_enabled": True,
        "journal_type": "NIO",
        "journal_sync_non_transactional": True,
    }


def artemis_described(lives: int, backups: int, replicated: bool) -> dict[str, Any]:
    """What Artemis's ``describe`` reads back over Jolokia (brokers/artemis/adapter.py)."""
    nodes = {f"live{i}": artemis_node(False, replicated) for i in range(lives)}
    nodes.update({f"backup{i}": artemis_node(True, False) for i in range(backups)})
    return {
        "version": "2.37.0",
        "nodes": nodes,
        "live_brokers": lives,
        "backup_brokers": backups,
        "replicated": replicated,
        "persistence_enabled": True,
        "journal_sync_non_transactional": True,
        "persistent_messages": True,
    }


def test_artemis_says_whether_the_backup_has_a_confirmed_message() -> None:
    synced = "journal synced before each receipt (journal-sync-non-transactional)"
    assert line("artemis", artemis_described(1, 0, False)) == (
        f"single node, not replicated; {synced}; confirmed = synced to the broker's journal"
    )
    assert line("artemis", artemis_described(1, 1, True)) == (
        f"replicated synchronously to a backup (live–backup pair); {synced}; confirmed = "
        "synced to the live broker's journal and received by its backup"
    )
    assert line("artemis", artemis_described(3, 3, True)).startswith(
        "3 live–backup pairs, each message on one: replicated synchronously to its backup;"
    )
    assert line("artemis", artemis_described(1, 1, False)).startswith(
        "1 backup, but not every live broker is in sync with its backup (ReplicaSync false)"
    )
    # No management API: only the STOMP CONNECTED frame.
    assert line("artemis", {"version": "2.37.0", "persistent_messages": True}) == (
        "replication: not read back (no management API); fsync: not read back (no "
        "management API); confirmed = receipt of a persistent SEND"
    )


def test_activemq_does_not_claim_a_sync_it_cannot_read_back() -> None:
    described = {"version": "5.17.6", "replicated": False, "replication": "none (single broker)"}
    assert line("activemq", described) == (
        "single node, not replicated; fsync: not read back (KahaDB journalDiskSyncStrategy); "
        "confirmed = stored by the broker (KahaDB; receipt of a persistent SEND)"
    )


def test_pulsar_reads_the_quorum_of_a_probe_ledger() -> None:
    single = {"bookies": 1, "ensemble_size": 1, "write_quorum": 1, "ack_quorum": 1}
    assert line("pulsar", single) == (
        "single node, not replicated; fsync: not read back (the bookies' journalSyncData); "
        "confirmed = written to the journal of one bookie"
    )
    cluster = {"bookies": 3, "ensemble_size": 3, "write_quorum": 3, "ack_quorum": 2}
    assert line("pulsar", cluster) == (
        "replicated to 3 bookies (ensemble 3), confirmed once the ack quorum of 2 have it; "
        "fsync: not read back (the bookies' journalSyncData); confirmed = written to the "
        "journal of 2 bookies"
    )


def rocketmq_broker(name: str, broker_id: int, role: str, **config: str) -> dict[str, Any]:
    """One entry of RocketMQ's described ``brokers`` (brokers/rocketmq/admin.py)."""
    return {
        "name": name,
        "id": broker_id,
        "address": "127.0.0.1:10911",
        "brokerRole": role,
        "flushDiskType": "SYNC_FLUSH",
        **config,
    }


def test_rocketmq_claims_a_synchronous_slave_only_with_in_sync_replicas_read_back() -> None:
    single = {"masters": 1, "slaves": 0, "brokers": [rocketmq_broker("a", 0, "ASYNC_MASTER")]}
    assert line("rocketmq", single) == (
        "single node, not replicated; fsync per send on the master (SYNC_FLUSH); confirmed = "
        "fsynced by the master"
    )
    pair = [rocketmq_broker("a", 0, "SYNC_MASTER"), rocketmq_broker("a", 1, "SLAVE")]
    # RocketMQ 5's SYNC_MASTER waits for a slave only with inSyncReplicas >= 2 (default 1).
    assert line("rocketmq", {"masters": 1, "slaves": 1, "brokers": pair}) == (
        "the master replicates to its slave; whether a send waits for it is not read back "
        "(SYNC_MASTER waits only with inSyncReplicas ≥ 2, RocketMQ 5's default is 1): a "
        "confirmed message can be lost on a fail-over; fsync per send on the master "
        "(SYNC_FLUSH); confirmed = fsynced by the master"
    )
    waiting = [{**pair[0], "inSyncReplicas": "2"}, pair[1]]
    assert line("rocketmq", {"masters": 1, "slaves": 1, "brokers": waiting}) == (
        "replicated synchronously: the master waits for its slave (SYNC_MASTER, "
        "inSyncReplicas ≥ 2); fsync per send on the master (SYNC_FLUSH); confirmed = "
        "fsynced by the master and received by its slave"
    )
    not_waiting = [{**pair[0], "inSyncReplicas": "1"}, pair[1]]
    assert line("rocketmq", {"brokers": not_waiting}).startswith(
        "replicated asynchronously: the master does not wait for its slave (SYNC_MASTER with "
        "inSyncReplicas=1): a confirmed message can be lost on a fail-over;"
    )
    three = [
        rocketmq_broker(n, i, "SYNC_MASTER" if i == 0 else "SLAVE") for n in "abc" for i in (0, 1)
    ]
    assert line("rocketmq", {"masters": 3, "slaves": 3, "brokers": three}).startswith(
        "each of 3 masters replicates to its slave; whether a send waits for it is not read back"
    )


def nats_described(servers: int, replicas: int, storage: str = "file") -> dict[str, Any]:
    """What NATS's ``describe`` reads back of its probe stream (brokers/nats/adapter.py)."""
    peers = [f"n{i}" for i in range(1, replicas + 1)]
    return {
        "cluster_size": servers,
        "replicas": replicas,
        "stream_peers": peers,
        "storage": storage,
    }


def test_nats_says_a_majority_stores_a_message_and_fsync_is_not_read_back() -> None:
    assert line("nats", nats_described(1, 1)) == (
        "single node, not replicated; fsync: not read back (JetStream sync_interval, 2 "
        "minutes by default); confirmed = stored by the stream's server"
    )
    assert line("nats", nats_described(3, 3)) == (
        "replicated to 3 (stream replicas, Raft), confirmed once a majority (2) have it; "
        "fsync: not read back (JetStream sync_interval, 2 minutes by default); confirmed = "
        "stored by a majority (2 of 3) of the stream's replicas"
    )
    assert line("nats", nats_described(3, 1, "memory"), replicas=1, storage="memory") == (
        "stream on one of 3 servers, not replicated (replicas=1); memory storage: a "
        "confirmed message can be lost on a crash; confirmed = held in memory by the "
        "stream's server"
    )


REQUESTED = {"w": "majority", "j": True, "wtimeout_ms": 10_000}


def test_mongodb_says_when_a_stand_in_does_not_enforce_the_write_concern() -> None:
    ferretdb = {
        "version": "FerretDB 1.24.0 (MongoDB 7.0.42 wire protocol)",
        "replica_set": "",
        "members": [],
        "write_concern_requested": REQUESTED,
        "write_concern_in_force": "not enforced: FerretDB acknowledges a write once its "
        "single PostgreSQL backend has committed it (flushed to disk); no replication",
    }
    assert line("mongodb", ferretdb) == (
        "single node, not replicated (FerretDB on PostgreSQL stands in; w=majority not "
        "enforced); fsync: not read back (FerretDB's PostgreSQL backend); confirmed = "
        "committed by FerretDB's PostgreSQL backend"
    )


def test_mongodb_replica_sets_by_write_concern() -> None:
    replica_set = {
        "version": "7.0.14",
        "replica_set": "rs0",
        "members": [
            {"name": f"m{i}:27017", "state": "PRIMARY" if i == 1 else "SECONDARY", "health": 1.0}
            for i in (1, 2, 3)
        ],
        "write_concern_requested": REQUESTED,
        "write_concern_majority_journal_default": True,
        "write_concern_in_force": "w=majority (2 of 3), j=true, set by the client on every write",
    }
    assert line("mongodb", replica_set) == (
        "replicated to 3 members, confirmed once a majority (2 of 3 voting) have it "
        "(w=majority); journal fsynced before the acknowledgement (j=true); confirmed = "
        "journaled by a majority (2) of the members"
    )
    w1 = {
        **replica_set,
        "write_concern_requested": {**REQUESTED, "w": 1},
        "write_concern_in_force": "w=1, j=true, set by the client on every write",
    }
    assert line("mongodb", w1, w=1) == (
        "replicated asynchronously to 2 secondaries (w=1): a confirmed message can be lost "
        "on a fail-over; journal fsynced before the acknowledgement (j=true); confirmed = "
        "journaled by the primary"
    )


def test_sqs_says_which_service_stands_behind_the_api() -> None:
    elasticmq = {
        "version": "ElasticMQ 1.6.11 (local stand-in)",
        "replication": "ElasticMQ 1.6.11 (local stand-in): one local server, no replication",
    }
    assert line("sqs", elasticmq) == (
        "single node, not replicated: ElasticMQ 1.6.11 (local stand-in); fsync: not read back "
        "(the stand-in's message storage); confirmed = accepted by the stand-in server"
    )
    managed = {
        "version": "Amazon SQS (managed service)",
        "replication": "managed by SQS: stored redundantly across availability zones",
    }
    assert line("sqs", managed) == (
        "managed service, stored redundantly across availability zones (as AWS documents it; "
        "not readable); fsync: not readable (managed service); confirmed = accepted by SQS "
        "(SendMessageBatch succeeded)"
    )


def test_eventstore_counts_the_quorum_of_its_database_nodes() -> None:
    states = ["NODE_STATE_LEADER", "NODE_STATE_FOLLOWER", "NODE_STATE_FOLLOWER"]
    members = [{"address": f"10.0.0.{i}:2113", "state": s} for i, s in enumerate(states)]
    assert line("eventstore", {"members": members}) == (
        "replicated to 3 nodes, confirmed once a quorum (2) have it; fsync: not read back "
        "(UnsafeDisableFlushToDisk; flushed before it counts by default); confirmed = written "
        "by a quorum (2 of 3) of the nodes"
    )
    replica = {"address": "10.0.0.9:2113", "state": "NODE_STATE_REPLICA"}
    assert line("eventstore", {"members": [members[0], replica]}).startswith(
        "single node, not replicated;"
    )


def test_the_record_reads_back_what_the_run_recorded() -> None:
    durability = Durability(False, "single node, not replicated", True, "fsync per commit", "x")
    record = RunContext.of({"broker": {"system": "postgresql", "durability": durability.record()}})
    assert record.broker.durability == durability
    assert RunContext.of({"broker": {"system": "kafka"}}).broker.durability is None
    assert RunContext.of({"broker": {"durability": {"replicated": True}}}).broker.durability is None
    assert record.dump()["broker"]["durability"] == durability.record()  # unchanged


def context(line_of: Durability | None) -> dict[str, Any]:
    broker: dict[str, Any] = {"system": "redis", "title": "Redis Streams", "topology": "single"}
    if line_of is not None:
        broker["durability"] = line_of.record()
    return {
        "run_id": "r",
        "scenario": {"name": "s", "measurement": {"window": 5, "step": 5}},
        "broker": broker,
    }


EVERYSEC = Durability(
    False,
    "single node, not replicated",
    False,
    "fsync every second (appendfsync everysec): a confirmed message can be lost on a crash",
    "executed by the master, in memory (AOF not yet fsynced)",
)
ALWAYS = Durability(
    False,
    "single node, not replicated",
    True,
    "fsync per write (appendfsync always)",
    "appended to the master's AOF and fsynced",
)


def row(point: int) -> dict[str, str]:
    values = {c: "" for c in SUMMARY_COLUMNS}
    values.update(
        broker="redis",
        point=str(point),
        label="threads=1",
        threads="1",
        sender_nodes="1",
        receiver_nodes="2",
        message_size="100",
        send_msgs_per_s="1000",
        receive_msgs_per_s="1000",
    )
    return values


def test_the_terminal_table_and_the_report_head_with_the_durability_line(tmp_path: Path) -> None:
    printed = run_summary(context(EVERYSEC), [row(0)]).splitlines()
    assert printed[0].startswith("Redis Streams  ([window]")
    assert printed[1] == f"durability: {EVERYSEC.line}"
    page = write_html(tmp_path, context(EVERYSEC), [row(0)]).read_text()
    assert (
        "<b>Durability:</b> single node, not replicated; fsync every second (appendfsync "
        "everysec): a confirmed message can be lost on a crash;" in page
    )
    older = write_html(tmp_path, context(None), [row(0)]).read_text()
    assert "<b>Durability:</b> not derived for this system" in older


def write_run(run_dir: Path, durability: Durability) -> Path:
    (run_dir / "analysis").mkdir(parents=True)
    (run_dir / "context.json").write_text(json.dumps(context(durability)))
    with (run_dir / "analysis" / "summary.csv").open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=SUMMARY_COLUMNS)
        writer.writeheader()
        writer.writerow(row(0))
    return run_dir


def test_compare_shows_the_durability_and_warns_when_it_differs(tmp_path: Path) -> None:
    a = write_run(tmp_path / "a", EVERYSEC)
    b = write_run(tmp_path / "b", ALWAYS)
    same = text_report(compare_runs(a, a)).splitlines()
    assert f"durability: {EVERYSEC.line}" in same
    assert not any("durability differs" in line for line in same)
    differ = text_report(compare_runs(a, b)).splitlines()
    at = differ.index(
        "durability differs — the figures compare different guarantees, not a change of one:"
    )
    assert differ[at + 1] == f"  baseline:  {EVERYSEC.line}"
    assert differ[at + 2] == f"  contender: {ALWAYS.line}"
