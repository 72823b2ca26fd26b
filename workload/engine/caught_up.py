"""When a point's receivers have everything (docs/measurement.md §2).

Receivers stop once the senders are done and nothing has arrived for ``idle_timeout``
(counted from the senders' end at the earliest); on a point without faults, deaths or
errors the coordinator ends them sooner, once every confirmed message has been received —
decided on identities, never on counts: a duplicate the system does not flag (a producer's
retry, a consumer group's rebalance) makes received − redelivered equal confirmed while a
confirmed message is still on its way, and a rule on counts would stop the receivers and
count that message lost.

Every node part reports, with its totals once a second, the identities that are new since
its previous report (:class:`IdentityReporter`): a sender part the sequence ranges its
workers had confirmed, a receiver part the identities its workers received, as ranges of
one 64-bit key per identity (:func:`keys`: sender node, sender worker, sequence number) —
a batch of consecutive sequence numbers is one range. It reads them from what the recorders
keep anyway, once per report: nothing is added to the per-message or per-batch path. The
coordinator merges them into two sets of ranges (:class:`Ranges`), and :class:`CaughtUp`
ends the point once the confirmed set lies inside the received one — the senders done and
every sender part's last report in, the confirmed set as large as the confirmed count, no
error, no fault or death — and the totals held still for :data:`QUIET_S` (or
``idle_timeout``, if shorter). A duplicate, flagged or not, is the same key again: it
neither helps nor hinders.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

import numpy as np

if TYPE_CHECKING:
    from workload.engine.node_progress import Progress
    from workload.engine.recording import IdentityContainers

#: Seconds the totals must hold still, every confirmed message received, before a clean
#: point's receivers are stopped (nodes report once a second).
QUIET_S = 2.0

#: An identity's key: the sender node (10 bits), its worker (14 bits) and the sequence
#: number (40 bits: ``[load] messages`` is at most 10¹² < 2⁴⁰ per worker).
NODE_BITS, WORKER_BITS, SEQ_BITS = 10, 14, 40
#: The most ranges the coordinator keeps of one set; beyond, the point waits out the idle
#: timeout (its identities are too scattered to be worth following).
MAX_RANGES = 2_000_000

_EMPTY = np.empty((0, 2), dtype=np.uint64)


def keys(nodes: Any, workers: Any, seqs: Any) -> np.ndarray | None:
    """Each identity's 64-bit key, or None when one does not fit (a node, worker or
    sequence number beyond the bits it has)."""
    nodes = np.asarray(nodes, dtype=np.int64)
    workers = np.asarray(workers, dtype=np.int64)
    seqs = np.asarray(seqs, dtype=np.int64)
    if not len(seqs):
        return np.empty(0, dtype=np.uint64)
    for values, bits in ((nodes, NODE_BITS), (workers, WORKER_BITS), (seqs, SEQ_BITS)):
        if values.min() < 0 or values.max() >= 1 << bits:
            return None
    nodes, workers, seqs = (v.astype(np.uint64) for v in (nodes, workers, seqs))
    stream = (nodes << np.uint64(WORKER_BITS)) | workers
    return (stream << np.uint64(SEQ_BITS)) | seqs


def runs(sorted_keys: np.ndarray) -> np.ndarray:
    """Sorted keys (duplicates allowed) as ranges ``[lo, hi]`` of consecutive keys."""
    if not len(sorted_keys):
        return _EMPTY
    breaks = np.flatnonzero(np.diff(sorted_keys) > 1)
    lo = np.concatenate((sorted_keys[:1], sorted_keys[breaks + 1]))
    hi = np.concatenate((sorted_keys[breaks], sorted_keys[-1:]))
    return np.stack((lo, hi), axis=1)


@dataclass
class Ranges:
    """A set of keys as sorted, disjoint, non-adjacent ranges ``[lo, hi]``."""

    lo: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.uint64))
    hi: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.uint64))

    def add(self, ranges: np.ndarray) -> None:
        """Add ranges ``[lo, hi]`` (any order, overlapping or not)."""
        if not len(ranges):
            return
        lo = np.concatenate((self.lo, ranges[:, 0]))
        hi = np.concatenate((self.hi, ranges[:, 1]))
        order = np.argsort(lo, kind="stable")
        lo, hi = lo[order], np.maximum.accumulate(hi[order])
        # A range starts a group unless it overlaps or touches the ranges before it.
        starts = np.ones(len(lo), dtype=bool)
        starts[1:] = lo[1:] > hi[:-1] + np.uint64(1)
        first = np.flatnonzero(starts)
        last = np.concatenate((first[1:] - 1, [len(lo) - 1]))
        self.lo, self.hi = lo[first], hi[last]

    def __len__(self) -> int:
        return len(self.lo)

    def count(self) -> int:
        """How many keys the set holds."""
        return int((self.hi - self.lo).sum(dtype=np.uint64)) + len(self.lo)

    def covers(self, other: Ranges) -> bool:
        """Whether every key of ``other`` is in this set."""
        if not len(other):
            return True
        if not len(self):
            return False
        at = np.searchsorted(self.lo, other.lo, side="right") - 1
        inside = at >= 0
        at = np.maximum(at, 0)
        return bool(np.all(inside & (self.lo[at] <= other.lo) & (self.hi[at] >= other.hi)))


class Recorded(Protocol):
    """What :class:`IdentityReporter` reads of a worker's recorder
    (:class:`workload.engine.recording.WorkerRecorder`)."""

    node: int
    worker: int

    def identity_view(self) -> tuple[IdentityContainers, list[IdentityContainers]]: ...


class IdentityReporter:
    """The identities a node part's workers confirmed (a sender part) or received (a
    receiver part) since its previous report, as ranges of :func:`keys`.

    It reads the arrays and the list the recorders keep them in (their
    :meth:`~workload.engine.recording.WorkerRecorder.identity_view`) from where it read up to
    last time: when a recorder's records were taken since (flushed), the containers it read
    to their end, those taken after them whole, then the new ones. The last confirmed range
    it read is read again (a worker extends it while it confirms consecutive batches). Once
    an identity does not fit a key it reports None from then on (the point then waits out
    its idle timeout). Made only where its reports go somewhere: from the first view on, a
    recorder keeps what it replaces until the next.
    """

    def __init__(self, role: str, recorders: Sequence[Recorded]) -> None:
        self.receives = role == "receiver"
        self.recorders = recorders
        #: Per recorder: the containers it read last time (at first, those it starts with),
        #: and up to where.
        self.read = [(r.identity_view()[0], 0) for r in recorders]
        self.broken = False

    def take(self) -> np.ndarray | None:
        """The new identities' ranges ``[lo, hi]`` (sorted, merged), or None."""
        if self.broken:
            return None
        found = Ranges()
        for i, recorder in enumerate(self.recorders):
            new = self._new(i, recorder)
            if new is None:
                self.broken = True
                return None
            found.add(new)
        return np.stack((found.lo, found.hi), axis=1)

    def _new(self, i: int, recorder: Recorded) -> np.ndarray | None:
        now, replaced = recorder.identity_view()
        before, start = self.read[i]
        pieces: list[tuple[IdentityContainers, int, int]] = []  # (containers, from, to)
        for containers in [before, *replaced[1:]] if replaced else []:
            pieces.append((containers, start, self._length(containers)))
            start = 0
        end = self._length(now)
        pieces.append((now, start, end))
        self.read[i] = (now, end)
        return _received(pieces) if self.receives else _confirmed(recorder, pieces)

    def _length(self, containers: IdentityContainers) -> int:
        # Received identities: their sequence numbers are appended last of the three.
        return len(containers[2]) if self.receives else len(containers[3])


