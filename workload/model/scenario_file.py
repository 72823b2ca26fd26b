"""The scenario file format: TOML parsed once into strict pydantic models.

Unknown or misspelt keys are rejected, numbers and booleans are never coerced from other
types (``threads = true`` or ``message_size = "100"`` are errors; durations take a number of
seconds or a string such as ``"30s"``), and every number has an upper bound. Each problem
becomes one line naming the file, the key path and, where it can be found, the line. Broker
parameters are validated against the chosen system's own model from the registry, and
every sweep point is validated whole — its load section and its broker parameters — and
none may be the same point twice, before anything runs. Before any of that — before
anything walks the data recursively — the parsed data's shape is bounded
(:func:`~workload.model.shape.shape_problem`): how deep its tables and arrays nest, how many entries each holds
and how many values there are in all. Everything past
:func:`load_scenario` works on these models, never on raw dicts. The limits of every key
are :mod:`workload.model.bounds`'.
"""

from __future__ import annotations

import copy
import os
import stat
import tomllib
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from brokers import registry
from brokers.registry import UnknownSystem
from workload.model.bounds import MAX_FILE_BYTES
from workload.model.checks import (
    backlog_problems,
    drain_problems,
    fault_problems,
    key_problems,
    point_problems,
    search_problems,
    sweep_problems,
    topology_problems,
)
from workload.model.errors import Loc, Problem, ScenarioError, one_line, problems_of
from workload.model.host_limits import (
    HostLimits,
    host_problems,
    length_problems,
    max_points_problems,
)
from workload.model.scenario import Scenario
from workload.model.shape import nesting_line, shape_problem


def load_scenario(path: str | Path, host: HostLimits | None = None) -> Scenario:
    """Read, parse and validate one scenario file, or raise :class:`ScenarioError`; with
    ``host``, for a run on this host (:func:`parse_scenario`)."""
    path = Path(path)
    text = _read_text(path)
    if not text.strip():
        raise ScenarioError(
            [f"{path}: the file is empty; a scenario needs at least name and [broker]"]
        )
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ScenarioError([f"{path}: not valid TOML: {one_line(str(exc))}"]) from None
    except RecursionError:
        line = nesting_line(text)
        where = f" (line {line})" if line else ""
        raise ScenarioError(
            [f"{path}: not valid TOML: arrays or tables nested too deeply{where}"]
        ) from None
    except MemoryError:
        raise ScenarioError([f"{path}: not valid TOML: too large to parse"]) from None
    return parse_scenario(data, str(path), text, host)


