"""How a run ends on a signal: SIGTERM and SIGHUP (what ``timeout``, CI, systemd and a closed
terminal send) end it the way Ctrl-C does — workers stop, what was recorded is kept and
analysed, brokers are stopped — and node processes never outlive their coordinator.
"""

from __future__ import annotations

import ctypes
import signal
from types import FrameType

#: Signals the coordinator turns into an orderly stop.
STOPPING = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
_PR_SET_PDEATHSIG = 1


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP arrived: handled like Ctrl-C, with its own exit code."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


def _raise(signum: int, frame: FrameType | None) -> None:
    raise Terminated(signum)


def stop_on_termination() -> None:
    """In the coordinator: SIGTERM and SIGHUP raise :class:`Terminated` (a KeyboardInterrupt)."""
    signal.signal(signal.SIGTERM, _raise)
    signal.signal(signal.SIGHUP, _raise)


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
