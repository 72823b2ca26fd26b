"""The contract every system that runs here keeps, tested through its adapter against the
real broker (the topology its own tests use, shared with them; see ``local_brokers`` in
conftest): what is sent is received once with the same payload; what a receiver did not
acknowledge is delivered to the next one; the settings are read back; and a whole run of the
system's smoke scenario against it accounts for every message (nothing lost or duplicated,
the settings and caveats in the run's context and summary).

Systems without a local deployment (Redpanda, EventStoreDB: no server can be had here) are
not collected; one whose local deployment is ``missing()`` something is skipped, naming it.
``pytest -m <system>`` selects a system's tests here too.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from brokers import registry
from brokers.base import BrokerSystem, Destination, Endpoints, LocalCluster, Received
from tests.conftest import SCENARIOS
from tests.support import smoke_run

SYSTEMS = [name for name, system in registry.systems().items() if system.local is not None]

#: Parameters that make a receiver's unacknowledged messages come back within seconds
#: where that takes a visibility timeout, an ack wait or a commit (else the defaults).
QUICK_REDELIVERY: dict[str, dict[str, Any]] = {
    "kafka": {"partitions": 2, "commit_interval": 0.1},
    "kmq": {"redelivery_timeout": 3.0, "commit_interval": 1.0},
    "mongodb": {"visibility_timeout": 1.5},
    "nats": {"ack_wait": 1.0},
    "postgresql": {"visibility_timeout": 0.5},
    "redis": {"claim_after": 0.4},
    "rocketmq": {"invisible_duration": 10},
    "sqs": {"visibility_timeout": 3, "wait_time": 0},
}


def each_system() -> list[Any]:
    return [
        pytest.param(name, marks=[getattr(pytest.mark, name), pytest.mark.slow], id=name)
        for name in SYSTEMS
    ]


class Client:
    """One worker's adapter, connected as a node connects it — blocking, or asyncio (run on
    a loop of its own) as the system's adapter classes say — behind the same three
    blocking calls."""

    def __init__(
        self, system: BrokerSystem[Any], endpoints: Endpoints, params: Any, destination: Destination
    ) -> None:
        self.loop = asyncio.new_event_loop() if system.asyncio else None
        self.adapter = (
            self.loop.run_until_complete(system.connect_async(endpoints, params, destination))
            if self.loop is not None
            else system.connect_blocking(endpoints, params, destination)
        )

    def _run(self, result: Any) -> Any:
        return self.loop.run_until_complete(result) if self.loop is not None else result

    def send(self, batch: Sequence[bytes]) -> None:
        self._run(self.adapter.send(batch))

    def receive(self, max_n: int) -> list[Received[Any]]:
        return list(self._run(self.adapter.receive(max_n)))

    def ack(self, receipts: Sequence[Any]) -> None:
        self._run(self.adapter.ack(receipts))

    def close(self) -> None:
        self._run(self.adapter.close())
        if self.loop is not None:
            self.loop.close()


def receive_until(
    client: Client, wanted: set[bytes], ack: bool, timeout: float = 60
) -> list[Received[Any]]:
    """Receive until every wanted body arrived (or the timeout); acknowledge if ``ack``."""
    got: list[Received[Any]] = []
    deadline = time.monotonic() + timeout
    while not wanted <= {m.body for m in got} and time.monotonic() < deadline:
        messages = client.receive(10)
        got += messages
        if ack and messages:
            client.ack([m.receipt for m in messages])
    return got


def topology(system: BrokerSystem[Any]) -> str:
    """The topology the conformance tests (and the system's own tests) run."""
    assert system.local is not None
    return "cluster" if "cluster" in system.local.topologies else "single"


@pytest.fixture
def broker(system: str, local_brokers: Any) -> LocalCluster:
    described = registry.get(system)
    return local_brokers.get(described, topology(described))


def prepared(system: BrokerSystem[Any], broker: LocalCluster, name: str, **values: Any) -> Any:
    params = system.params_model.model_validate(values)
    system.prepare(broker.endpoints, params, Destination(name))
    return params


@pytest.mark.parametrize("system", each_system())
def test_round_trip(system: str, broker: LocalCluster) -> None:
    """Every confirmed message is received once, with its payload, none marked redelivered;
    once acknowledged nothing more comes."""
    bb = registry.get(system)
    params = prepared(bb, broker, f"bb_conformance_round_trip_{system}")
    destination = Destination(f"bb_conformance_round_trip_{system}")
    sender = Client(bb, broker.endpoints, params, destination)
    receiver = Client(bb, broker.endpoints, params, destination)
    try:
        sent = [b"round-trip-%02d" % i for i in range(30)]
        for i in range(0, 30, 10):
            sender.send(sent[i : i + 10])
        got = receive_until(receiver, set(sent), ack=True)
        assert sorted(m.body for m in got) == sorted(sent)
        assert not any(m.redelivered for m in got)
        assert receiver.receive(10) == []
    finally:
        sender.close()
        receiver.close()


@pytest.mark.parametrize("system", each_system())
def test_unacknowledged_messages_go_to_the_next_receiver(system: str, broker: LocalCluster) -> None:
    """A receiver acknowledges every other message it got, then closes: the next receiver
    gets every message not acknowledged; where acknowledgements are per message
    (``acks_per_message``), none of those that were."""
    bb = registry.get(system)
    params = prepared(
        bb, broker, f"bb_conformance_redelivery_{system}", **QUICK_REDELIVERY.get(system, {})
    )
    destination = Destination(f"bb_conformance_redelivery_{system}")
    sent = [b"redelivery-%02d" % i for i in range(10)]
    sender = Client(bb, broker.endpoints, params, destination)
    sender.send(sent)
    sender.close()

    first = Client(bb, broker.endpoints, params, destination)
    held = receive_until(first, set(sent), ack=False, timeout=30)
    assert len(held) >= 2, "the first receiver got fewer than two messages"
    acked = {m.body for m in held[::2]}
    first.ack([m.receipt for m in held[::2]])
    first.close()  # the others were never acknowledged

    second = Client(bb, broker.endpoints, params, destination)
    try:
        wanted = set(sent) - acked
        again = receive_until(second, wanted, ack=True)
        assert wanted <= {m.body for m in again}
        if bb.acks_per_message:
            assert not acked & {m.body for m in again}
    finally:
        second.close()


@pytest.mark.parametrize("system", each_system())
def test_describe_reads_back_the_settings(system: str, broker: LocalCluster) -> None:
    """The settings read back for the run context: a JSON object naming the server's version."""
    bb = registry.get(system)
    described = json.loads(json.dumps(bb.describe(broker.endpoints, bb.params_model())))
    assert isinstance(described["version"], str) and described["version"]
    assert len(described) > 1


@pytest.mark.integration
@pytest.mark.parametrize("system", each_system())
def test_a_smoke_run_accounts_for_every_message(
    system: str, broker: LocalCluster, spark: Any, tmp_path: Path
) -> None:
    """The system's shipped smoke scenario for this topology (``<system>-smoke.toml``, or
    ``<system>-cluster-smoke.toml`` for a cluster), run by ``brokerbench run`` against the
    broker: every confirmed message received once, nothing lost or duplicated; the run's
    context holds the settings read back, its summary the system's caveats."""
    bb = registry.get(system)
    shape = "-cluster" if topology(bb) == "cluster" else ""
    run = smoke_run(SCENARIOS / f"{system}{shape}-smoke.toml", broker.endpoints, spark, tmp_path)
    sent = int(run.row["sent"])
    assert sent > 0 and int(run.row["received"]) == sent
    assert int(run.row["lost"]) == 0 and int(run.row["duplicated"]) == 0
    assert run.context["broker"]["version"]
    assert bb.title in run.printed
    for caveat in bb.caveats:
        assert caveat in run.printed
    assert bb.local is not None and bb.local.stand_in in run.printed