def _read_text(path: Path) -> str:
    """The file's text: only a regular file of at most :data:`MAX_FILE_BYTES` is read.

    A pipe, device or directory is refused without reading it (opening does not block).
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        raise ScenarioError([f"{path}: no such file"]) from None
    except OSError as exc:
        raise ScenarioError([f"{path}: cannot read: {exc.strerror or exc}"]) from None
    try:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            kind = "a directory" if stat.S_ISDIR(mode) else "a pipe, device or socket"
            raise ScenarioError([f"{path}: not a regular file ({kind}); nothing was read"])
        with os.fdopen(fd, "rb", closefd=False) as file:
            data = file.read(MAX_FILE_BYTES + 1)
    except OSError as exc:
        raise ScenarioError([f"{path}: cannot read: {exc.strerror or exc}"]) from None
    finally:
        os.close(fd)
    if len(data) > MAX_FILE_BYTES:
        raise ScenarioError([f"{path}: larger than the limit of 1 MiB for a scenario file"])
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ScenarioError([f"{path}: cannot read: not UTF-8 text ({exc.reason})"]) from None


def _params_problems(data: dict[str, Any]) -> list[Problem]:
    """``[broker.params]`` checked on its own, for a scenario whose other sections failed:
    its problems are reported in the same pass (none when the system is not known)."""
    broker = data.get("broker")
    if not isinstance(broker, dict) or not isinstance(broker.get("params", {}), dict):
        return []
    try:
        system = registry.get(str(broker.get("system")))
    except UnknownSystem:
        return []
    try:
        system.params_model.model_validate(broker.get("params", {}))
    except ValidationError as exc:
        return problems_of(exc, ("broker", "params"), system.params_model)
    return []


def parse_scenario(
    data: dict[str, Any],
    source: str = "<scenario>",
    text: str = "",
    host: HostLimits | None = None,
) -> Scenario:
    """Validate already-parsed TOML data (``source`` and ``text`` only improve messages).

    Besides the models, checks ``[broker.params]`` against the system and every sweep point
    as a whole. The data's shape is bounded first (:func:`~workload.model.shape.shape_problem`). With ``host``,
    the scenario is also held to what a run on this host starts without a word more
    (:func:`~workload.model.host_limits.host_problems`,
    :func:`~workload.model.host_limits.length_problems`).
    """
    shape = shape_problem(data, source, text)
    if shape is not None:
        raise ScenarioError([shape])
    try:
        scenario = Scenario.model_validate(data)
    except ValidationError as exc:
        problems = problems_of(exc, model=Scenario) + _params_problems(data)
        problems += _problems_beyond(data, problems)
        raise ScenarioError.of(problems, source, text) from None
    try:
        scenario.broker_params()
    except ValidationError as exc:
        params_model = registry.get(scenario.broker.system).params_model
        problems = problems_of(exc, ("broker", "params"), params_model)
        raise ScenarioError.of(problems + _problems_beyond(data, problems), source, text) from None
    problems = _cross_problems(scenario)
    if host is not None:
        problems += host_problems(scenario, host) + length_problems(scenario, host)
    if problems:
        raise ScenarioError.of(problems, source, text)
    return scenario


def _cross_problems(scenario: Scenario) -> list[Problem]:
    """The checks across keys and sections of a scenario whose every key is valid."""
    return (
        point_problems(scenario)
        + topology_problems(scenario)
        + sweep_problems(scenario)
        + max_points_problems(scenario)
        + fault_problems(scenario)
        + drain_problems(scenario)
        + search_problems(scenario)
        + key_problems(scenario)
        + backlog_problems(scenario)
    )


#: Rounds of leaving out the keys found wrong before the rest is given up on.
_ROUNDS = 3


def _problems_beyond(data: dict[str, Any], found: list[Problem]) -> list[Problem]:
    """Problems the first pass could not see, so that one pass reports them all.

    The keys already found wrong are left out (their defaults stand in) and the rest is
    validated again, up to the checks across keys. Only problems that involve none of the
    keys left out are kept: a default standing in for a wrong value proves nothing.
    """
    trial = copy.deepcopy(data)
    removed: list[Loc] = []
    seen = {(p.loc, p.message) for p in found}
    more: list[Problem] = []
    problems = found
    for _ in range(_ROUNDS):
        left_out = [loc for p in problems for loc in (p.loc, *p.keys) if _drop(trial, loc)]
        if not left_out:
            break
        removed += left_out
        valid = False
        try:
            scenario = Scenario.model_validate(trial)
            scenario.broker_params()
            valid = True
        except ValidationError as exc:
            problems = problems_of(exc, model=Scenario) + _params_problems(trial)
        if valid:
            problems = _cross_problems(scenario)
        fresh = [
            p
            for p in problems
            if (p.loc, p.message) not in seen
            and not any(_related(key, gone) for key in (p.loc, *p.keys) for gone in removed)
        ]
        seen.update((p.loc, p.message) for p in fresh)
        more += fresh
        if valid:
            break
    return more


def _drop(data: Any, loc: Loc) -> bool:
    """Remove the key at ``loc`` from nested TOML data (for an item of an array, the whole
    array: the others' positions must not move); whether there was one."""
    while loc and isinstance(loc[-1], int):
        loc = loc[:-1]
    if not loc:
        return False
    *parents, last = loc
    for part in parents:
        inside = part in data if isinstance(data, dict) else _index(data, part)
        if not inside:
            return False
        data = data[part]
    if isinstance(data, dict) and last in data:
        del data[last]
        return True
    return False


def _index(data: Any, part: str | int) -> bool:
    return isinstance(data, list) and isinstance(part, int) and 0 <= part < len(data)


def _related(a: Loc, b: Loc) -> bool:
    """Whether one key path is the other or lies inside it."""
    n = min(len(a), len(b))
    return tuple(a[:n]) == tuple(b[:n])
