"""Artemis management over its Jolokia HTTP API (the embedded web server of each broker).

Reads the broker MBean's attributes (version, HA policy, replication state, journal
settings) and creates queues. Only the standard library is used; every failure becomes
a one-line :class:`~brokers.errors.BrokerConnectionError` naming ``host:port``.
"""

from __future__ import annotations

import base64
import json
import urllib.error
import urllib.request
from typing import Any

from brokers.errors import BrokerConnectionError, BrokerError

BROKER_PATTERN = "org.apache.activemq.artemis:broker=*"

#: Attributes of the broker MBean that describe() reports.
BROKER_ATTRIBUTES = (
    "Name",
    "Version",
    "HAPolicy",
    "Backup",
    "Active",
    "ReplicaSync",
    "NodeID",
    "Clustered",
    "PersistenceEnabled",
    "JournalType",
    "JournalSyncTransactional",
    "JournalSyncNonTransactional",
)


class Jolokia:
    """One broker's Jolokia endpoint (``http://host:port/console/jolokia``)."""

    def __init__(self, address: str, user: str, password: str, timeout: float = 15.0) -> None:
        self.address = address
        self.url = f"http://{address}/console/jolokia/"
        self.timeout = timeout
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        self.headers = {
            "Authorization": f"Basic {token}",
            "Content-Type": "application/json",
            "Origin": f"http://{address.rpartition(':')[0]}",
        }

    def request(self, body: dict[str, Any]) -> Any:
        data = json.dumps(body).encode()
        req = urllib.request.Request(self.url, data=data, headers=self.headers, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=self.timeout) as response:
                answer = json.loads(response.read())
        except urllib.error.HTTPError as exc:
            raise BrokerConnectionError(
                f"Artemis management at {self.address} answered HTTP {exc.code} ({exc.reason})"
            ) from None
        except (urllib.error.URLError, OSError, ValueError) as exc:
            reason = getattr(exc, "reason", exc)
            raise BrokerConnectionError(
                f"cannot reach Artemis management at {self.address}: {reason}"
            ) from None
        if answer.get("status") != 200:
            raise BrokerError(
                f"Artemis management at {self.address}: {answer.get('error', 'request failed')}"
            )
        return answer.get("value")

    def broker(self) -> dict[str, Any]:
        """The broker MBean's attributes (there is one broker per instance)."""
        value = self.request(
            {"type": "read", "mbean": BROKER_PATTERN, "attribute": list(BROKER_ATTRIBUTES)}
        )
        if not value:
            raise BrokerError(f"Artemis management at {self.address} lists no broker")
        (attributes,) = value.values()
        return dict(attributes)

    def broker_mbean(self) -> str:
        name = self.broker()["Name"]
        return f'org.apache.activemq.artemis:broker="{name}"'

    def create_anycast_queue(self, name: str) -> dict[str, Any]:
        """Create a durable anycast queue on an address of the same name (idempotent)."""
        spec = {"name": name, "address": name, "routing-type": "ANYCAST", "durable": True}
        value = self.request(
            {
                "type": "exec",
                "mbean": self.broker_mbean(),
                "operation": "createQueue(java.lang.String,boolean)",
                "arguments": [json.dumps(spec), True],
            }
        )
        return dict(json.loads(value)) if isinstance(value, str) else {}
