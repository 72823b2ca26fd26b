"""SQS: batching and failure handling of the adapter (against a stubbed boto3 client), then
the adapter against the local stand-in, ElasticMQ."""

from __future__ import annotations

import time

import pytest
from botocore.exceptions import ClientError
from botocore.stub import ANY, Stubber
from pydantic import ValidationError

from brokers import registry
from brokers.base import Destination, Endpoints, LocalCluster
from brokers.cloud import CreatedService
from brokers.errors import BrokerConnectionError
from brokers.local import free_ports
from brokers.sqs.adapter import (
    SqsAdapter,
    SqsBatchError,
    check_batch,
    chunks,
    client,
    endpoint_url,
)
from tests.conftest import LocalBrokers
from tests.support import drain, prepared

pytestmark = pytest.mark.sqs

SYSTEM = registry.get("sqs")
QUEUE_URL = "http://127.0.0.1:9/000000000000/given"
STUBBED = Endpoints(
    hosts=("127.0.0.1:9",),
    extra=(("credentials", "dummy"), ("queue_url", QUEUE_URL), ("region", "us-east-1")),
)


def params(**values: object):
    return SYSTEM.params_model.model_validate(values)


def stubbed_adapter() -> tuple[SqsAdapter, Stubber]:
    adapter = SYSTEM.connect(STUBBED, params(), Destination("unused"))
    assert isinstance(adapter, SqsAdapter)
    return adapter, Stubber(adapter.sqs)


def ok(n: int) -> dict[str, object]:
    return {
        "Successful": [
            {"Id": str(i), "MessageId": f"m{i}", "MD5OfMessageBody": "x"} for i in range(n)
        ],
        "Failed": [],
    }


# -- without a server ----------------------------------------------------------------------


def test_batches_are_split_at_ten_entries() -> None:
    assert [len(c) for c in chunks([f"m{i}" for i in range(23)])] == [10, 10, 3]
    assert [len(c) for c in chunks(["m"] * 10)] == [10]


def test_batches_are_split_at_256_kib() -> None:
    body = "x" * (100 * 1024)
    assert [len(c) for c in chunks([body] * 5)] == [2, 2, 1]


def test_a_batch_of_23_is_three_calls_of_10_10_3() -> None:
    adapter, stub = stubbed_adapter()
    for n in (10, 10, 3):
        stub.add_response("send_message_batch", ok(n), {"QueueUrl": QUEUE_URL, "Entries": ANY})
    with stub:
        adapter.send([b"bb1|m%d" % i for i in range(23)])
        stub.assert_no_pending_responses()


def test_a_failed_entry_fails_the_whole_send() -> None:
    adapter, stub = stubbed_adapter()
    response = ok(9)
    response["Failed"] = [
        {"Id": "9", "SenderFault": False, "Code": "InternalError", "Message": "try again"}
    ]
    stub.add_response("send_message_batch", response)
    with stub, pytest.raises(SqsBatchError, match=r"1 of 10 entries failed.*InternalError"):
        adapter.send([b"m"] * 10)


def test_a_batch_with_fewer_confirmations_than_entries_fails() -> None:
    with pytest.raises(SqsBatchError, match="9 of 10 entries confirmed"):
        check_batch(ok(9), 10, "SendMessageBatch")


def test_a_failed_delete_fails_the_ack() -> None:
    adapter, stub = stubbed_adapter()
    stub.add_response(
        "delete_message_batch",
        {
            "Successful": [{"Id": "0"}],
            "Failed": [{"Id": "1", "SenderFault": True, "Code": "ReceiptHandleIsInvalid"}],
        },
    )
    with stub, pytest.raises(SqsBatchError, match="DeleteMessageBatch"):
        adapter.ack(["h0", "h1"])


def test_receive_asks_for_at_most_ten_with_the_visibility_timeout() -> None:
    adapter, stub = stubbed_adapter()
    stub.add_response(
        "receive_message",
        {
            "Messages": [
                {"Body": "bb1|a", "ReceiptHandle": "h1", "Attributes": {}},
                {
                    "Body": "bb1|b",
                    "ReceiptHandle": "h2",
                    "Attributes": {"ApproximateReceiveCount": "2"},
                },
            ]
        },
        {
            "QueueUrl": QUEUE_URL,
            "MaxNumberOfMessages": 10,
            "WaitTimeSeconds": 1,
            "VisibilityTimeout": 30,
            "MessageSystemAttributeNames": ["ApproximateReceiveCount"],
        },
    )
    with stub:
        got = adapter.receive(50)
    assert [(m.body, m.receipt, m.redelivered) for m in got] == [
        (b"bb1|a", "h1", False),
        (b"bb1|b", "h2", True),
    ]


def test_params_keep_receives_within_a_second() -> None:
    with pytest.raises(ValidationError):
        params(wait_time=2)
    with pytest.raises(ValidationError):
        params(visibility_timout=5)  # misspelt
    assert params().visibility_timeout == 30


