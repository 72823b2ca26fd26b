"""A node's clock state: chrony's tracking report read, or why it could not be."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from workload.engine.clock import SINGLE_HOST, ClockState, parse_tracking, read_clock
from workload.engine.context import clock_entry

#: ``chronyc -c tracking`` of chrony 4.3 synchronised to an NTP server on loopback, and
#: ``chronyc tracking`` a moment later: "System time : 0.000000866 seconds fast of NTP time".
FAST = (
    "7F000001,127.0.0.1,2,1795447889.462972721,-0.000000866,-0.000000008,0.000000017,"
    "0.066,0.001,0.134,0.000005364,0.000000976,0.1,Normal\n"
)
#: chrony 4.3 serving its own clock (``local stratum 8``): no reference name.
LOCAL = (
    "7F7F0101,,8,1795447864.399930752,0.000000000,0.000000000,0.000000000,0.000,0.000,"
    "0.000,0.000000000,0.000000000,0.0,Normal\n"
)
#: The first report with the clock 21.503 µs slow of NTP time, and not synchronised.
SLOW = FAST.replace(",-0.000000866,", ",0.000021503,")
UNSYNCHRONISED = FAST.replace(",Normal", ",Not synchronised")


def test_the_offset_is_the_clock_minus_the_reference_time() -> None:
    assert parse_tracking(FAST) == ClockState(0.000000866, "chrony: 127.0.0.1 (stratum 2)")
    assert parse_tracking(SLOW).offset_s == pytest.approx(-0.000021503)
    assert parse_tracking(LOCAL) == ClockState(0.0, "chrony: 7F7F0101 (stratum 8)")


def test_an_unsynchronised_clock_has_no_offset() -> None:
    assert parse_tracking(UNSYNCHRONISED) == ClockState(None, "unknown: chrony is not synchronised")


@pytest.mark.parametrize(
    "output",
    ["", "506 Cannot talk to daemon\n", FAST.replace(",Normal", ""), FAST.replace(",2,", ",x,")],
)
def test_anything_else_is_not_a_tracking_report(output: str) -> None:
    with pytest.raises(ValueError):
        parse_tracking(output)


def fake_chronyc(directory: Path, script: str) -> None:
    """A ``chronyc`` on PATH that runs ``script`` (sh)."""
    path = directory / "chronyc"
    path.write_text(f'#!/bin/sh\n[ "$*" = "-c tracking" ] || exit 9\n{script}\n')
    path.chmod(path.stat().st_mode | stat.S_IXUSR)


def test_the_clock_is_read_from_chronyc(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_chronyc(tmp_path, f"printf '{FAST.strip()}\\n'")
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    assert read_clock() == parse_tracking(FAST)


@pytest.mark.parametrize(
    ("script", "source"),
    [
        (
            "echo '506 Cannot talk to daemon' >&2; exit 1",
            "unknown: chronyc tracking failed (506 Cannot talk to daemon)",
        ),
        ("echo 'not,csv'", "unknown: chronyc tracking output not understood (expected 14"),
        ("exec sleep 5", "unknown: chronyc tracking failed (Command "),
    ],
)
def test_a_clock_chrony_cannot_tell_is_unknown_and_says_why(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, script: str, source: str
) -> None:
    fake_chronyc(tmp_path, script)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    clock = read_clock(timeout=0.5)
    assert clock.offset_s is None and clock.source.startswith(source)


def test_without_chrony_the_clock_is_unknown(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("workload.engine.clock.shutil.which", lambda name: None)
    assert read_clock() == ClockState(None, "unknown: chronyc not found")


def test_a_local_run_records_one_clock_for_every_node() -> None:
    entry = clock_entry(SINGLE_HOST, "this host")
    assert (entry["clock_offset_s"], entry["clock_source"]) == (0.0, "single host")
