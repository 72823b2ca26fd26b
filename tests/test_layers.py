"""The layers of the code, checked on its imports (every import statement, also those inside
functions and under ``TYPE_CHECKING``): nothing imports a layer above its own, and no two
files import each other, directly or round a circle.

A module's layer is the folder it lives in — the deepest folder :data:`LAYERS` names — and
nothing else. From the top:

* ``workload/shell/`` (the ``brokerbench`` command, the ``cloud`` commands, the entry points
  of client machines) and ``stacks/`` (the Pulumi program);
* ``infra/`` (Pulumi components, user-data), ``analysis/`` (the Spark job, reports,
  compare) and the engine, ``workload/engine/`` with its ``aws/`` (runs, nodes,
  workers, faults, the AWS agents) — three layers side by side that do not import each
  other;
* ``workload/model/``: what they share — the scenario and its sweep points, the run layout
  and record, the AWS run manifest, the raw tables, the fault timelines, the verdicts;
* ``brokers/`` at the bottom, knowing nothing of runs.

Pulumi is imported only under ``infra/`` and ``stacks/``, Spark only under ``analysis/``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("workload", "brokers", "analysis", "infra", "stacks")

#: Folder → layer; a module belongs to the deepest folder named here.
LAYERS = {
    "workload/shell": "shell",
    "stacks": "shell",
    "infra": "infra",
    "analysis": "analysis",
    "workload/engine": "engine",
    "workload/model": "model",
    "brokers": "brokers",
}

#: Which layers each layer may import (besides itself).
ALLOWED = {
    "shell": {"infra", "analysis", "engine", "model", "brokers"},
    "infra": {"model", "brokers"},
    "analysis": {"model", "brokers"},
    "engine": {"model", "brokers"},
    "model": {"brokers"},
    "brokers": set(),
}


def modules() -> dict[str, Path]:
    """Every module of the code base but ``workload``'s own empty ``__init__.py``: that folder
    only holds the layers' folders (see :func:`test_nothing_lies_loose_in_workload`)."""
    found = {}
    for package in PACKAGES:
        for path in (ROOT / package).rglob("*.py"):
            name = ".".join(path.relative_to(ROOT).with_suffix("").parts)
            found[name.removesuffix(".__init__")] = path
    del found["workload"]
    return found


MODULES = modules()


def layer(module: str) -> str:
    folder = MODULES[module].parent.relative_to(ROOT).as_posix()
    while folder not in LAYERS:
        folder = folder.rpartition("/")[0]
    return LAYERS[folder]


def imports(path: Path) -> set[str]:
    """The modules of this code base ``path`` imports: ``from package import module`` names
    the module, ``from module import name`` the module."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                submodule = f"{node.module}.{alias.name}"
                names.add(submodule if submodule in MODULES else node.module)
    return {name for name in names if name in MODULES}


IMPORTS = {module: imports(path) - {module} for module, path in MODULES.items()}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for other in sorted(graph[module]):
            if other not in index:
                visit(other)
                low[module] = min(low[module], low[other])
            elif other in stack:
                low[module] = min(low[module], index[other])
        if low[module] == index[module]:
            component = []
            while True:
                other = stack.pop()
                component.append(other)
                if other == module:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return found


def test_every_module_has_a_layer_and_every_layer_a_module() -> None:
    assert {m.split(".")[0] for m in MODULES} == set(PACKAGES)
    assert {layer(m) for m in MODULES} == set(ALLOWED)


def test_nothing_lies_loose_in_workload() -> None:
    """``workload/`` is the folders of three layers (shell, engine, model) and the shipped
    scenarios: a module put beside them would have no layer of its own."""
    loose = sorted(
        path.name
        for path in (ROOT / "workload").iterdir()
        if path.name not in {"__init__.py", "__pycache__"}
        and not (path.is_dir() and f"workload/{path.name}" in LAYERS)
        and path.name != "scenarios"
    )
    assert not loose, f"loose in workload/: {loose} (move each into the folder of its layer)"
    assert (ROOT / "workload" / "__init__.py").read_text().strip() == ""


@pytest.mark.parametrize("module", sorted(MODULES))
def test_no_import_runs_up_a_layer(module: str) -> None:
    mine = layer(module)
    upward = sorted(
        name for name in IMPORTS[module] if layer(name) != mine and layer(name) not in ALLOWED[mine]
    )
    assert not upward, f"{module} ({mine}) imports {upward}"


def test_the_circle_finder_finds_a_circle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert circles(graph) == [["a", "b", "c"]]


@pytest.mark.parametrize("package", PACKAGES)
def test_no_two_files_import_each_other(package: str) -> None:
    found = [c for c in circles(IMPORTS) if c[0].split(".")[0] == package]
    assert not found, f"import circles: {found}"


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
        and any(name == library or name.startswith(f"{library}.") for name in _all_imports(path))
    )
    assert not outside, f"{library} imported outside {where}: {outside}"


def _all_imports(path: Path) -> set[str]:
    """Every module name ``path`` imports, of this code base or not."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names