def _received(pieces: Iterable[tuple[IdentityContainers, int, int]]) -> np.ndarray | None:
    """The ranges of the identities ``[from, to)`` of each piece's received arrays. Each is
    sliced (copied) before numpy reads it: a worker cannot grow an array whose buffer is
    exported."""
    pieces = list(pieces)
    nodes = np.concatenate([np.frombuffer(c[0][a:b], np.int32) for c, a, b in pieces])
    workers = np.concatenate([np.frombuffer(c[1][a:b], np.int32) for c, a, b in pieces])
    seqs = np.concatenate([np.frombuffer(c[2][a:b], np.int64) for c, a, b in pieces])
    found = keys(nodes, workers, seqs)
    return None if found is None else runs(np.sort(found))


def _confirmed(
    recorder: Recorded, pieces: Iterable[tuple[IdentityContainers, int, int]]
) -> np.ndarray | None:
    """The ranges confirmed ``[from − 1, to)`` of each piece's list, as ranges of keys."""
    spans = [span for c, a, b in pieces for span in c[3][max(0, a - 1) : b]]
    if not spans:
        return _EMPTY
    seqs = np.array(spans, dtype=np.int64).reshape(-1)  # lo, hi, lo, hi, …
    found = keys(np.full(len(seqs), recorder.node), np.full(len(seqs), recorder.worker), seqs)
    return None if found is None else found.reshape(-1, 2)


