"""What a benchmark's results file and the table generated from it into a docs page share:
the checkout's git state, the JSON file read and written, entries merged by name, and the
page's part between two markers replaced.

Standard library only. ``peers_doc.py`` and ``durability_doc.py`` import it as their
neighbour when a benchmark script runs them, as ``tests.benchmarks.generated_page`` in the
tests.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

Entry = dict[str, Any]


def git_state(root: Path) -> tuple[str | None, bool | None]:
    """The checkout's commit (seven hex digits) and whether tracked files differ from it;
    (None, None) where git cannot say."""
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short=7", "HEAD"],
            cwd=root, capture_output=True, text=True, check=True,
        ).stdout.strip()  # fmt: skip
        status = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"],
            cwd=root, capture_output=True, text=True, check=True,
        ).stdout  # fmt: skip
    except (OSError, subprocess.CalledProcessError):
        return None, None
    return commit or None, bool(status.strip())


@dataclass(frozen=True)
class ResultsFile:
    """A results file's shape: its format number, the list its entries are kept in and the
    field that names an entry, and what an empty file holds besides."""

    format: int
    entries: str
    key: str
    empty: tuple[tuple[str, Any], ...] = ()

    def load(self, path: Path) -> dict[str, Any]:
        """The results file, or an empty one where there is none yet."""
        if not path.exists():
            return {"format": self.format, **dict(self.empty), self.entries: []}
        results = json.loads(path.read_text(encoding="utf-8"))
        if results.get("format") != self.format:
            raise ValueError(f"{path}: format {results.get('format')!r}, expected {self.format}")
        return results

    def merge(self, results: Mapping[str, Any], entries: Iterable[Entry]) -> dict[str, Any]:
        """``results`` with each of ``entries`` in place of the entry of the same name (one
        not there yet comes last); the others stay."""
        kept: list[Entry] = list(results.get(self.entries, []))
        for entry in entries:
            names = [e[self.key] for e in kept]
            if entry[self.key] in names:
                kept[names.index(entry[self.key])] = entry
            else:
                kept.append(entry)
        return {**results, "format": self.format, self.entries: kept}


def commit_words(entry: Mapping[str, Any]) -> str:
    """The commit an entry was run at (and whether tracked files differed from it), or "an
    unknown commit"."""
    commit = f"commit `{entry['commit']}`" if entry.get("commit") else "an unknown commit"
    return commit + (" (with changes not committed)" if entry.get("dirty") else "")


def write(results: Mapping[str, Any], path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


@dataclass(frozen=True)
class Markers:
    """The two lines a page's generated part stands between, and the page's name."""

    begin: str
    end: str
    page: str

    def part(self, page: str) -> str:
        """The text between the markers of a page (without them)."""
        if self.begin not in page or self.end not in page:
            raise ValueError(f"{self.page} lost its markers of the generated table")
        start = page.index(self.begin) + len(self.begin)
        return page[start : page.index(self.end, start)].strip("\n")

    def replace(self, page: str, body: str) -> str:
        """``page`` with ``body`` between its markers."""
        self.part(page)  # both markers present
        head, _, rest = page.partition(self.begin)
        _, _, tail = rest.partition(self.end)
        return f"{head}{self.begin}\n{body}\n{self.end}{tail}"

    def rewrite(self, path: Path, body: str) -> Path:
        """The page at ``path`` written again with ``body`` between its markers."""
        path.write_text(self.replace(path.read_text(encoding="utf-8"), body), encoding="utf-8")
        return path
