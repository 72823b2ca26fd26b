"""User-facing errors of the workload side; each carries its exit code and one-line messages.

A scenario's problems are reported one per line as ``<file>: <key path>: <what is wrong>
(line N)``: :func:`problems_of` turns a pydantic ``ValidationError`` into problems and
:meth:`ScenarioError.of` into those lines, with key paths such as ``sweep.message_size[0]``
and every line printable. A results file that cannot be written is
:class:`RecordsNotWritten`, one line naming the file and why.
"""

from __future__ import annotations

import contextlib
import difflib
import errno
import json
import os
import re
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any, NamedTuple

from pydantic import BaseModel, ValidationError
from pydantic_core import PydanticCustomError

#: A key path, as pydantic reports it: names and list indexes.
Loc = tuple[str | int, ...]
#: Problems reported for one file; the rest are counted on one more line.
MAX_ERROR_LINES = 50
#: The error type of a check that involves several keys (see :func:`conflict`).
CONFLICT = "conflict"


class UserError(Exception):
    """Bad input: printed as one line, exit code 2."""

    exit_code = 2


class Problem(NamedTuple):
    """One thing wrong: where, what, and (for a check across keys) every key involved."""

    loc: Loc
    message: str
    keys: tuple[Loc, ...] = ()


class ScenarioError(UserError):
    """A scenario file is missing, not TOML, or does not match the model."""

    def __init__(self, lines: list[str]) -> None:
        super().__init__("\n".join(lines))
        self.lines = lines

    @classmethod
    def of(cls, problems: list[Problem], source: str, text: str = "") -> ScenarioError:
        """One line per problem (at most :data:`MAX_ERROR_LINES`, then a count of the rest)."""
        lines = []
        for problem in problems[:MAX_ERROR_LINES]:
            line = line_of(text, problem.loc)
            where = f" (line {line})" if line else ""
            lines.append(f"{source}: {key_path(problem.loc)}: {one_line(problem.message)}{where}")
        if len(problems) > MAX_ERROR_LINES:
            more = len(problems) - MAX_ERROR_LINES
            lines.append(f"{source}: (more): {more} further problem(s) not shown")
        return cls(lines)


class RunFailed(Exception):
    """A run could not complete (broker unreachable or died, a node failed): exit code 1."""

    exit_code = 1


def conflict(keys: tuple[str, ...], message: str) -> PydanticCustomError:
    """An error of a check across ``keys`` (dotted, relative to the model raising it).

    It is reported at the first key — or, in a sweep point, at the first key the point
    varies, so that the line names the swept value that causes it.
    """
    return PydanticCustomError(CONFLICT, "{message}", {"message": message, "keys": keys})


_TOML_KINDS: tuple[tuple[type, str], ...] = (
    (bool, "a boolean"),
    (int, "an integer"),
    (float, "a float"),
    (str, "a string"),
    (list, "an array"),
    (dict, "a table"),
)
_TYPE_ERRORS = {"int_type", "float_type", "bool_type", "string_type", "list_type", "dict_type"}


