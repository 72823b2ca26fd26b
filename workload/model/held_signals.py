"""The signals that stop a run, and holding them while a step must run to its end.

SIGINT (Ctrl-C), SIGTERM and SIGHUP are the signals a run stops on (the engine's
:mod:`~workload.engine.signals` says how). Some steps must not be cut short by one — a
point's nodes stopping, its faults ending, its statuses being read, a Spark JVM starting —
and a signal that came meanwhile must not be lost either: :func:`held` notes it and hands it
to the handler in place once the step is over.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

#: Signals a run turns into an orderly stop.
STOPPING = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


class Terminated(KeyboardInterrupt):
    """SIGTERM or SIGHUP arrived: handled like Ctrl-C, with its own exit code."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum


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
