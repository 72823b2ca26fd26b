"""What a client machine on AWS installs: brokerbench[brokers] at the versions of this
environment (the constraints file the stack uploads), without PySpark, Pulumi or the test
tools; and everything it runs imports and starts without them."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
from importlib import metadata
from pathlib import Path

import pytest
from packaging.utils import canonicalize_name

from infra.constraints import CLIENT_ENVIRONMENT, client_constraints

#: Top-level modules of distributions that only the ``analysis``, ``aws`` and ``dev`` extras
#: install, so a client machine does not have them.
NOT_ON_CLIENTS = ("pyspark", "py4j", "pulumi", "pulumi_aws", "pulumi_random", "pytest", "moto")
PIN = re.compile(r"^[a-z0-9-]+==[^\s=]+$")


def test_constraints_pin_every_client_distribution_to_the_version_installed_here() -> None:
    constraints = client_constraints()
    pins = constraints.pins
    assert {
        "confluent-kafka", "kafka-python", "pika", "psycopg", "psycopg-binary", "redis",
        "hiredis", "pymongo", "pulsar-client", "nats-py", "stomp-py", "boto3", "pyarrow",
        "pydantic", "pydantic-core", "jinja2",
    } <= set(pins)  # fmt: skip
    assert {name: metadata.version(name) for name in pins} == pins
    excluded = {"pyspark", "py4j", "pulumi", "pulumi-aws", "pulumi-random", "pytest", "moto"}
    assert excluded.isdisjoint(pins) and excluded.isdisjoint(constraints.unpinned)
    lines = [line for line in constraints.text().splitlines() if not line.startswith("#")]
    assert all(PIN.match(line) for line in lines)
    assert [line.split("==")[0] for line in lines] == sorted(pins)


def test_markers_are_those_of_the_clients_and_extras_are_followed(tmp_path: Path) -> None:
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text(
        textwrap.dedent(
            """\
            [project]
            name = "toy"
            dependencies = [
                'pika; sys_platform == "linux"',
                'pyarrow; sys_platform == "win32"',
                "psycopg[binary]",
                "no-such-distribution>=1",
                "pydantic<1",
            ]
            [project.optional-dependencies]
            extra = ["jinja2"]
            """
        )
    )
    constraints = client_constraints(pyproject, extras=())
    assert {"pika", "psycopg", "psycopg-binary"} <= set(constraints.pins)
    assert not {"pyarrow", "pydantic", "jinja2"} & set(constraints.pins)
    assert constraints.unpinned["no-such-distribution"] == "not installed here (required by toy)"
    assert constraints.unpinned["pydantic"].endswith("but toy requires pydantic<1")
    assert "# not pinned: no-such-distribution: not installed here" in constraints.text()
    windows = {**CLIENT_ENVIRONMENT, "sys_platform": "win32"}
    on_windows = client_constraints(pyproject, extras=("extra",), environment=windows)
    assert {"pyarrow", "jinja2"} <= set(on_windows.pins) and "pika" not in on_windows.pins


CLIENT_PROGRAM = f"""
import importlib, importlib.abc, pkgutil, sys

class Absent(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.partition(".")[0] in {NOT_ON_CLIENTS!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None

sys.meta_path.insert(0, Absent())
import brokers, workload
for package in (workload, brokers):
    for info in pkgutil.walk_packages(package.__path__, package.__name__ + "."):
        if not info.name.endswith("__main__"):
            importlib.import_module(info.name)
importlib.import_module("workload.engine.aws.agent")

from workload.shell.cli import main
for command in (["cloud", "client"], ["prepare"], ["node"]):
    try:
        main([*command, "--help"])
    except SystemExit as exc:
        assert exc.code == 0, command
    else:
        raise AssertionError(command)
print("codes", main(["run", "missing.toml"]), main(["report", "."]),
      main(["run", "missing.toml", "--no-analysis"]))
"""


def test_what_clients_run_imports_and_starts_without_spark_pulumi_or_test_tools() -> None:
    done = subprocess.run(
        [sys.executable, "-c", CLIENT_PROGRAM], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == "codes 2 2 2"
    errors = done.stderr.splitlines()
    missing = (
        "brokerbench: the analysis needs PySpark, which is not installed: "
        "pip install 'brokerbench[analysis]'"
    )
    assert errors[:2] == [f"{missing} (or record only: --no-analysis)", missing]
    assert "PySpark" not in errors[2]  # --no-analysis goes on without it (to the scenario)


@pytest.mark.slow
def test_pip_resolves_the_client_install_from_pypi_at_the_pinned_versions(
    tmp_path: Path,
) -> None:
    """The built wheel with ``[brokers]`` and the constraints, as a client installs them,
    resolved by pip against PyPI for Linux x86_64 and Python 3.11 (wheels only)."""
    from infra.program import build_wheel

    wheel = build_wheel(tmp_path / "dist")
    constraints = client_constraints()
    (tmp_path / "constraints.txt").write_text(constraints.text())
    manylinux = [f"manylinux_2_{minor}_x86_64" for minor in range(36, 4, -1)]
    platforms = [*manylinux, "manylinux2014_x86_64", "manylinux2010_x86_64", "manylinux1_x86_64"]
    done = subprocess.run(
        [
            sys.executable, "-m", "pip", "install", "--dry-run", "--ignore-installed",
            "--quiet", "--report", str(tmp_path / "report.json"),
            "--only-binary=:all:", "--python-version", "3.11", "--implementation", "cp",
            *(f"--platform={platform}" for platform in platforms),
            "-c", str(tmp_path / "constraints.txt"), f"{wheel}[brokers]",
        ],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads((tmp_path / "report.json").read_text())
    resolved = {
        canonicalize_name(item["metadata"]["name"]): item["metadata"]["version"]
        for item in report["install"]
    }
    assert resolved.pop("brokerbench") == "0.1.0"
    assert "pyspark" not in resolved and "py4j" not in resolved
    assert set(resolved) - set(constraints.unpinned) == set(constraints.pins)
    assert {name: resolved[name] for name in constraints.pins} == constraints.pins