def _submodel(annotation: Any) -> type[BaseModel] | None:
    """The model a field holds, directly or inside ``X | None``, ``list[X]``, ``dict[str, X]``."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _submodel(arg)
        if found is not None:
            return found
    return None


def likely_key(model: type[BaseModel] | None, loc: tuple[str | int, ...]) -> str | None:
    """The known key closest to the unknown one at ``loc`` (relative to ``model``), if any
    is close enough to be the one meant."""
    for part in loc[:-1]:
        if model is None:
            return None
        if isinstance(part, int):
            continue
        field = model.model_fields.get(part)
        model = _submodel(field.annotation) if field is not None else None
    if model is None or not isinstance(loc[-1], str):
        return None
    known = [field.alias or name for name, field in model.model_fields.items()]
    found = difflib.get_close_matches(loc[-1], known, n=1, cutoff=0.6)
    return found[0] if found else None


def problems_of(
    exc: ValidationError, prefix: Loc = (), model: type[BaseModel] | None = None
) -> list[Problem]:
    """A validation error's problems, each with its key path (under ``prefix``) and message;
    an unknown key of ``model`` (the one that raised) names the likely key meant."""
    problems = []
    for error in exc.errors():
        loc: Loc = (*prefix, *error["loc"])
        message = error["msg"].removeprefix("Value error, ")
        keys: tuple[Loc, ...] = (loc,)
        if error["type"] == "extra_forbidden":
            meant = likely_key(model, tuple(error["loc"]))
            message = f"unknown key (did you mean {meant}?)" if meant else "unknown key (misspelt?)"
        elif error["type"] == "missing":
            message = "required key is missing"
        elif error["type"] == CONFLICT:
            keys = tuple((*loc, *key.split(".")) for key in error["ctx"]["keys"])
            loc = keys[0]
        elif error["type"] in _TYPE_ERRORS:
            kind = next((k for t, k in _TOML_KINDS if isinstance(error["input"], t)), "")
            message += f" (got {kind})" if kind else ""
        problems.append(Problem(loc, message, keys))
    return problems


_BARE_KEY = re.compile(r"[A-Za-z0-9_-]{1,64}")


def key_path(loc: Loc) -> str:
    """A key path as written in messages: ``sweep.message_size[0]``, quoting odd names."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            name = part if _BARE_KEY.fullmatch(part) else json.dumps(part[:64])
            out += f".{name}" if out else name
    return out or "(top level)"


def first_line(exc: BaseException) -> str:
    """An exception in one line: the first line of its message, else its type's name."""
    text = str(exc).strip().splitlines()
    return text[0] if text else type(exc).__name__


def one_line(message: str) -> str:
    """A printable line: control and other invisible characters escaped, length capped."""
    if len(message) > 1_000:
        message = message[:1_000] + "…"
    return "".join(c if c.isprintable() else f"\\u{ord(c):04x}" for c in message)


_HEADER = re.compile(r"(\[\[?)\s*([^\[\]]*?)\s*\]")


def line_of(text: str, loc: Loc) -> int | None:
    """Best-effort line number of a key path in TOML text.

    Handles tables, arrays of tables (``[[sweep.points]]``, by index), dotted keys and keys
    of inline tables; list indexes after the last key give that key's line.
    """
    path = list(loc)
    while path and isinstance(path[-1], int):
        path.pop()
    if not text or not path:
        return None
    seen: dict[tuple[str, ...], int] = {}
    table: list[str | int] = []
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        header = _HEADER.match(line) if line.startswith("[") else None
        if header:
            names = tuple(p.strip().strip('"') for p in header.group(2).split("."))
            table = list(names)
            if header.group(1) == "[[":
                seen[names] = seen.get(names, -1) + 1
                table.append(seen[names])
            if table == path:
                return number
            continue
        key = line.split("=", 1)[0].strip().strip('"') if "=" in line else ""
        if not key:
            continue
        full = table + [p.strip().strip('"') for p in key.split(".")]
        if (
            full == path[: len(full)]
            and len(full) <= len(path)
            and (full == path or re.search(rf"\b{re.escape(str(path[-1]))}\s*=", line))
        ):
            return number
    return None


class RecordsNotWritten(RunFailed):
    """A results file could not be written: one line naming the file and why."""

    def __init__(self, path: Path | str, exc: OSError) -> None:
        super().__init__(f"{write_problem(exc)} writing {path}")
        self.path = Path(path)


def write_whole(path: Path, write: Callable[[Path], object]) -> None:
    """Write through a hidden temporary file renamed into place, so that a file is there
    whole or not at all; an error (a full disk, a read-only directory) removes the partial
    file, freeing its space, and is raised as :class:`RecordsNotWritten` naming ``path``."""
    tmp = path.with_name(f".{path.name}.tmp")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write(tmp)
        tmp.rename(path)
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise RecordsNotWritten(path, exc) from exc


def write_problem(exc: OSError) -> str:
    """Why a write failed, in the words a user acts on."""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT):
        return "disk full"
    if exc.errno == errno.EROFS:
        return "permission denied (read-only file system)"
    if exc.errno in (errno.EACCES, errno.EPERM):
        return "permission denied"
    if exc.errno:
        return os.strerror(exc.errno).lower()
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
