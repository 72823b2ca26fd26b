"""Shared test set-up: one pytest marker per broker system (from the registry), a
session-wide local Spark fixture, and helpers to run the CLI."""

from __future__ import annotations

import csv
import os
import subprocess
import sys
from pathlib import Path

import pytest

from brokers import registry

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = ROOT / "workload" / "scenarios"


def pytest_configure(config: pytest.Config) -> None:
    for name, system in registry.systems().items():
        config.addinivalue_line(
            "markers", f"{name}: needs {system.title} (real server or stand-in)"
        )


def brokerbench(*args: str, timeout: float = 600, env: dict[str, str] | None = None):
    """Run the ``brokerbench`` CLI in a subprocess; returns the CompletedProcess."""
    return subprocess.run(
        [sys.executable, "-m", "workload.cli", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        check=False,
    )


def read_summary(results: Path) -> list[dict[str, str]]:
    """The rows of the single run's ``summary.csv`` under a results directory."""
    (path,) = results.glob("*/analysis/summary.csv")
    with path.open() as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="session")
def spark():
    from analysis.session import spark_session

    session = spark_session("brokerbench-tests", cores=2)
    yield session
    session.stop()
