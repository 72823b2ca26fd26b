"""EventStoreDB: what can be tested without a server.

No EventStoreDB/KurrentDB server runs here, so nothing in this module talks to one. The
adapter's batching and ack bookkeeping are checked against an in-memory stand-in for the
client object (``FakeClient``); the rest covers parameters, the AWS recipe, the scenarios
and that an unreachable endpoint fails fast. Whether the real server accepts these calls
is only shown by a run on AWS."""

from __future__ import annotations

import inspect
import queue
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import pytest
from kurrentdbclient import KurrentDBClient, StreamState
from pydantic import ValidationError

from brokers import registry
from brokers.base import Destination, Endpoints
from brokers.errors import BrokerConnectionError
from brokers.eventstore.adapter import (
    CONTENT_TYPE,
    EVENT_TYPE,
    EventStoreAdapter,
    SubscriptionClosed,
    client_uri,
    subscription_settings,
)
from brokers.eventstore.cloud import EventStoreCloud, render_node_config
from brokers.local import free_ports
from tests.conftest import SCENARIOS, brokerbench
from workload.model.scenario_file import load_scenario

pytestmark = pytest.mark.eventstore

SYSTEM = registry.get("eventstore")
NODES = {"node": ["10.42.1.10", "10.42.1.11", "10.42.1.12"]}


def params(**values: object):
    return SYSTEM.params_model.model_validate(values)


# -- an in-memory stand-in for the client object ---------------------------------------------


@dataclass
class FakeEvent:
    data: bytes
    retry_count: int = 0
    id: uuid.UUID = field(default_factory=uuid.uuid4)

    @property
    def ack_id(self) -> uuid.UUID:
        return self.id


_END = object()


class FakeSubscription:
    """Yields what is put into it; records acks, nacks and stop."""

    def __init__(self, kwargs: dict[str, Any]) -> None:
        self.kwargs = kwargs
        self.events: queue.Queue[Any] = queue.Queue()
        self.acked: list[uuid.UUID] = []
        self.nacked: list[tuple[uuid.UUID, str]] = []
        self.stopped = False

    def __iter__(self) -> FakeSubscription:
        return self

    def __next__(self) -> FakeEvent:
        item = self.events.get()
        if item is _END:
            raise StopIteration
        if isinstance(item, Exception):
            raise item
        return item

    def ack(self, event_id: uuid.UUID) -> None:
        self.acked.append(event_id)

    def nack(self, event_id: uuid.UUID, action: str) -> None:
        self.nacked.append((event_id, action))

    def stop(self) -> None:
        self.stopped = True
        self.events.put(_END)


class FakeClient:
    def __init__(self) -> None:
        self.appends: list[tuple[str, list[Any], Any, float | None]] = []
        self.subscriptions: list[tuple[str, str, FakeSubscription]] = []
        self.closed = False

    def append_to_stream(
        self, stream_name: str, *, events: Any, current_version: Any, timeout: float | None = None
    ) -> int:
        self.appends.append((stream_name, list(events), current_version, timeout))
        return len(self.appends)

    def read_subscription_to_stream(
        self, group_name: str, stream_name: str, **kwargs: Any
    ) -> FakeSubscription:
        subscription = FakeSubscription(kwargs)
        self.subscriptions.append((group_name, stream_name, subscription))
        return subscription

    def close(self) -> None:
        self.closed = True


def adapter_with_fake(**values: object) -> tuple[EventStoreAdapter, FakeClient]:
    fake = FakeClient()
    values = {"receive_wait": 0.1, **values}
    return EventStoreAdapter(fake, params(**values), Destination("bb_stream_p0")), fake


def deliver(adapter: EventStoreAdapter, fake: FakeClient, *events: Any) -> FakeSubscription:
    """Open the adapter's subscription (first receive) and feed it events."""
    if not fake.subscriptions:
        assert adapter.receive(1) == []
    (_, _, subscription) = fake.subscriptions[-1]
    for event in events:
        subscription.events.put(event)
    return subscription


