"""One node killed mid-run on the JVM clusters (Artemis, RocketMQ, Pulsar): the run goes on
through the fault and nothing confirmed is lost.

Each test runs a short scenario of its own (one kill, about 15 s of sending; the shipped
``*-failover.toml`` scenarios are longer and take two faults) through the CLI, with the
helpers of :mod:`tests.test_faults`.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from analysis.faults import FaultEffect
from tests.test_faults import run_failover


def one_kill(
    tmp_path: Path,
    system: str,
    params: str,
    node: str,
    at: int,
    until: int,
    duration: int,
) -> FaultEffect:
    """Run ``system``'s cluster with one kill of ``node`` from ``at`` to ``until`` seconds;
    check that it happened and that nothing confirmed went missing; return its effect."""
    scenario = tmp_path / f"{system}-kill.toml"
    scenario.write_text(
        f"""name = "{system}-kill"
[broker]
system = "{system}"
topology = "cluster"
[broker.params]
{params}
[load]
threads = 2
sender_nodes = 1
duration = "{duration}s"
idle_timeout = "8s"
[measurement]
window = "5s"
step = "1s"
[[faults]]
at = "{at}s"
action = "kill"
node = "{node}"
until = "{until}s"
"""
    )
    _, result = run_failover(tmp_path / "results", str(scenario))
    (fault,) = result.faults
    assert fault.began_s is not None and fault.ended_s is not None and not fault.record.error
    assert result.confirmed > 0 and result.missing == result.lost == result.unavailable == 0
    return fault


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.artemis
def test_artemis_backup_takes_over_from_a_killed_live(tmp_path: Path) -> None:
    fault = one_kill(tmp_path, "artemis", "pairs = 1", "leader", at=3, until=9, duration=15)
    assert fault.record.leader and fault.record.node == "artemis live0"
    # Sends and receives went on through the backup before the live came back.
    assert fault.ended_s is not None and fault.began_s is not None
    down = fault.ended_s - fault.began_s
    assert fault.send_gap.resumed and fault.send_gap.seconds < down
    assert fault.receive_gap.resumed and fault.receive_gap.seconds < down
