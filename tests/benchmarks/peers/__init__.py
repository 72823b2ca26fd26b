"""Per-system peer definitions for ``bench_peers.py``: each system's own load tool, run with
settings equivalent to a brokerbench scenario on the same running broker.

One module per system; :data:`PEERS` maps a brokerbench system name to its tool.
"""

from __future__ import annotations

from .base import PeerTool
from .kafka import KafkaPeer
from .nats import NatsPeer
from .postgresql import PostgresPeer
from .pulsar import PulsarPeer
from .rabbitmq import RabbitMQPeer
from .redis import RedisPeer

PEERS: dict[str, PeerTool] = {
    peer.system: peer
    for peer in (KafkaPeer(), RedisPeer(), RabbitMQPeer(), PostgresPeer(), PulsarPeer(), NatsPeer())
}