# -- sending ---------------------------------------------------------------------------------


def test_a_batch_is_one_append_in_order() -> None:
    adapter, fake = adapter_with_fake(append_timeout=7)
    adapter.send([b"bb1|a", b"bb1|b", b"bb1|c"])
    ((stream, events, version, timeout),) = fake.appends
    assert stream == "bb_stream_p0" and version == StreamState.ANY and timeout == 7
    assert [e.data for e in events] == [b"bb1|a", b"bb1|b", b"bb1|c"]
    assert {e.type for e in events} == {EVENT_TYPE}
    assert {e.content_type for e in events} == {CONTENT_TYPE}
    assert len({e.id for e in events}) == 3


def test_a_sender_never_joins_the_consumer_group() -> None:
    adapter, fake = adapter_with_fake()
    for _ in range(3):
        adapter.send([b"bb1|x"])
    adapter.close()
    assert fake.subscriptions == [] and fake.closed


# -- receiving and acking --------------------------------------------------------------------


def test_the_subscription_uses_the_group_and_client_buffers() -> None:
    adapter, fake = adapter_with_fake(
        group="g1", event_buffer_size=321, max_ack_batch_size=12, max_ack_delay=0.3
    )
    deliver(adapter, fake)
    ((group, stream, subscription),) = fake.subscriptions
    assert (group, stream) == ("g1", "bb_stream_p0")
    assert subscription.kwargs == {
        "event_buffer_size": 321,
        "max_ack_batch_size": 12,
        "max_ack_delay": 0.3,
    }
    adapter.close()


def test_receive_returns_at_most_max_n_and_keeps_the_rest() -> None:
    adapter, fake = adapter_with_fake()
    events = [FakeEvent(b"bb1|%d" % i) for i in range(7)]
    deliver(adapter, fake, *events)
    time.sleep(0.1)
    first = adapter.receive(5)
    second = adapter.receive(5)
    assert [m.body for m in first + second] == [e.data for e in events]
    assert (len(first), len(second)) == (5, 2)
    assert [m.receipt for m in first + second] == [e.id for e in events]
    adapter.close()


def test_an_empty_receive_waits_at_most_receive_wait() -> None:
    adapter, fake = adapter_with_fake(receive_wait=0.2)
    deliver(adapter, fake)
    started = time.monotonic()
    assert adapter.receive(10) == []
    assert 0.15 <= time.monotonic() - started < 1.0
    adapter.close()


def test_a_retried_event_is_marked_redelivered() -> None:
    adapter, fake = adapter_with_fake()
    deliver(adapter, fake, FakeEvent(b"bb1|first"), FakeEvent(b"bb1|again", retry_count=2))
    time.sleep(0.1)
    got = adapter.receive(10)
    assert [(m.body, m.redelivered) for m in got] == [(b"bb1|first", False), (b"bb1|again", True)]
    adapter.close()


def test_ack_passes_each_event_id_once_and_clears_it() -> None:
    adapter, fake = adapter_with_fake()
    events = [FakeEvent(b"bb1|%d" % i) for i in range(4)]
    subscription = deliver(adapter, fake, *events)
    time.sleep(0.1)
    got = adapter.receive(10)
    adapter.ack([m.receipt for m in got[:3]])
    assert subscription.acked == [e.id for e in events[:3]]
    assert adapter.outstanding == {events[3].id}
    adapter.close()


def test_close_releases_what_was_not_acked_for_immediate_retry() -> None:
    adapter, fake = adapter_with_fake()
    events = [FakeEvent(b"bb1|%d" % i) for i in range(5)]
    subscription = deliver(adapter, fake, *events)
    time.sleep(0.1)
    got = adapter.receive(3)  # 3 handed out, 2 still buffered
    adapter.ack([got[0].receipt])
    adapter.close()
    assert sorted(subscription.nacked) == sorted((e.id, "retry") for e in events[1:])
    assert subscription.stopped and fake.closed
    assert adapter.outstanding == set()


