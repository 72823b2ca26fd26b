"""A stopping signal while a point ends: held until the step is over, then the run stops.

A Ctrl-C that came while the coordinator waited for a point's nodes to exit was swallowed
(the run went on with every further point, and a second Ctrl-C was then only remembered);
one that came while the point's faults ended or its statuses were read escaped the fleet
and the run's context said "complete". Found on a busy machine, where a point's end takes
long enough for a Ctrl-C to land in it.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from workload.engine.signals import Stopping, Terminated, held


def _kill_self(signum: int) -> None:
    os.kill(os.getpid(), signum)
    time.sleep(0.05)  # the handler runs at the next bytecode; give it the chance


@pytest.fixture
def handlers() -> Any:
    """The stopping signals' handlers put back after the test."""
    kept = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    yield
    for signum, handler in kept.items():
        signal.signal(signum, handler)


def test_a_held_ctrl_c_comes_after_the_step_and_not_inside_it(handlers: Any) -> None:
    signal.signal(signal.SIGINT, signal.default_int_handler)
    steps = []
    with pytest.raises(KeyboardInterrupt), held():
        _kill_self(signal.SIGINT)
        steps.append("the step ran to its end")
    assert steps == ["the step ran to its end"]
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_held_signals_reach_the_coordinators_handler_in_order(handlers: Any) -> None:
    """With the command line's handler: the first signal raises (after the step), a second
    one in a later step is only remembered — as when neither was held."""
    stopping = Stopping()
    stopping.install()
    with pytest.raises(Terminated), held():
        _kill_self(signal.SIGTERM)
    assert stopping.first == signal.SIGTERM and stopping.again is None
    with held():
        _kill_self(signal.SIGINT)
    assert stopping.again == signal.SIGINT


def test_a_step_without_a_signal_is_untouched(handlers: Any) -> None:
    with held():
        pass
    with pytest.raises(ValueError, match="the step's own"), held():
        raise ValueError("the step's own error")


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.redis
def test_ctrl_c_while_a_points_nodes_stop_interrupts_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, handlers: Any
) -> None:
    """A Ctrl-C while the coordinator stops point 0's nodes: point 0 still ends whole (its
    statuses read, nothing missing), the run is interrupted and point 1 never starts."""
    from workload.engine.local_fleet import LocalFleet
    from workload.engine.runner import run_scenario
    from workload.model.record import load_context
    from workload.model.results import read_statuses

    signal.signal(signal.SIGINT, signal.default_int_handler)
    stop = LocalFleet._stop

    def stop_with_ctrl_c(fleet: LocalFleet, running: Any) -> None:
        _kill_self(signal.SIGINT)
        stop(fleet, running)

    monkeypatch.setattr(LocalFleet, "_stop", stop_with_ctrl_c)
    scenario = tmp_path / "two-points.toml"
    scenario.write_text(
        'name = "two-points"\n[broker]\nsystem = "redis"\ntopology = "single"\n'
        '[load]\nsender_nodes = 1\nrate = 200\nduration = "2s"\nidle_timeout = "2s"\n'
        '[measurement]\nwarmup = "0s"\nwindow = "1s"\nstep = "1s"\n'
        "[sweep]\nthreads = [1, 2]\n"
    )
    lines: list[str] = []
    outcome = run_scenario(scenario, tmp_path / "results", console=lines.append)
    assert outcome.interrupted and outcome.signal == "SIGINT" and not outcome.errors
    context = load_context(outcome.run_dir)
    assert context.status == "interrupted"
    assert not any(line.startswith("point 1 (2 of 2)") for line in lines), lines
    statuses = read_statuses(outcome.run_dir)
    assert statuses and all(s.ok and s.point == 0 for s in statuses), statuses
