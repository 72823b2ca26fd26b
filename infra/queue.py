"""The managed service of a stack whose system AWS runs for it (a managed queue): no
broker machines; the resource the system's cloud recipe declares
(:class:`~brokers.cloud.ManagedService`) is created here, and the endpoints the recipe forms
from it are what the clients get.

Nothing here knows a system: :data:`RESOURCES` maps the AWS resource types a declaration
may name to the Pulumi classes that create them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_aws as aws

from brokers.base import Endpoints
from brokers.cloud import CreatedService, ManagedService
from infra.settings import StackConfigError


@dataclass(frozen=True)
class ResourceType:
    """How to create one AWS resource type and read back its name, URL and ARN."""

    create: Callable[..., pulumi.CustomResource]
    name: str = "name"
    url: str = "url"
    arn: str = "arn"


#: Pulumi type token → the resource type, for every kind of managed service a recipe may
#: declare.
RESOURCES: dict[str, ResourceType] = {
    "aws:sqs/queue:Queue": ResourceType(aws.sqs.Queue),
}


@dataclass(frozen=True)
class ManagedQueueArgs:
    service: ManagedService
    region: str
    tags: dict[str, str]


class ManagedQueue(pulumi.ComponentResource):
    url: pulumi.Output[str]
    arn: pulumi.Output[str]
    queue_name: pulumi.Output[str]
    endpoints: pulumi.Output[Endpoints]

    def __init__(
        self, name: str, args: ManagedQueueArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        kind = resource_type(args.service)
        super().__init__("brokerbench:infra:ManagedQueue", name, None, opts)
        created = kind.create(
            name,
            **dict(args.service.attributes),
            tags=args.tags,
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.url = _output(created, kind.url)
        self.arn = _output(created, kind.arn)
        self.queue_name = _output(created, kind.name)
        self.endpoints = pulumi.Output.all(self.queue_name, self.url, self.arn).apply(
            lambda v: args.service.endpoints(
                CreatedService(name=v[0], url=v[1], arn=v[2], region=args.region)
            )
        )
        self.register_outputs({"url": self.url, "arn": self.arn})


def resource_type(service: ManagedService) -> ResourceType:
    """The AWS resource type a declaration names (a config error when none is known)."""
    try:
        return RESOURCES[service.resource]
    except KeyError:
        raise StackConfigError(
            [
                f"managed service {service.resource!r}: not an AWS resource type the stack "
                f"creates; known: {', '.join(sorted(RESOURCES))}"
            ]
        ) from None


def _output(resource: pulumi.CustomResource, attribute: str) -> pulumi.Output[str]:
    value: Any = getattr(resource, attribute)
    return pulumi.Output.from_input(value)