def test_a_subscription_that_ends_fails_a_receive_and_is_reopened() -> None:
    adapter, fake = adapter_with_fake(receive_wait=0.5)
    first = deliver(adapter, fake, FakeEvent(b"bb1|before"), RuntimeError("connection reset"))
    time.sleep(0.1)
    assert [m.body for m in adapter.receive(10)] == [b"bb1|before"]
    with pytest.raises(SubscriptionClosed, match="connection reset"):
        adapter.receive(10)
    assert first.stopped and adapter.outstanding == set()
    assert adapter.receive(10) == []  # a new subscription
    assert len(fake.subscriptions) == 2
    second = deliver(adapter, fake, FakeEvent(b"bb1|after", retry_count=1))
    (got,) = adapter.receive(10)
    assert got.body == b"bb1|after" and got.redelivered
    adapter.ack([got.receipt])
    assert second.acked == [got.receipt]
    adapter.close()


# -- configuration ---------------------------------------------------------------------------


def test_buffers_are_larger_than_the_client_library_defaults() -> None:
    create = inspect.signature(KurrentDBClient.create_subscription_to_stream).parameters
    read = inspect.signature(KurrentDBClient.read_subscription_to_stream).parameters
    settings = subscription_settings(params())
    for name in ("live_buffer_size", "read_batch_size", "history_buffer_size"):
        assert settings[name] > create[name].default
    assert params().event_buffer_size > read["event_buffer_size"].default
    assert settings["consumer_strategy"] == "RoundRobin"
    assert settings["max_subscriber_count"] == 0  # unbounded: many workers share the group
    with pytest.raises(ValidationError):
        params(receive_wait=2)


def test_client_uri_lists_every_node_as_a_gossip_seed() -> None:
    endpoints = EventStoreCloud().endpoints(NODES)
    uri = client_uri(endpoints)
    assert uri.startswith("kurrentdb://10.42.1.10:2113,10.42.1.11:2113,10.42.1.12:2113?")
    assert "Tls=false" in uri and "NodePreference=leader" in uri


def test_each_node_seeds_gossip_with_the_other_two() -> None:
    for index, address in enumerate(NODES["node"]):
        config = render_node_config(index, NODES)
        assert "ClusterSize: 3" in config and f"NodeIp: {address}" in config
        seeds = next(line for line in config.splitlines() if line.startswith("GossipSeed:"))
        others = [a for a in NODES["node"] if a != address]
        assert seeds == "GossipSeed: " + ",".join(f"{a}:2113" for a in others)
        assert "UnsafeDisableFlushToDisk: false" in config


def test_the_system_is_aws_only() -> None:
    assert SYSTEM.local is None and SYSTEM.cloud is not None
    assert SYSTEM.reference_topology.roles == {"node": 3}
    done = brokerbench("brokers", timeout=120)
    assert done.returncode == 0, done.stderr
    (line,) = [row for row in done.stdout.splitlines() if row.startswith("eventstore ")]
    assert line.rstrip().endswith("AWS only")


def test_scenarios_use_given_endpoints() -> None:
    for name in ("eventstore-smoke.toml", "eventstore-sweep.toml"):
        scenario = load_scenario(SCENARIOS / name)
        assert scenario.broker.deployment == "endpoints"


def test_unreachable_cluster_is_one_line_naming_the_host() -> None:
    (port,) = free_ports(1)
    endpoints = Endpoints(hosts=(f"127.0.0.1:{port}",), extra=(("tls", "false"),))
    started = time.monotonic()
    with pytest.raises(BrokerConnectionError) as caught:
        SYSTEM.connect(endpoints, params(), Destination("s"))
    assert time.monotonic() - started < 30
    message = str(caught.value)
    assert f"127.0.0.1:{port}" in message and "\n" not in message
