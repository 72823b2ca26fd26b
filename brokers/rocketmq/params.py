"""``[broker.params]`` of RocketMQ scenarios."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from brokers.connection import BrokerParams, seconds


class RocketMQParams(BrokerParams):
    """RocketMQ settings of a run; the defaults are the safe configuration of docs/measurement.md §6."""

    queues: int = Field(8, ge=1, le=256, description="Read/write queues of the topic per master.")
    replication: Literal["sync", "async"] = Field(
        "sync",
        description="Masters with a slave: SYNC_MASTER (a send waits for the slave) or "
        "ASYNC_MASTER. A master without a slave is always ASYNC_MASTER.",
    )
    flush: Literal["sync", "async"] = Field(
        "sync", description="SYNC_FLUSH (fsync before a send is confirmed) or ASYNC_FLUSH."
    )
    invisible_duration: float = seconds(
        30.0, "Seconds a received message stays hidden before redelivery.", ge=10.0
    )
    long_polling: int = Field(
        1, ge=1, le=20, description="Seconds a receive call waits for messages."
    )
    send_timeout: int = Field(10, ge=1, le=120, description="Seconds a send request may take.")

    def broker_role(self, has_slave: bool) -> str:
        if has_slave and self.replication == "sync":
            return "SYNC_MASTER"
        return "ASYNC_MASTER"

    @property
    def flush_disk_type(self) -> str:
        return "SYNC_FLUSH" if self.flush == "sync" else "ASYNC_FLUSH"
