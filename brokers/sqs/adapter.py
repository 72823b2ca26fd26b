"""The SQS adapter (boto3, blocking): ``SendMessageBatch`` / ``ReceiveMessage`` /
``DeleteMessageBatch``, and the queue set-up of a sweep point.

``send`` splits a batch into calls of at most 10 entries and 256 KiB; a batch counts as
sent only when every entry of every call is in ``Successful`` — any ``Failed`` entry
raises. ``receive`` long-polls for at most ``wait_time`` (≤ 1 s) and hides what it
returns for ``visibility_timeout`` seconds; ``ack`` deletes by receipt handle. Message
bodies are text: the workload's payloads are ASCII and go out unchanged.

Endpoints: ``hosts[0]`` is the service endpoint (``sqs.<region>.amazonaws.com:443`` on
AWS, ``127.0.0.1:<port>`` for the local stand-in). Extras:

* ``region`` — the AWS region (default ``us-east-1``);
* ``scheme`` — ``http`` or ``https`` (default: ``https`` on port 443, else ``http``);
* ``queue_url`` / ``queue_name`` — a queue that already exists (e.g. declared by the AWS
  stack): every sweep point uses it instead of creating its own;
* ``credentials = "dummy"`` — fixed dummy keys (local stand-in); otherwise boto3's usual
  chain (environment, instance profile …);
* ``server`` — what the endpoint is, when it is not the real service (e.g. the stand-in).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from brokers.base import Adapter, Destination, Endpoints, Received
from brokers.errors import BrokerConnectionError, BrokerError

if TYPE_CHECKING:
    from brokers.sqs.params import SqsParams

#: SQS limits of one batch call.
MAX_BATCH_ENTRIES = 10
MAX_BATCH_BYTES = 256 * 1024
#: Retention of the queues ``prepare`` creates (the SQS default, 4 days).
RETENTION_SECONDS = 4 * 24 * 3600
DUMMY_KEY = "brokerbench"


class SqsBatchError(BrokerError):
    """Some entries of a batch call were not accepted (``Failed`` was not empty)."""


def chunks(
    bodies: Sequence[str], max_entries: int = MAX_BATCH_ENTRIES, max_bytes: int = MAX_BATCH_BYTES
) -> Iterator[list[str]]:
    """Consecutive slices of ``bodies`` that each fit one batch call."""
    chunk: list[str] = []
    size = 0
    for body in bodies:
        length = len(body.encode("utf-8"))
        if chunk and (len(chunk) == max_entries or size + length > max_bytes):
            yield chunk
            chunk, size = [], 0
        chunk.append(body)
        size += length
    if chunk:
        yield chunk


def queue_name(destination: Destination) -> str:
    """An SQS queue name (letters, digits, ``-`` and ``_``, at most 80 characters)."""
    return re.sub(r"[^A-Za-z0-9_-]", "-", destination.name)[:80]


def endpoint_url(endpoints: Endpoints) -> str:
    host, port = endpoints.first
    scheme = endpoints.get("scheme") or ("https" if port == 443 else "http")
    return f"{scheme}://{host}:{port}"


def client(endpoints: Endpoints, read_timeout: float = 10) -> Any:
    """A boto3 SQS client of its own session (boto3 sessions are not shared across threads)."""
    import boto3
    from botocore.config import Config

    credentials: dict[str, str] = {}
    if endpoints.get("credentials") == "dummy":
        credentials = {"aws_access_key_id": DUMMY_KEY, "aws_secret_access_key": DUMMY_KEY}
    session = boto3.session.Session(**credentials)
    return session.client(
        "sqs",
        endpoint_url=endpoint_url(endpoints),
        region_name=endpoints.get("region", "us-east-1"),
        config=Config(
            connect_timeout=5,
            read_timeout=read_timeout,
            retries={"max_attempts": 3, "mode": "standard"},
            max_pool_connections=4,
        ),
    )


def _unreachable(endpoints: Endpoints, exc: Exception) -> BrokerConnectionError:
    host, port = endpoints.first
    reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return BrokerConnectionError(f"cannot reach SQS at {host}:{port}: {reason}")


def _call(endpoints: Endpoints, func: Any, **kwargs: Any) -> Any:
    """One API call; connection problems become one-line :class:`BrokerConnectionError`."""
    from botocore.exceptions import ConnectionError as BotoConnectionError
    from botocore.exceptions import HTTPClientError

    try:
        return func(**kwargs)
    except (BotoConnectionError, HTTPClientError) as exc:
        raise _unreachable(endpoints, exc) from None


def _given_queue(endpoints: Endpoints) -> tuple[str, str]:
    """(url, name) of a queue named in the extras, or ("", "")."""
    url = endpoints.get("queue_url")
    name = endpoints.get("queue_name") or (url.rstrip("/").rsplit("/", 1)[-1] if url else "")
    return url, name


def queue_url(sqs: Any, endpoints: Endpoints, destination: Destination) -> str:
    """The URL of the given queue (extras) or of the sweep point's queue; it must exist."""
    from botocore.exceptions import ClientError

    url, name = _given_queue(endpoints)
    if url:
        return url
    name = name or queue_name(destination)
    try:
        response = _call(endpoints, sqs.get_queue_url, QueueName=name)
    except ClientError as exc:
        host, port = endpoints.first
        code = exc.response.get("Error", {}).get("Code", "error")
        raise BrokerError(f"SQS at {host}:{port}: queue {name!r}: {code}") from None
    return str(response["QueueUrl"])


