"""How a run ends on a signal: SIGTERM and SIGHUP (what ``timeout``, CI, systemd and a closed
terminal send) end it the way Ctrl-C does — workers stop, what was recorded is kept and
analysed, brokers are stopped — and node processes never outlive their coordinator.

A second stopping signal does not cut that short: while the run stops it is only
remembered (:class:`Stopping`) — nodes and brokers are still stopped and the context is
still written — and the run is then not analysed; during the analysis, one stops the
analysis.
"""

from __future__ import annotations

import contextlib
import ctypes
import signal
import threading
from collections.abc import Iterator
from types import FrameType

#: Signals the coordinator turns into an orderly stop.
STOPPING = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_PR_SET_PDEATHSIG = 1


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP arrived: handled like Ctrl-C, with its own exit code."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


class Stopping:
    """The coordinator's stopping signals (:data:`STOPPING`) through a run and its analysis.

    * While the run runs, the first raises — KeyboardInterrupt for Ctrl-C,
      :class:`Terminated` for the others — and the run stops, keeping what was recorded.
    * While it stops after that, another is only remembered (:attr:`again`): the run goes
      on stopping its nodes and brokers and writing its context, and is not analysed.
    * Once the analysis starts (:meth:`analysing`), each raises: the analysis stops.
    """

    def __init__(self) -> None:
        self.first: int | None = None
        #: A signal that came while the run stopped after the first (None: none came).
        self.again: int | None = None
        self._analysing = False

    def install(self) -> None:
        for signum in STOPPING:
            signal.signal(signum, self._arrived)

    def analysing(self) -> None:
        """The run is over: from now on a stopping signal stops the analysis."""
        self._analysing = True

    def _arrived(self, signum: int, frame: FrameType | None) -> None:
        if not self._analysing:
            if self.first is not None:
                self.again = self.again or signum
                return
            self.first = signum
        if signum == signal.SIGINT:
            raise KeyboardInterrupt
        raise Terminated(signum)


@contextlib.contextmanager
def held() -> Iterator[None]:
    """Hold the stopping signals while a step runs that must run to its end (a point's nodes
    stopping, its faults ending, its statuses read): one that arrives meanwhile is noted, and
    when the step is over the handler that was in place gets it — Ctrl-C then takes effect
    between two steps, instead of cutting one short or being swallowed inside it. Outside the
    main thread (where handlers cannot be set) the step simply runs."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    came: list[int] = []
    previous = {s: signal.signal(s, lambda signum, _frame: came.append(signum)) for s in STOPPING}
    try:
        yield
    finally:
        for stopping, handler in previous.items():
            signal.signal(stopping, signal.SIG_DFL if handler is None else handler)
    raised: BaseException | None = None
    for signum in came:  # the step ended normally: each held signal now, as it would have come
        try:
            _deliver(signum, previous[signal.Signals(signum)])
        except BaseException as exc:
            raised = raised or exc
    if raised is not None:
        raise raised


def _deliver(signum: int, handler: object) -> None:
    if callable(handler):
        handler(signum, None)
    elif handler in (signal.SIG_DFL, None):
        raise KeyboardInterrupt if signum == signal.SIGINT else Terminated(signum)


def signal_name(exc: BaseException) -> str:
    return signal.Signals(getattr(exc, "signum", signal.SIGINT)).name


def exit_code(signum: int) -> int:
    """The shell's convention: 128 + the signal number (130 for Ctrl-C)."""
    return 128 + signum


def leave_stopping_to_the_coordinator() -> None:
    """In a node process: the coordinator stops nodes through their stop flag; should the
    coordinator itself die, the node is killed with it (Linux parent-death signal)."""
    for signum in STOPPING:
        signal.signal(signum, signal.SIG_IGN)
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass  # not Linux: the receivers' idle timeout still ends an orphaned node