@dataclass
class CaughtUp:
    """Watches one point: the identities its parts report (:meth:`update`) and its totals;
    :meth:`check` says when its receivers may stop.

    ``senders``: the point's sender parts, each of whose last report must be in before the
    confirmed set is whole. ``enabled``: whether the point may end early at all (False at a
    point with declared faults: the identities are then not kept).
    """

    quiet_s: float
    senders: int = 0
    enabled: bool = True
    confirmed: Ranges = field(default_factory=Ranges)
    received: Ranges = field(default_factory=Ranges)
    #: Sender parts (node, part) whose last report came in.
    finished: set[tuple[int, int]] = field(default_factory=set)
    #: A part reported no identities (one did not fit a key), or too many ranges to follow.
    lost_track: bool = False
    since: float | None = None
    counts: tuple[int, int] | None = None

    @classmethod
    def for_point(cls, idle_timeout: float, senders: int, enabled: bool = True) -> CaughtUp:
        return cls(min(idle_timeout, QUIET_S), senders, enabled)

    def update(self, item: Progress) -> None:
        """A part's report: the identities new since its previous one, and whether it is
        its last."""
        if not self.enabled or self.lost_track:
            return
        if item.identities is None:
            self.lost_track = True
            return
        if item.role == "sender":
            self.confirmed.add(item.identities)
            if item.done:
                self.finished.add((item.node, item.part))
        else:
            self.received.add(item.identities)
        if max(len(self.confirmed), len(self.received)) > MAX_RANGES:
            self.lost_track = True
            self.confirmed = self.received = Ranges()

    def check(
        self, now: float, *, senders_done: bool, clean: bool, sent: int, received: int, errors: int
    ) -> bool:
        """Whether the senders are done and every confirmed identity has been received, with
        the totals (``sent``, ``received``: confirmed and received messages) unchanged for
        ``quiet_s`` seconds up to ``now``. The quiet period may begin before the senders'
        processes have ended (their last report is the one already seen, or the totals move
        and the period starts again), so that a point whose receivers already have
        everything ends as soon as they do. ``clean``: no fault or death at the point."""
        if not self.holds(clean=clean, sent=sent, errors=errors):
            self.since = self.counts = None
            return False
        if (sent, received) != self.counts:
            self.counts, self.since = (sent, received), now
            return False
        last_reports = len(self.finished) >= self.senders
        quiet = self.since is not None and now - self.since >= self.quiet_s
        return senders_done and last_reports and quiet

    def holds(self, *, clean: bool, sent: int, errors: int) -> bool:
        """Whether every confirmed identity reported so far was received: a clean point
        without errors, its confirmed set as large as the confirmed total (none missed)."""
        if not (self.enabled and clean and sent) or errors or self.lost_track:
            return False
        return self.confirmed.count() == sent and self.received.covers(self.confirmed)