def prepare(endpoints: Endpoints, params: SqsParams, destination: Destination) -> None:
    """Create the sweep point's queue, or check that the given queue exists."""
    sqs = client(endpoints)
    url, name = _given_queue(endpoints)
    if url or name:
        queue_url(sqs, endpoints, destination)
        return
    _call(
        endpoints,
        sqs.create_queue,
        QueueName=queue_name(destination),
        Attributes={
            "VisibilityTimeout": str(params.visibility_timeout),
            "MessageRetentionPeriod": str(RETENTION_SECONDS),
            "ReceiveMessageWaitTimeSeconds": "0",
        },
    )


def describe(endpoints: Endpoints, params: SqsParams) -> dict[str, Any]:
    """The service and the attributes of a queue, read back from the endpoint."""
    sqs = client(endpoints)
    url, name = _given_queue(endpoints)
    if not (url or name):
        probe = Destination("brokerbench-describe")
        prepare(endpoints, params, probe)
        url = queue_url(sqs, endpoints, probe)
    elif not url:
        url = queue_url(sqs, endpoints, Destination(name))
    response = _call(endpoints, sqs.get_queue_attributes, QueueUrl=url, AttributeNames=["All"])
    attributes = response.get("Attributes", {})
    server = endpoints.get("server")
    headers = response.get("ResponseMetadata", {}).get("HTTPHeaders", {})
    return {
        "version": server or "Amazon SQS (managed service)",
        "endpoint": endpoint_url(endpoints),
        "region": endpoints.get("region", "us-east-1"),
        "http_server": headers.get("server", ""),
        "queue": url,
        "queue_attributes": {
            key: attributes.get(key, "")
            for key in (
                "VisibilityTimeout",
                "MessageRetentionPeriod",
                "ReceiveMessageWaitTimeSeconds",
                "DelaySeconds",
                "SqsManagedSseEnabled",
            )
            if key in attributes
        },
        "receive": {
            "visibility_timeout_s": params.visibility_timeout,
            "wait_time_s": params.wait_time,
        },
        "batch_limit": MAX_BATCH_ENTRIES,
        "replication": (
            f"{server}: one local server, no replication"
            if server
            else "managed by SQS: stored redundantly across availability zones"
        ),
    }


class SqsAdapter(Adapter[str]):
    """One worker's client; a received message's receipt is its receipt handle."""

    def __init__(self, endpoints: Endpoints, params: SqsParams, destination: Destination):
        self.endpoints = endpoints
        self.params = params
        self.sqs = client(endpoints, read_timeout=params.wait_time + 10)
        self.url = queue_url(self.sqs, endpoints, destination)

    def send(self, batch: Sequence[bytes]) -> None:
        for chunk in chunks([body.decode("utf-8") for body in batch]):
            entries = [{"Id": str(i), "MessageBody": body} for i, body in enumerate(chunk)]
            response = _call(
                self.endpoints, self.sqs.send_message_batch, QueueUrl=self.url, Entries=entries
            )
            check_batch(response, len(entries), "SendMessageBatch")

    def receive(self, max_n: int) -> list[Received[str]]:
        response = _call(
            self.endpoints,
            self.sqs.receive_message,
            QueueUrl=self.url,
            MaxNumberOfMessages=max(1, min(max_n, MAX_BATCH_ENTRIES)),
            WaitTimeSeconds=self.params.wait_time,
            VisibilityTimeout=self.params.visibility_timeout,
            MessageSystemAttributeNames=["ApproximateReceiveCount"],
        )
        return [
            Received(
                body=m["Body"].encode("utf-8"),
                receipt=m["ReceiptHandle"],
                redelivered=int(m.get("Attributes", {}).get("ApproximateReceiveCount", "1")) > 1,
            )
            for m in response.get("Messages", [])
        ]

    def ack(self, receipts: Sequence[str]) -> None:
        handles = list(receipts)
        for start in range(0, len(handles), MAX_BATCH_ENTRIES):
            part = handles[start : start + MAX_BATCH_ENTRIES]
            entries = [{"Id": str(i), "ReceiptHandle": h} for i, h in enumerate(part)]
            response = _call(
                self.endpoints, self.sqs.delete_message_batch, QueueUrl=self.url, Entries=entries
            )
            check_batch(response, len(entries), "DeleteMessageBatch")

    def close(self) -> None:
        self.sqs.close()


def check_batch(response: dict[str, Any], expected: int, operation: str) -> None:
    """Raise unless every entry of a batch call succeeded."""
    failed = response.get("Failed") or []
    succeeded = len(response.get("Successful") or [])
    if failed:
        first = failed[0]
        raise SqsBatchError(
            f"{operation}: {len(failed)} of {expected} entries failed "
            f"(first: {first.get('Code', '?')}: {first.get('Message', '')})"
        )
    if succeeded != expected:
        raise SqsBatchError(f"{operation}: {succeeded} of {expected} entries confirmed")


def connect(endpoints: Endpoints, params: SqsParams, destination: Destination) -> SqsAdapter:
    return SqsAdapter(endpoints, params, destination)
