"""The documentation a clone carries is self-contained: every link of the README and of
``docs/`` names a file of the repository, every section the code and the docs cite exists,
and nothing refers to a file outside the repository."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
#: Markdown links and inline-code paths that look like files of the repository.
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)]*)?\)")
CITED = re.compile(r"docs/measurement\.md §(\d+)(?:, §(\d+))?")


def tracked() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=False
    ).stdout.split()
    files = [ROOT / name for name in listed] or list(ROOT.rglob("*.py"))
    return [f for f in files if f.suffix in (".py", ".md", ".toml", ".j2") and f.is_file()]


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.name)
def test_every_link_names_a_file_of_the_repository(doc: Path) -> None:
    for target in LINK.findall(doc.read_text()):
        if "://" in target or target.startswith("mailto:"):
            continue
        assert (doc.parent / target).exists(), f"{doc.name} links to {target}, which is not here"


def test_every_cited_section_of_the_method_exists() -> None:
    sections = set(re.findall(r"^## §(\d+) ", (ROOT / "docs" / "measurement.md").read_text(), re.M))
    cited = {
        (path.relative_to(ROOT).as_posix(), number)
        for path in tracked()
        for match in CITED.finditer(path.read_text(errors="replace"))
        for number in match.groups()
        if number
    }
    assert cited, "nothing cites the method"
    missing = sorted((where, n) for where, n in cited if n not in sections)
    assert not missing, f"cited sections that docs/measurement.md lacks: {missing}"


def test_nothing_refers_to_a_file_outside_the_repository() -> None:
    outside = re.compile(r"\bSPEC(?:\.md| §)|\.\./shared|\bshared/(?:SPEC|STYLE)")
    found = [
        f"{path.relative_to(ROOT)}:{n}"
        for path in tracked()
        if path.name != "test_docs.py"
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
        if outside.search(line)
    ]
    assert not found, f"references outside the repository: {found}"