def test_unreachable_endpoint_is_one_line_naming_the_host() -> None:
    (port,) = free_ports(1)
    endpoints = Endpoints(hosts=(f"127.0.0.1:{port}",), extra=(("credentials", "dummy"),))
    started = time.monotonic()
    with pytest.raises(BrokerConnectionError) as caught:
        SYSTEM.connect(endpoints, params(), Destination("q"))
    assert time.monotonic() - started < 30
    message = str(caught.value)
    assert f"127.0.0.1:{port}" in message and "\n" not in message


def test_the_stand_in_is_labelled_and_aws_runs_the_queue() -> None:
    assert SYSTEM.local is not None and "ElasticMQ" in SYSTEM.local.stand_in
    assert SYSTEM.reference_topology.roles == {}
    assert SYSTEM.cloud is not None and SYSTEM.cloud.faults is None
    queue = SYSTEM.cloud.managed
    assert queue is not None and queue.resource == "aws:sqs/queue:Queue"
    assert queue.attributes == {
        "visibility_timeout_seconds": 30,
        "message_retention_seconds": 4 * 24 * 3600,
        "sqs_managed_sse_enabled": True,
    }
    assert {"sqs:SendMessage", "sqs:ReceiveMessage", "sqs:DeleteMessage"} <= set(
        queue.client_actions
    )
    url = "https://sqs.eu-west-1.amazonaws.com/123456789012/queue-abc"
    arn = "arn:aws:sqs:eu-west-1:123456789012:queue-abc"
    endpoints = queue.endpoints(CreatedService("queue-abc", url, arn, "eu-west-1"))
    assert endpoints == Endpoints(
        hosts=("sqs.eu-west-1.amazonaws.com:443",),
        extra=(("queue_name", "queue-abc"), ("queue_url", url), ("region", "eu-west-1")),
    )
    assert endpoint_url(endpoints) == "https://sqs.eu-west-1.amazonaws.com:443"


# -- against ElasticMQ -----------------------------------------------------------------------


@pytest.fixture(scope="module")
def elasticmq(local_brokers: LocalBrokers) -> LocalCluster:
    return local_brokers.get(SYSTEM, "single")


@pytest.mark.slow
def test_round_trip_of_a_batch_larger_than_ten(elasticmq) -> None:
    adapter = prepared(SYSTEM, elasticmq.endpoints, "bb_round_trip")
    bodies = [b"bb1|round-trip|%d" % i for i in range(25)]
    adapter.send(bodies)
    got = drain(adapter, 25)
    assert sorted(m.body for m in got) == sorted(bodies)
    assert not any(m.redelivered for m in got)
    adapter.ack([m.receipt for m in got])
    assert adapter.receive(10) == []
    adapter.close()


@pytest.mark.slow
def test_the_stand_in_enforces_the_batch_limit_of_ten(elasticmq) -> None:
    prepared(SYSTEM, elasticmq.endpoints, "bb_limit").close()
    sqs = client(elasticmq.endpoints)
    url = sqs.get_queue_url(QueueName="bb_limit")["QueueUrl"]
    entries = [{"Id": str(i), "MessageBody": "x"} for i in range(11)]
    with pytest.raises(ClientError, match="TooManyEntriesInBatchRequest"):
        sqs.send_message_batch(QueueUrl=url, Entries=entries)


@pytest.mark.slow
def test_describe_reads_back_the_queue_settings(elasticmq) -> None:
    # describe's probe queue may exist with other attributes (the conformance suite
    # describes the same server with the defaults): ElasticMQ refuses to create it again.
    sqs = client(elasticmq.endpoints)
    for url in sqs.list_queues().get("QueueUrls", []):
        if url.endswith("/brokerbench-describe"):
            sqs.delete_queue(QueueUrl=url)
    info = SYSTEM.describe(elasticmq.endpoints, params(visibility_timeout=45))
    assert info["version"].startswith("ElasticMQ")
    assert info["queue_attributes"]["VisibilityTimeout"] == "45"
    assert info["batch_limit"] == 10
    assert "no replication" in info["replication"]


@pytest.mark.slow
def test_a_queue_given_by_the_stack_is_used_for_every_point(elasticmq) -> None:
    prepared(SYSTEM, elasticmq.endpoints, "bb_stack_queue").close()
    url = client(elasticmq.endpoints).get_queue_url(QueueName="bb_stack_queue")["QueueUrl"]
    given = Endpoints(
        hosts=elasticmq.endpoints.hosts,
        extra=(*elasticmq.endpoints.extra, ("queue_name", "bb_stack_queue"), ("queue_url", url)),
    )
    SYSTEM.prepare(given, params(), Destination("bb_point_7"))  # checks, creates nothing
    adapter = SYSTEM.connect(given, params(), Destination("bb_point_7"))
    adapter.send([b"bb1|stack"])
    (got,) = drain(adapter, 1)
    adapter.ack([got.receipt])
    adapter.close()
    queues = client(elasticmq.endpoints).list_queues().get("QueueUrls", [])
    assert not any(q.endswith("bb_point_7") for q in queues)
