"""Message keys and the per-key order check of one receiver (docs/measurement.md §2, §5).

A message's key is not chosen at random but derived from its identity — sender node,
worker, sequence number — by a fixed hash, so that a receiver finds the key of every
message it gets without reading anything beyond the header, and nothing about keys has to
be carried in the message itself. The hash gives a number ``u`` uniform in [0, 1); the key
is ``⌊u·keys⌋`` (uniform), or the first key whose cumulative Zipf weight exceeds ``u``
(``key_zipf = s``: key ``k`` has weight 1 / (k + 1)^s, key 0 the most frequent).

Both ends work per batch: :meth:`KeyScheme.keys` for a sender's batch (plain Python for the
few messages of a send batch, numpy for a large one), :meth:`KeyScheme.of_columns` for a
receiver's (numpy arrays or lists, as :class:`workload.engine.message.Reader` reads them); the two
give the same key for the same identity.

:class:`OrderTracker` is one receiver worker's memory of the highest sequence number it has
received from each (sender node, sender worker, key); a message below it arrived *late*.
Whether a late message is a reordering is the analysis's call, which sees every copy of it
(a copy received twice is a duplicate, never a reordering).
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from typing import Any

import numpy as np

from workload.model.sections import LoadSection

_MASK = (1 << 64) - 1
_GAMMA = 0x9E3779B97F4A7C15
_M1 = 0xBF58476D1CE4E5B9
_M2 = 0x94D049BB133111EB
#: A message's identity as one 64-bit number: node (10 bits) | worker (14) | sequence (40),
#: the widths of the header's hex fields (3, 4 and 10 digits).
_NODE_SHIFT, _WORKER_SHIFT = 54, 40
_UNIT = 2.0**-53
#: Batches of at least this many messages are keyed with numpy.
NUMPY_BATCH = 32


def _mix(x: int) -> int:
    """The SplitMix64 finaliser of ``x`` (Python ints, masked to 64 bits)."""
    z = (x + _GAMMA) & _MASK
    z = ((z ^ (z >> 30)) * _M1) & _MASK
    z = ((z ^ (z >> 27)) * _M2) & _MASK
    return z ^ (z >> 31)


def _mix_array(x: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """:func:`_mix` over a uint64 array (its arithmetic wraps modulo 2^64, as masked above)."""
    with np.errstate(over="ignore"):
        z = x + np.uint64(_GAMMA)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(_M1)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(_M2)
    return z ^ (z >> np.uint64(31))


class KeyScheme:
    """Which of ``count`` keys each message carries (see the module's docstring)."""

    __slots__ = ("_bounds", "cdf", "count", "zipf")

    def __init__(self, count: int, zipf: float | None = None) -> None:
        self.count = count
        self.zipf = zipf
        self.cdf: np.ndarray[Any, Any] | None = None
        self._bounds: list[float] = []
        if zipf is not None:
            weights = 1.0 / np.arange(1, count + 1, dtype=np.float64) ** zipf
            cdf = np.cumsum(weights) / weights.sum()
            cdf[-1] = 2.0  # every u < 1 falls at or before the last key, rounding aside
            self.cdf = cdf
            self._bounds = cdf.tolist()

    @classmethod
    def of(cls, load: LoadSection) -> KeyScheme | None:
        """The scheme a point's load asks for; None for a keyless one."""
        return None if load.keys is None else cls(load.keys, load.key_zipf)

    @staticmethod
    def name(key: int) -> bytes:
        """What a key is sent as: ``k<number>`` (ASCII; a valid subject token or record key)."""
        return b"k%d" % key

    def key_of(self, node: int, worker: int, seq: int) -> int:
        """The key of one message."""
        x = (int(node) << _NODE_SHIFT) | (int(worker) << _WORKER_SHIFT) | int(seq)
        u = (_mix(x) >> 11) * _UNIT
        if self.cdf is None:
            return int(u * self.count)
        return bisect.bisect_right(self._bounds, u)

    def keys(self, node: int, worker: int, first_seq: int, count: int) -> list[int]:
        """The keys of one sender worker's messages ``first_seq`` … ``first_seq + count − 1``."""
        if count >= NUMPY_BATCH:
            seqs = np.arange(first_seq, first_seq + count, dtype=np.int64)
            return self.of_columns(node, worker, seqs).tolist()
        base = (node << _NODE_SHIFT) | (worker << _WORKER_SHIFT)
        mix, unit = _mix, _UNIT
        if self.cdf is None:
            n = self.count
            return [
                int((mix(base | s) >> 11) * unit * n) for s in range(first_seq, first_seq + count)
            ]
        bounds, right = self._bounds, bisect.bisect_right
        return [
            right(bounds, (mix(base | s) >> 11) * unit) for s in range(first_seq, first_seq + count)
        ]

    def of_columns(self, nodes: Any, workers: Any, seqs: Any) -> np.ndarray[Any, Any]:
        """The keys of received identities, column by column (arrays, lists or scalars for
        ``nodes`` and ``workers``), as an int64 array."""
        x = (
            (np.asarray(nodes, dtype=np.uint64) << np.uint64(_NODE_SHIFT))
            | (np.asarray(workers, dtype=np.uint64) << np.uint64(_WORKER_SHIFT))
            | np.asarray(seqs, dtype=np.uint64)
        )
        u = (_mix_array(x) >> np.uint64(11)).astype(np.float64) * _UNIT
        if self.cdf is None:
            return (u * self.count).astype(np.int64)
        return np.searchsorted(self.cdf, u, side="right").astype(np.int64)


#: The group of (sender node, sender worker, key) as one number: node 10 bits, worker 14,
#: key 20 (:data:`workload.model.bounds.MAX_KEYS` keys at most).
_GROUP_NODE, _GROUP_WORKER = 34, 20
#: A sorted group's rank above the sequence numbers (each below 2^40, plus one).
_RANK_SHIFT = 41
_LOW = (1 << _RANK_SHIFT) - 1


class OrderTracker:
    """One receiver worker's highest sequence number received so far per (sender node,
    sender worker, key); :meth:`late` names the messages of a batch that arrived below it.

    Messages the broker marked as delivered again neither count as late nor raise the
    mark: a redelivery is not a reordering (docs/measurement.md §5).
    """

    __slots__ = ("highest", "scheme")

    def __init__(self, scheme: KeyScheme) -> None:
        self.scheme = scheme
        self.highest: dict[int, int] = {}

    def late(self, nodes: Any, workers: Any, seqs: Any, again: Sequence[int] = ()) -> list[int]:
        """Positions (in receive order) of the batch's messages that arrived late: a higher
        sequence number of the same sender worker and key came to this receiver before.
        ``again``: positions the broker marked as redelivered (skipped)."""
        if not len(seqs):
            return []
        keys = self.scheme.of_columns(nodes, workers, seqs)
        if len(seqs) < NUMPY_BATCH:
            return self._late_python(
                list(nodes), list(workers), list(seqs), keys.tolist(), set(again)
            )
        return self._late_numpy(nodes, workers, seqs, keys, again)

    def _late_python(
        self,
        nodes: list[int],
        workers: list[int],
        seqs: list[int],
        keys: list[int],
        again: set[int],
    ) -> list[int]:
        highest = self.highest
        late: list[int] = []
        for i, (n, w, s, k) in enumerate(zip(nodes, workers, seqs, keys, strict=True)):
            if i in again:
                continue
            group = (n << _GROUP_NODE) | (w << _GROUP_WORKER) | k
            mark = highest.get(group, -1)
            if s < mark:
                late.append(i)
            elif s > mark:
                highest[group] = s
        return late

    def _late_numpy(
        self, nodes: Any, workers: Any, seqs: Any, keys: np.ndarray[Any, Any], again: Sequence[int]
    ) -> list[int]:
        seq = np.asarray(seqs, dtype=np.int64)
        group = (
            (np.asarray(nodes, dtype=np.int64) << _GROUP_NODE)
            | (np.asarray(workers, dtype=np.int64) << _GROUP_WORKER)
            | keys
        )
        position = np.arange(len(seq))
        if len(again):
            keep = np.ones(len(seq), dtype=bool)
            keep[np.asarray(again, dtype=np.int64)] = False
            position, group, seq = position[keep], group[keep], seq[keep]
            if not len(seq):
                return []
        order = np.lexsort((position, group))  # by group, then in receive order
        group, seq, position = group[order], seq[order], position[order]
        starts = np.empty(len(group), dtype=bool)
        starts[0] = True
        starts[1:] = group[1:] != group[:-1]
        rank = np.cumsum(starts) - 1
        firsts = group[starts].tolist()
        highest = self.highest
        mark = np.array([highest.get(g, -1) for g in firsts], dtype=np.int64) + 1
        # Within each group, the highest (sequence number + 1) so far, this message included:
        # the rank above the bits keeps every group's running maximum to itself.
        tagged = (rank << _RANK_SHIFT) | (seq + 1)
        running = np.maximum.accumulate(tagged) & _LOW
        before = np.empty(len(seq), dtype=np.int64)
        before[0] = 0
        before[1:] = running[:-1]
        before[starts] = 0
        before = np.maximum(before, mark[rank])
        late = position[seq + 1 < before]
        ends = np.append(np.flatnonzero(starts)[1:], len(seq)) - 1
        tops = np.maximum(running[ends], mark) - 1
        for g, top in zip(firsts, tops.tolist(), strict=True):
            if top >= 0:
                highest[g] = top
        late.sort()
        return late.tolist()
