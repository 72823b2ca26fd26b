"""The shape of parsed scenario data, bounded before anything walks it recursively.

TOML's tables and arrays may nest without limit (``[a.a.a.…]`` a thousand deep parses
without recursion), and every step after parsing — pydantic, ``copy.deepcopy``, the key
paths of messages — recurses: on such data it ends in a RecursionError, or takes minutes
and gigabytes on a table of a million keys. :func:`shape_problem` walks the data with a
stack of its own and names the first excess in one line; :func:`nesting_line` finds the
line of TOML text that nests deepest (also for text the parser gave up on).
"""

from __future__ import annotations

import re
from typing import Any

from workload.model.bounds import MAX_ENTRIES, MAX_NESTING, MAX_VALUES
from workload.model.errors import Loc, key_path, line_of


def shape_problem(data: Any, source: str = "<scenario>", text: str = "") -> str | None:
    """The first way ``data`` exceeds the shape any scenario has, as one line, or None.

    Tables and arrays may nest :data:`MAX_NESTING` deep (the top-level table is the first
    level), hold :data:`MAX_ENTRIES` entries each and :data:`MAX_VALUES` values in all. The
    walk keeps its own stack, so it is safe on data of any depth, and it stops at the first
    excess: the checks after it (pydantic, ``copy.deepcopy``, the problems' key paths) recurse
    and would end in a RecursionError, or take minutes and gigabytes, on such data.
    """
    stack: list[tuple[Any, Loc, int]] = [(data, (), 1)]
    values = 0
    while stack:
        value, loc, depth = stack.pop()
        values += 1
        if values > MAX_VALUES:
            return (
                f"{source}: (top level): more than {MAX_VALUES:,} values in all; a scenario "
                "holds far fewer"
            )
        if not isinstance(value, dict | list):
            continue
        if depth > MAX_NESTING:
            line = nesting_line(text)
            where = f" (line {line})" if line else ""
            return (
                f"{source}: {key_path(loc[:MAX_NESTING])}…: tables and arrays nested more than "
                f"{MAX_NESTING} deep; a scenario nests at most a few{where}"
            )
        if len(value) > MAX_ENTRIES:
            kind = "a table" if isinstance(value, dict) else "an array"
            line = line_of(text, loc)
            where = f" (line {line})" if line else ""
            return (
                f"{source}: {key_path(loc)}: {len(value):,} entries; {kind} of a scenario "
                f"holds at most {MAX_ENTRIES:,}{where}"
            )
        items = value.items() if isinstance(value, dict) else enumerate(value)
        stack.extend((item, (*loc, key), depth + 1) for key, item in items)
    return None


_TABLE_HEADER = re.compile(r"\s*(\[\[?)([^\]]*)\]")


def nesting_line(text: str) -> int | None:
    """Best-effort number of the first line that nests tables and arrays deepest in TOML
    ``text``: its table header's keys, a dotted key's parts under it and the brackets and
    braces open in a value (strings and comments left out), counted as the parsed data's
    levels are. Iterative and linear in the text's length, for text that may not parse."""
    deepest, found = 0, None
    table = level = 1  # the levels of the table the lines are in, and of a key's value
    open_brackets = 0  # brackets and braces open in a value spanning lines
    quote = ""  # the string a value spanning lines is in ('"""' or "'''")
    for number, line in enumerate(text.splitlines(), start=1):
        if not quote and not open_brackets:
            header = _TABLE_HEADER.match(line)
            if header:
                table = 2 + header.group(2).count(".") + (header.group(1) == "[[")
                if table > deepest:
                    deepest, found = table, number
                continue
        i = 0
        if not quote and not open_brackets:
            key, equals, _ = line.partition("=")
            if equals:
                level = table + key.count(".")
                i = len(key) + 1
                if level > deepest:
                    deepest, found = level, number
        while i < len(line):
            if quote:
                end = line.find(quote, i)
                if end < 0:
                    break
                i, quote = end + len(quote), ""
                continue
            char = line[i]
            if char == "#":
                break
            if line.startswith(('"""', "'''"), i):
                quote, i = line[i : i + 3], i + 3
                continue
            if char in "\"'":
                i = _string_end(line, i)
                continue
            if char in "[{":
                open_brackets += 1
                if level + open_brackets > deepest:
                    deepest, found = level + open_brackets, number
            elif char in "]}":
                open_brackets = max(0, open_brackets - 1)
            i += 1
    return found


def _string_end(line: str, start: int) -> int:
    """The index after the one-line string that begins at ``line[start]``."""
    quote, i = line[start], start + 1
    while i < len(line):
        if line[i] == "\\" and quote == '"':
            i += 2
            continue
        if line[i] == quote:
            return i + 1
        i += 1
    return i
