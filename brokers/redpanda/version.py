"""The Redpanda version each broker reports through its Admin API (``GET /v1/brokers``);
the Kafka protocol does not carry it."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

from brokers.base import Endpoints


def broker_versions(endpoints: Endpoints, admin_port: int, timeout: float = 5.0) -> dict[str, str]:
    """Node id → version, from the first broker whose Admin API answers (else empty)."""
    for host, _ in endpoints.addresses():
        url = f"http://{host}:{admin_port}/v1/brokers"
        try:
            with urllib.request.urlopen(url, timeout=timeout) as response:
                brokers = json.load(response)
        except (OSError, urllib.error.URLError, ValueError):
            continue
        return {
            str(b.get("node_id")): str(b.get("version", "unknown"))
            for b in brokers
            if isinstance(b, dict)
        }
    return {}
