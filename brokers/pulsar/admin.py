"""Pulsar administration through the broker's REST API: topics, subscriptions and the
namespace persistence policy for a sweep point (``prepare``), and the version and the
replication settings read back from the cluster (``describe``).

The quorum actually used is read from the metadata of a freshly created probe topic's
ledger, which also names the bookies the ledger is striped over.
"""

from __future__ import annotations

import contextlib
import json
import re
import secrets
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from brokers.connection import Destination, Endpoints, split_host_port
from brokers.errors import BrokerConnectionError, BrokerError
from brokers.pulsar.params import PulsarParams

#: The durable Shared subscription every receiver of a sweep point joins.
SUBSCRIPTION = "brokerbench"
ADMIN_PORT = 8080
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def admin_url(endpoints: Endpoints) -> str:
    """The REST base URL: the ``admin`` extra, else port 8080 on the first broker host."""
    given = endpoints.get("admin")
    if given:
        return given.rstrip("/")
    host, _ = endpoints.first
    return f"http://{host}:{ADMIN_PORT}"


def topic_name(destination: Destination) -> str:
    """A destination name made safe for a Pulsar topic (letters, digits, ``_-.``)."""
    return re.sub(r"[^A-Za-z0-9_.-]", "-", destination.name)


def topic_path(params: PulsarParams, destination: Destination) -> str:
    return f"persistent/{params.namespace}/{topic_name(destination)}"


def topic_url(params: PulsarParams, destination: Destination) -> str:
    return f"persistent://{params.namespace}/{topic_name(destination)}"


def call(
    base: str,
    method: str,
    path: str,
    body: Any = None,
    ok: tuple[int, ...] = (200, 204),
    api: str = "admin/v2",
) -> Any:
    """One REST call; returns the decoded JSON (or text) body, raises on other statuses."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        f"{base}/{api}/{path}",
        data=data,
        method=method,
        headers={"Content-Type": "application/json", "Accept": "application/json"},
    )
    try:
        with _OPENER.open(request, timeout=30) as response:
            status, raw = response.status, response.read()
    except urllib.error.HTTPError as exc:
        status, raw = exc.code, exc.read()
    except (urllib.error.URLError, OSError) as exc:
        host, port = split_host_port(urllib.parse.urlsplit(base).netloc)
        reason = getattr(exc, "reason", exc)
        raise BrokerConnectionError(
            f"Pulsar admin API at {host}:{port} is unreachable: {reason}"
        ) from None
    text = raw.decode("utf-8", errors="replace")
    if status not in ok:
        detail = text
        with contextlib.suppress(ValueError, AttributeError):
            detail = json.loads(text).get("reason", text)
        raise BrokerError(f"Pulsar {method} {path} failed ({status}): {detail.strip()[:300]}")
    if not text:
        return None
    try:
        return json.loads(text)
    except ValueError:
        return text


def ensure_namespace(base: str, params: PulsarParams) -> None:
    tenant = params.namespace.split("/")[0]
    if tenant not in call(base, "GET", "tenants"):
        clusters = call(base, "GET", "clusters")
        call(base, "PUT", f"tenants/{tenant}", {"allowedClusters": clusters}, ok=(204, 409))
    call(base, "PUT", f"namespaces/{params.namespace}", ok=(204, 409))
    quorum = params.quorum
    if quorum is not None:
        policy = {
            "bookkeeperEnsemble": quorum.ensemble,
            "bookkeeperWriteQuorum": quorum.write,
            "bookkeeperAckQuorum": quorum.ack,
            "managedLedgerMaxMarkDeleteRate": 1.0,
        }
        call(base, "POST", f"namespaces/{params.namespace}/persistence", policy)


def prepare(endpoints: Endpoints, params: PulsarParams, destination: Destination) -> None:
    """Create the topic (partitioned or not) and its Shared subscription, so that nothing
    sent before the first receiver subscribes is dropped."""
    base = admin_url(endpoints)
    ensure_namespace(base, params)
    path = topic_path(params, destination)
    if params.partitions > 0:
        call(base, "PUT", f"{path}/partitions", params.partitions, ok=(204, 409))
    else:
        call(base, "PUT", path, ok=(204, 409))
    call(base, "PUT", f"{path}/subscription/{SUBSCRIPTION}", ok=(204, 409))


def owner(base: str, params: PulsarParams, destination: Destination) -> str:
    """``host:port`` of the broker serving the topic (its partition 0, if partitioned)."""
    path = topic_path(params, destination)
    if params.partitions > 0:
        path += "-partition-0"
    answer = call(base, "GET", path, api="lookup/v2/topic")
    url = str(answer.get("brokerUrl", "")) if isinstance(answer, dict) else ""
    if not url.startswith("pulsar://"):
        raise BrokerError(f"Pulsar lookup of {path} named no broker: {answer}")
    return url.removeprefix("pulsar://").rstrip("/")


_LEDGER_FIELDS = re.compile(r"(ensembleSize|writeQuorumSize|ackQuorumSize)=(\d+)")
_ENSEMBLE = re.compile(r"ensembles=\{0=\[([^\]]*)\]")


def ledger_quorum(stats: dict[str, Any]) -> dict[str, Any]:
    """Ensemble/write/ack quorum and bookies of the newest ledger in ``internalStats``."""
    ledgers = [entry for entry in stats.get("ledgers", []) if entry.get("metadata")]
    if not ledgers:
        raise BrokerError("Pulsar: the probe topic has no ledger to read its quorum from")
    metadata = str(ledgers[-1]["metadata"])
    fields = {key: int(value) for key, value in _LEDGER_FIELDS.findall(metadata)}
    ensemble = _ENSEMBLE.search(metadata)
    return {
        "ensemble_size": fields.get("ensembleSize"),
        "write_quorum": fields.get("writeQuorumSize"),
        "ack_quorum": fields.get("ackQuorumSize"),
        "ledger_bookies": [b.strip() for b in ensemble.group(1).split(",")] if ensemble else [],
    }


def describe(endpoints: Endpoints, params: PulsarParams) -> dict[str, Any]:
    """Version, cluster shape and the quorum a new topic's ledger really gets."""
    base = admin_url(endpoints)
    clusters = call(base, "GET", "clusters")
    cluster = clusters[0] if clusters else ""
    runtime = call(base, "GET", "brokers/configuration/runtime")
    probe = Destination(f"brokerbench-describe-{secrets.token_hex(3)}")
    probe_params = params.model_copy(update={"partitions": 0})
    prepare(endpoints, probe_params, probe)
    path = topic_path(probe_params, probe)
    try:
        quorum = ledger_quorum(call(base, "GET", f"{path}/internalStats?metadata=true"))
    finally:
        call(base, "DELETE", f"{path}?force=true", ok=(200, 204, 404))
    policy = call(base, "GET", f"namespaces/{params.namespace}/persistence")
    return {
        "version": str(call(base, "GET", "brokers/version")).strip().strip('"'),
        "cluster": cluster,
        "brokers": len(call(base, "GET", f"brokers/{cluster}")) if cluster else 0,
        "bookies": len(call(base, "GET", "bookies/all").get("bookies", [])),
        **quorum,
        "quorum_source": "namespace policy" if policy else "broker default",
        "broker_default_quorum": "/".join(
            str(runtime.get(f"managedLedgerDefault{key}", "?"))
            for key in ("EnsembleSize", "WriteQuorum", "AckQuorum")
        ),
        "namespace": params.namespace,
        "subscription": f"{SUBSCRIPTION} (Shared)",
        "partitions": params.partitions,
        "batching": params.batching,
    }
