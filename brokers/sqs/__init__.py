"""Amazon SQS (docs/measurement.md §6): batch send and receive of up to 10, a visibility timeout,
``DeleteMessageBatch`` as the acknowledgement.

On AWS the real, managed service is measured (``cloud`` declares the queue the stack
creates); on this machine ElasticMQ, an SQS-compatible server, stands in for it (see
``local``).
"""

from __future__ import annotations

from brokers.base import BrokerSystem, Topology
from brokers.sqs import adapter, durability
from brokers.sqs.cloud import SqsCloud
from brokers.sqs.local import ElasticMQLocal
from brokers.sqs.params import SqsParams

SYSTEM = BrokerSystem(
    name="sqs",
    title="Amazon SQS",
    params_model=SqsParams,
    connect=adapter.connect,
    adapters=(adapter.SqsAdapter,),
    prepare=adapter.prepare,
    describe=adapter.describe,
    durability=durability.durability,
    reference_topology=Topology(
        roles={},
        replication="managed service: SQS stores every message redundantly across "
        "availability zones before SendMessageBatch returns",
    ),
    local=ElasticMQLocal(),
    # No broker machines: the recipe declares the managed queue the AWS stack creates.
    cloud=SqsCloud(),
    caveats=(
        "SQS is a managed service: its replication and persistence are the service's own, "
        "neither configurable nor readable; on AWS the numbers include the HTTPS path to "
        "the regional endpoint.",
        "Batches are limited to 10 messages (and 256 KiB) per call; larger sender batches "
        "are split into several SendMessageBatch calls.",
    ),
    client_package="boto3",
    redelivery_after=lambda params: float(params.visibility_timeout),
    one_in_flight=(
        "boto3 waits for each SendMessageBatch's answer (at most 10 messages a call): more "
        "threads are more batches in flight"
    ),
)
