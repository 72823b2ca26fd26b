"""Apache RocketMQ 5 (docs/measurement.md §6): name server, SYNC_MASTER brokers with slaves and the gRPC
proxy from Maven Central; topics and consumer groups created before a run; clients use
rocketmq-python-client (producer, SimpleConsumer with an invisible duration, acks).
"""

from __future__ import annotations

from brokers.base import BrokerSystem, KeySupport, Topology
from brokers.rocketmq import adapter, admin, durability
from brokers.rocketmq.cloud import RocketMQCloud
from brokers.rocketmq.local import RocketMQLocal
from brokers.rocketmq.params import RocketMQParams

DURABILITY_CAVEAT = (
    "A confirmed send is fsynced on the master (SYNC_FLUSH). With a slave the master is a "
    "SYNC_MASTER, but RocketMQ 5 awaits the slave only with inSyncReplicas >= 2 and the "
    "configuration keeps its default of 1: a confirmed send may not be on the slave yet "
    "when the master fails. The 'single' topology has no slave (ASYNC_MASTER, no replication)."
)
FAILOVER_CAVEAT = (
    "Master-slave pairs do not fail over automatically (no controller/DLedger): while a "
    "master is down its queues cannot be written."
)
CLIENT_CAVEAT = (
    "Every send and receive goes through the gRPC proxy; rocketmq-python-client sends one "
    "message per request (a batch is sent concurrently) and a message not acknowledged within "
    "invisible_duration (min. 10 s) is delivered again."
)

SYSTEM = BrokerSystem(
    name="rocketmq",
    title="Apache RocketMQ",
    params_model=RocketMQParams,
    connect=adapter.connect,
    adapters=(adapter.RocketMQAdapter,),
    prepare=admin.prepare,
    describe=admin.describe,
    durability=durability.durability,
    reference_topology=Topology(
        roles={"namesrv": 1, "master": 3, "slave": 3},
        replication="3 master-slave pairs, SYNC_MASTER + SYNC_FLUSH; a gRPC proxy on each master",
    ),
    local=RocketMQLocal(),
    cloud=RocketMQCloud(),
    caveats=(DURABILITY_CAVEAT, FAILOVER_CAVEAT, CLIENT_CAVEAT),
    # With [load] keys the point's topic is a FIFO topic and its consumer group a FIFO group.
    keys=KeySupport("message group (FIFO topic)", ordered=True),
    client_package="rocketmq-python-client",
    one_in_flight=(
        "the client's send waits for each message's result through the proxy: more threads are "
        "more sends in flight"
    ),
)
