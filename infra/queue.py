"""The managed queue of a stack whose system is a cloud service (SQS): no broker machines;
the service's regional endpoint and this queue are what the clients get."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_aws as aws

from brokers.base import Endpoints


@dataclass(frozen=True)
class ManagedQueueArgs:
    region: str
    tags: dict[str, str]
    visibility_timeout_seconds: int = 30
    retention_seconds: int = 4 * 24 * 3600


class ManagedQueue(pulumi.ComponentResource):
    url: pulumi.Output[str]
    arn: pulumi.Output[str]
    queue_name: pulumi.Output[str]
    endpoints: pulumi.Output[Endpoints]

    def __init__(
        self, name: str, args: ManagedQueueArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__("brokerbench:infra:ManagedQueue", name, None, opts)
        queue = aws.sqs.Queue(
            name,
            visibility_timeout_seconds=args.visibility_timeout_seconds,
            message_retention_seconds=args.retention_seconds,
            sqs_managed_sse_enabled=True,
            tags=args.tags,
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.url = queue.url
        self.arn = queue.arn
        self.queue_name = queue.name
        self.endpoints = pulumi.Output.all(queue.url, queue.name).apply(
            lambda values: Endpoints(
                hosts=(f"sqs.{args.region}.amazonaws.com:443",),
                extra=(
                    ("queue_name", values[1]),
                    ("queue_url", values[0]),
                    ("region", args.region),
                ),
            )
        )
        self.register_outputs({"url": self.url, "arn": self.arn})
