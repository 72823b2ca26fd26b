"""The ``[broker.params]`` of SQS (and ElasticMQ):
``SYSTEM.params_model``, which its adapter and recipes take."""

from __future__ import annotations

from pydantic import Field

from brokers.connection import BrokerParams


class SqsParams(BrokerParams):
    visibility_timeout: int = Field(
        30,
        ge=0,
        le=43_200,
        description="Seconds a received message stays hidden before SQS delivers it again "
        "(VisibilityTimeout of each ReceiveMessage).",
    )
    wait_time: int = Field(
        1,
        ge=0,
        le=1,
        description="Long-poll seconds of each ReceiveMessage (WaitTimeSeconds; at most 1 so "
        "that a receive returns within about a second).",
    )
