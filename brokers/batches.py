"""What a worker's client takes and hands out, a batch at a time (the client roles are
:mod:`brokers.base`): a send batch — a list of messages, a :class:`KeyedBatch` whose
messages carry keys, or a :class:`RowsBatch` that is one array — and what a receive call
handed out, message by message (:class:`Received`) or as columns (:class:`ReceivedBatch`),
with a receipt per message or receipts kept by group (:class:`GroupedReceipts`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, overload

import numpy as np

#: What a system's ``ack`` takes back from its ``receive`` to acknowledge one message.
R = TypeVar("R")


@dataclass(frozen=True, slots=True)
class Received(Generic[R]):
    """One message handed out by ``receive``: its payload and the receipt ``ack`` takes."""

    body: bytes
    receipt: R
    redelivered: bool = False


K = TypeVar("K")
V = TypeVar("V")


class GroupedReceipts(Sequence[tuple[K, V]]):
    """The receipts of one received batch kept by group — each partition's offsets, each
    stream key's entry ids, in the order handed out — rather than as a pair per message;
    its length is the number of messages. An adapter acknowledges a group at once."""

    __slots__ = ("groups", "size")

    def __init__(self, groups: dict[K, list[V]], size: int) -> None:
        self.groups = groups
        self.size = size

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: Any) -> Any:
        return [(k, v) for k, values in self.groups.items() for v in values][index]


@dataclass(slots=True)
class ReceivedBatch(Generic[R]):
    """What one receive call handed out, column by column (no object per message): the
    bodies, the receipts ``ack`` takes for them, and the positions of the bodies that were
    delivered before.

    ``receipts`` is one receipt per body, in order, or an object of the adapter's own that
    stands for all of them (its ``len`` is the number of bodies); the worker only hands it
    back to ``ack``.
    """

    bodies: list[bytes]
    receipts: Sequence[R]
    redelivered: Sequence[int] = ()

    @classmethod
    def of(cls, messages: Sequence[Received[R]]) -> ReceivedBatch[R]:
        """The batch of what ``receive`` returned."""
        return cls(
            [m.body for m in messages],
            [m.receipt for m in messages],
            [i for i, m in enumerate(messages) if m.redelivered],
        )


class KeyedBatch(list[bytes]):
    """A send batch whose messages carry keys (docs/measurement.md §2, keys): the bodies, as
    any batch, and ``keys``, one per body. Every sender takes it where it takes a batch; a
    system that sends keys reads them with :func:`keys_of`, one that has none sends the
    bodies alone (its :class:`KeySupport` is None)."""

    __slots__ = ("keys",)

    def __init__(self, bodies: Sequence[bytes], keys: Sequence[bytes]) -> None:
        super().__init__(bodies)
        self.keys = keys


class RowsBatch(Sequence[bytes]):
    """A send batch of messages of one size that is also one array: ``rows``, an
    (n × size) numpy array of bytes, a message a row (a sender stamps a large batch of one
    size as one array). Its messages as bytes objects are made when first asked for; a
    sender that can write the array as it is — Redis packs its commands from it — never
    asks, and skips making a Python object per message."""

    __slots__ = ("_bodies", "rows")

    def __init__(self, rows: np.ndarray) -> None:
        self.rows = rows
        self._bodies: list[bytes] | None = None

    def bodies(self) -> list[bytes]:
        """The messages as bytes objects (made once)."""
        if self._bodies is None:
            rows = self.rows
            n, size = rows.shape
            if n and rows[:, -1].all():  # numpy's fixed-width bytes drop trailing NULs
                self._bodies = rows.view(f"S{size}").ravel().tolist()
            else:
                flat = rows.tobytes()
                self._bodies = [flat[i : i + size] for i in range(0, n * size, size)]
        return self._bodies

    def __len__(self) -> int:
        return len(self.rows)

    @overload
    def __getitem__(self, index: int) -> bytes: ...
    @overload
    def __getitem__(self, index: slice) -> list[bytes]: ...
    def __getitem__(self, index: int | slice) -> bytes | list[bytes]:
        return self.bodies()[index]

    def __iter__(self) -> Iterator[bytes]:
        return iter(self.bodies())

    def __eq__(self, other: object) -> bool:
        if isinstance(other, RowsBatch | list):
            return self.bodies() == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]


def keys_of(batch: Sequence[bytes]) -> Sequence[bytes] | None:
    """The keys of a :class:`KeyedBatch` (one per body), None for a keyless batch."""
    return batch.keys if isinstance(batch, KeyedBatch) else None
