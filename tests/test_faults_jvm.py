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
    load: str = "",
) -> FaultEffect:
    """Run ``system``'s cluster (``params`` and ``load`` are lines of those sections) with
    one kill of ``node`` from ``at`` to ``until`` seconds; check that it happened and that
    nothing confirmed went missing; return its effect."""
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
idle_timeout = "12s"
{load}
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


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.rocketmq
def test_rocketmq_master_kill_stops_the_topic_until_the_master_is_back(tmp_path: Path) -> None:
    # The master is back 15–25 s after its restart at 6 s (it registers with the name server
    # 10 s after it started; sends resumed 9–18 s after the kill in the runs measured), so
    # the run lasts 32 s; a message received as it died comes back after 10 s.
    params = "queues = 4\nsend_timeout = 2\ninvisible_duration = 10.0"
    fault = one_kill(
        tmp_path, "rocketmq", params, "leader", 3, 6, duration=32, load='failure_timeout = "60s"'
    )
    assert fault.record.leader and fault.record.node == "broker-a-master"
    assert not fault.record.fails_over
    # Nothing took the master's place: sends stopped for the whole time it was down, and
    # went on once it was back.
    assert fault.errors > 0 and fault.send_gap.resumed
    assert fault.ended_s is not None and fault.began_s is not None
    assert fault.send_gap.seconds >= int(fault.ended_s - fault.began_s) - 1


@pytest.mark.slow
@pytest.mark.integration
@pytest.mark.pulsar
def test_pulsar_clients_wait_through_a_broker_restart(tmp_path: Path) -> None:
    # Sends wait for the restarted broker (10–20 s to start) instead of failing.
    params = "ensemble_size = 3\nwrite_quorum = 3\nack_quorum = 2\nsend_timeout = 60.0"
    fault = one_kill(
        tmp_path, "pulsar", params, "leader", 3, 5, duration=25, load='failure_timeout = "60s"'
    )
    assert fault.record.leader and fault.record.node == "broker"
    assert not fault.record.fails_over
    # Nothing served the topic while the broker was down; it did again once it was back.
    assert fault.ended_s is not None and fault.began_s is not None
    assert fault.send_gap.resumed and fault.receive_gap.resumed
    assert fault.send_gap.seconds >= int(fault.ended_s - fault.began_s) - 1
