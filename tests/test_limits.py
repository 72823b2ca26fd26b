"""The size limits of the code, checked on every module of the layers ``tests/test_layers.py``
finds (``workload/``, ``brokers/``, ``analysis/``, ``infra/``, ``stacks/``): no file over
:data:`MAX_FILE_LINES` lines, no function or method over :data:`MAX_FUNCTION_LINES`.

A function's size is its ``def`` line to its last line (``end_lineno - lineno + 1``): its
docstring counts, its decorators do not. A function nested in another counts on its own
too (and within the one holding it). There are no exceptions to name.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from pathlib import Path

from tests.test_layers import MODULES, ROOT

MAX_FILE_LINES = 500
MAX_FUNCTION_LINES = 80


def _functions(tree: ast.AST, prefix: str = "") -> Iterable[tuple[str, int, int]]:
    """Every function and method under ``tree``, nested ones too: (qualified name, first
    line, size in lines)."""
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            name = f"{prefix}{node.name}"
            yield name, node.lineno, (node.end_lineno or node.lineno) - node.lineno + 1
            yield from _functions(node, f"{name}.")
        elif isinstance(node, ast.ClassDef):
            yield from _functions(node, f"{prefix}{node.name}.")
        else:
            yield from _functions(node, prefix)


def offenders(paths: Iterable[Path], root: Path = ROOT) -> list[str]:
    """Each file over the file limit and each function over the function limit in ``paths``,
    with its size."""
    found = []
    for path in sorted(paths):
        shown = path.relative_to(root).as_posix() if path.is_relative_to(root) else str(path)
        text = path.read_text()
        lines = len(text.splitlines())
        if lines > MAX_FILE_LINES:
            found.append(f"{shown}: {lines} lines (file limit {MAX_FILE_LINES})")
        for name, first, size in _functions(ast.parse(text)):
            if size > MAX_FUNCTION_LINES:
                found.append(
                    f"{shown}:{first} {name}: {size} lines (function limit {MAX_FUNCTION_LINES})"
                )
    return found


def test_no_file_or_function_is_over_its_limit() -> None:
    found = offenders(MODULES.values())
    assert not found, f"{len(found)} over the limits:\n" + "\n".join(found)


def _function(name: str, lines: int, indent: str = "") -> list[str]:
    """A function of ``lines`` lines, its ``def`` line included."""
    return [f"{indent}def {name}() -> None:"] + [f"{indent}    x = {i}" for i in range(lines - 1)]


def test_the_checker_catches_a_long_file_and_a_long_function(tmp_path: Path) -> None:
    long = tmp_path / "long.py"
    body = [
        *_function("too_long", MAX_FUNCTION_LINES + 1),
        "class Holder:",
        "    @staticmethod",
        *_function("method_too_long", MAX_FUNCTION_LINES + 1, "    "),
        "def outer() -> None:",
        *_function("nested_too_long", MAX_FUNCTION_LINES + 1, "    "),
        *_function("fits", MAX_FUNCTION_LINES),
    ]
    body += [f"y{i} = {i}" for i in range(MAX_FILE_LINES + 1 - len(body))]
    long.write_text("\n".join(body) + "\n")
    over = f"{MAX_FUNCTION_LINES + 1} lines (function limit {MAX_FUNCTION_LINES})"
    assert offenders([long], tmp_path) == [
        f"long.py: {MAX_FILE_LINES + 1} lines (file limit {MAX_FILE_LINES})",
        f"long.py:1 too_long: {over}",
        f"long.py:84 Holder.method_too_long: {over}",  # the def line, not its decorator's
        f"long.py:165 outer: {MAX_FUNCTION_LINES + 2} lines (function limit {MAX_FUNCTION_LINES})",
        f"long.py:166 outer.nested_too_long: {over}",
    ]
    # At the limits exactly, nothing is reported.
    fits = tmp_path / "fits.py"
    fitting = _function("fits", MAX_FUNCTION_LINES)
    fits.write_text("\n".join(fitting + ["z = 0"] * (MAX_FILE_LINES - len(fitting))) + "\n")
    assert offenders([fits], tmp_path) == []
