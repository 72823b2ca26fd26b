"""How a run ends on a signal: SIGTERM and SIGHUP (what ``timeout``, CI, systemd and a closed
terminal send) end it the way Ctrl-C does — workers stop, what was recorded is kept and
analysed, brokers are stopped — and node processes never outlive their coordinator.

A second stopping signal does not cut that short: while the run stops it is only
remembered (:class:`Stopping`) — nodes and brokers are still stopped and the context is
still written — and the run is then not analysed; during the analysis, one stops the
analysis.
"""

from __future__ import annotations

import ctypes
import signal
from types import FrameType

from workload.model.held_signals import STOPPING, Terminated, held

__all__ = ["STOPPING", "Stopping", "Terminated", "exit_code", "held", "signal_name"]

_PR_SET_PDEATHSIG = 1


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
