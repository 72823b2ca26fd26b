"""Amazon SQS on AWS: no broker machines; the stack creates one queue (the managed
service) and clients send to the regional endpoint of the real service.

The queue is named by AWS after the stack's resource; its URL and name reach the clients
in their endpoints (``queue_url``, ``queue_name``), so every sweep point uses it (see
:mod:`brokers.sqs.adapter`). Client machines may use it and the queues whose names start
with its name, nothing else of SQS.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from brokers.base import Endpoints
from brokers.cloud import CloudRecipe, CreatedService, ManagedService

if TYPE_CHECKING:
    from brokers.sqs.params import SqsParams

#: Seconds a received message stays hidden by default (a receive's own timeout wins).
VISIBILITY_TIMEOUT_S = 30
#: Seconds SQS keeps a message nobody deleted: 4 days, SQS's own default.
RETENTION_S = 4 * 24 * 3600
PORT = 443
#: What the adapter calls (``prepare``, ``describe`` and the workers).
CLIENT_ACTIONS = (
    "sqs:CreateQueue",
    "sqs:DeleteQueue",
    "sqs:GetQueueUrl",
    "sqs:GetQueueAttributes",
    "sqs:SetQueueAttributes",
    "sqs:PurgeQueue",
    "sqs:SendMessage",
    "sqs:ReceiveMessage",
    "sqs:DeleteMessage",
    "sqs:ChangeMessageVisibility",
)


def endpoints(queue: CreatedService) -> Endpoints:
    """The service's regional HTTPS endpoint and the stack's queue."""
    return Endpoints(
        hosts=(f"sqs.{queue.region}.amazonaws.com:{PORT}",),
        extra=(("queue_name", queue.name), ("queue_url", queue.url), ("region", queue.region)),
    )


QUEUE = ManagedService(
    resource="aws:sqs/queue:Queue",
    attributes={
        "visibility_timeout_seconds": VISIBILITY_TIMEOUT_S,
        "message_retention_seconds": RETENTION_S,
        "sqs_managed_sse_enabled": True,  # encrypted at rest with SQS-owned keys
    },
    client_actions=CLIENT_ACTIONS,
    endpoints=endpoints,
)


class SqsCloud(CloudRecipe["SqsParams"]):
    """The managed queue and nothing to install: the topology has no broker machines, so
    the node methods are never called (they declare nothing)."""

    managed = QUEUE

    def install_commands(self) -> list[str]:
        return []

    def node_files(
        self, role: str, index: int, cluster: dict[str, list[str]], params: SqsParams
    ) -> dict[str, str]:
        return {}

    def start_commands(self, role: str, index: int, cluster: dict[str, list[str]]) -> list[str]:
        return []
