"""The ``[broker.params]`` of Redpanda:
``SYSTEM.params_model``, which its adapter and recipes take."""

from __future__ import annotations

from pydantic import Field

from brokers.kafka.params import KafkaClientParams

#: The port of Redpanda's admin API (where its version is read).
ADMIN_PORT = 9644


class RedpandaParams(KafkaClientParams):
    admin_port: int = Field(
        ADMIN_PORT, gt=0, lt=65536, description="Admin API port (read for the version)."
    )
