"""A point's senders start once its receivers are in (local runs).

Receivers connect while the senders do; for most systems a receiver that comes a moment
late misses nothing, since the queue keeps what was sent. A consumer group is different:
each member that joins moves partitions away from the others, and while the group
rebalances nobody receives — a group of 16 Kafka consumers whose processes start over a
few seconds rebalances several times, and the backlog of the first seconds then shows as
an end-to-end latency of seconds that has nothing to do with the steady state. So the
senders of a local point wait until every receiver worker of the point has *settled*:
joined (:meth:`brokers.base.Receiver.joined`; a receiver holding for a backlog counts as
joined) or ended (a receiver that failed to connect is not awaited). A gate that has not
opened after :data:`START_WAIT` seconds lets the senders go anyway; the receivers' records
then show how late they were.

On AWS the client machines share no memory, and each sender starts when its machine is
released; the gate is local only.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass
from typing import Any, Protocol

#: The longest senders wait for the receivers (seconds): a group's rebalances take a few
#: heartbeats each, far less than this.
START_WAIT = 60.0
#: How often a waiting sender looks at the count.
POLL = 0.05


class SharedCount(Protocol):
    """A ``multiprocessing.Value("i")``: a count every node process of the point shares."""

    value: int

    def get_lock(self) -> AbstractContextManager[Any]: ...


@dataclass
class StartGate:
    """The receivers' count the senders of one point wait for (see the module)."""

    #: Receiver workers that joined or ended so far.
    settled: SharedCount
    #: Receiver workers of the point (all nodes, all processes).
    receivers: int
    wait_limit: float = START_WAIT

    def settle(self) -> None:
        """One receiver worker joined or ended (call once per worker: :class:`Once`)."""
        with self.settled.get_lock():
            self.settled.value += 1

    def open(self) -> bool:
        return self.settled.value >= self.receivers

    def count(self) -> tuple[int, int]:
        """Receiver workers settled so far, of those awaited."""
        return self.settled.value, self.receivers

    def wait(self, stopped: Callable[[], bool]) -> bool:
        """Until every receiver settled (True), the run stopped or the limit passed (False)."""
        deadline = time.monotonic() + self.wait_limit
        while not self.open():
            if stopped() or time.monotonic() >= deadline:
                return False
            time.sleep(POLL)
        return True

    async def wait_async(self, stopped: Callable[[], bool]) -> bool:
        """:meth:`wait` for an asyncio worker."""
        deadline = time.monotonic() + self.wait_limit
        while not self.open():
            if stopped() or time.monotonic() >= deadline:
                return False
            await asyncio.sleep(POLL)
        return True


def _nothing() -> None:
    """No gate to tell (a node on a machine of its own, a sender)."""


class Once:
    """A call made at most once (a worker settles once, whether it joined or ended);
    ``called`` says whether it was."""

    __slots__ = ("_call", "called")

    def __init__(self, call: Callable[[], None] = _nothing) -> None:
        self._call = call
        self.called = False

    def __call__(self) -> None:
        if not self.called:
            self.called = True
            self._call()
