"""The layers of the code, checked on its imports (every import statement, also those inside
functions): nothing imports a layer above its own.

From the top: the command line (``workload/cli.py``, ``cloud.py``, ``remote.py``,
``__main__.py``) and the Pulumi program (``stacks/``); then ``infra/`` (Pulumi components and
the agents of AWS machines); then ``analysis/`` and the rest of ``workload/``; ``brokers/``
at the bottom, knowing nothing of runs. Pulumi is imported only under ``infra/`` and
``stacks/``, Spark only under ``analysis/``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("workload", "brokers", "analysis", "infra", "stacks")
COMMAND_LINE = {"workload.cli", "workload.cloud", "workload.remote", "workload.__main__"}


def layer(module: str) -> str:
    if module in COMMAND_LINE or module.startswith("stacks"):
        return "top"
    return module.split(".")[0]


#: Which layers each layer may import (besides itself).
ALLOWED = {
    "top": {"infra", "analysis", "workload", "brokers"},
    "infra": {"analysis", "workload", "brokers"},
    "analysis": {"workload", "brokers"},
    "workload": {"brokers"},
    "brokers": set(),
}


def modules() -> dict[str, Path]:
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            found[name.removesuffix(".__init__")] = path
    return found


def imports(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


MODULES = modules()


def test_the_module_list_covers_every_package() -> None:
    assert {m.split(".")[0] for m in MODULES} == set(PACKAGES)
    assert set(MODULES) >= COMMAND_LINE


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_import_runs_up_a_layer(module: str) -> None:
    mine = layer(module)
    upward = sorted(
        name
        for name in imports(MODULES[module])
        if name in MODULES and layer(name) != mine and layer(name) not in ALLOWED[mine]
    )
    assert not upward, f"{module} ({mine}) imports {upward}"


@pytest.mark.parametrize(
    ("library", "where"),
    [
        ("pulumi", ("infra", "stacks")),
        ("pulumi_aws", ("infra", "stacks")),
        ("pyspark", ("analysis",)),
    ],
)
def test_pulumi_and_spark_stay_in_their_packages(library: str, where: tuple[str, ...]) -> None:
    outside = sorted(
        module
        for module, path in MODULES.items()
        if module.split(".")[0] not in where
        and any(name == library or name.startswith(f"{library}.") for name in imports(path))
    )
    assert not outside, f"{library} imported outside {where}: {outside}"
