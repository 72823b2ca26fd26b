"""The documentation a clone carries is self-contained and in step with the code: every
relative link of the README, ARCHITECTURE.md and ``docs/`` names a file of the repository
(and a heading of it, where it names one), every section the code and the docs cite exists,
nothing refers to a file outside the repository, the generated parts equal what they are
generated from, the README stays short and links every page, and no code points at a
section of the README."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from analysis.columns import SUMMARY_COLUMNS, glossary
from tests import docs_pages
from tests.benchmarks import durability_doc, peers_doc
from tests.conftest import SCENARIOS
from workload.model.scenario import Scenario

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
DOCS_DIR = ROOT / "docs"
DOCS = [README, ROOT / "ARCHITECTURE.md", *sorted(DOCS_DIR.glob("*.md"))]
#: The most lines the README may have: the rest belongs in ``docs/``.
README_LINES = 250
#: A Markdown link's target (``[text](target)``), without an optional title.
LINK = re.compile(r"\[[^\]]*\]\(\s*([^)\s]+)(?:\s+\"[^\"]*\")?\s*\)")
FENCE = re.compile(r"^(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+(.+?)\s*#*\s*$")
CITED = re.compile(r"docs/measurement\.md §(\d+)(?:, §(\d+))?")


def tracked() -> list[Path]:
    listed = subprocess.run(
        ["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=False
    ).stdout.split()
    files = [ROOT / name for name in listed] or list(ROOT.rglob("*.py"))
    return [f for f in files if f.suffix in (".py", ".md", ".toml", ".j2") and f.is_file()]


def prose_lines(text: str) -> list[str]:
    """The lines of a Markdown text outside fenced code blocks, inline code removed."""
    lines, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line.strip()):
            fenced = not fenced
            continue
        if not fenced:
            lines.append(re.sub(r"`[^`]*`", "", line))
    return lines


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: its text, lower case, without punctuation (but
    ``-`` and ``_``), spaces as ``-``."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link reads as its text
    text = re.sub(r"[^\w\- ]", "", text.lower())
    return text.replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading anchor of a Markdown file; a repeated one gets ``-1``, ``-2``, …"""
    seen: dict[str, int] = {}
    found = set()
    fenced = False
    for line in path.read_text(encoding="utf-8").splitlines():
        if FENCE.match(line.strip()):
            fenced = not fenced
            continue
        match = None if fenced else HEADING.match(line)
        if match is None:
            continue
        base = slug(match.group(2).replace("`", ""))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def links(path: Path) -> list[str]:
    return [
        target
        for line in prose_lines(path.read_text(encoding="utf-8"))
        for target in LINK.findall(line)
    ]


def test_slugs_are_githubs() -> None:
    assert slug("§5 Counting every message") == "5-counting-every-message"
    assert slug("Price and quotas before up") == "price-and-quotas-before-up"
    assert slug("What set the pace: resource telemetry and the verdict") == (
        "what-set-the-pace-resource-telemetry-and-the-verdict"
    )
    assert slug("Another run, and teardown") == "another-run-and-teardown"
    assert slug("[backlog] and its_keys") == "backlog-and-its_keys"


def test_anchors_of_repeated_headings_are_numbered(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("# Notes\n\n```sh\n# not a heading\n```\n\n## Notes\n\n### `[load]`\n")
    assert anchors(page) == {"notes", "notes-1", "load"}


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_relative_link_resolves(doc: Path) -> None:
    broken = []
    for target in links(doc):
        if "://" in target or target.startswith("mailto:"):
            continue
        name, _, anchor = target.partition("#")
        path = (doc.parent / name).resolve() if name else doc
        if not path.exists():
            broken.append(f"{target}: no such file")
        elif anchor and path.suffix == ".md" and anchor not in anchors(path):
            broken.append(f"{target}: {path.name} has no heading #{anchor}")
    assert not broken, f"{doc.relative_to(ROOT)}: {broken}"


def test_every_cited_section_of_the_method_exists() -> None:
    sections = set(re.findall(r"^## §(\d+) ", (DOCS_DIR / "measurement.md").read_text(), re.M))
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


def test_no_code_points_at_a_section_of_the_readme() -> None:
    """The README is an overview: what code cites lives under docs/."""
    readme_section = re.compile(r"README(?:\.md)?(?:'s|#|, [A-Z])|see (?:the )?README")
    found = [
        f"{path.relative_to(ROOT)}:{n}"
        for path in tracked()
        if path.suffix != ".md" and path.name != "test_docs.py"
        for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1)
        if readme_section.search(line)
    ]
    assert not found, f"code pointing at a README section (the docs/ page holds it): {found}"


def test_the_readme_is_short_and_names_both_commands() -> None:
    text = README.read_text(encoding="utf-8")
    lines = text.splitlines()
    assert len(lines) <= README_LINES, (
        f"README.md has {len(lines)} lines, at most {README_LINES}: move detail to docs/"
    )
    commands = [line.split("#")[0].strip() for line in lines]
    assert "make demo" in commands and "make test" in commands


def test_the_readme_links_every_page_of_the_docs() -> None:
    linked = {(README.parent / t.partition("#")[0]).resolve() for t in links(README)}
    pages = [*sorted(DOCS_DIR.glob("*.md")), ROOT / "ARCHITECTURE.md"]
    missing = [p.relative_to(ROOT).as_posix() for p in pages if p.resolve() not in linked]
    assert not missing, f"README.md's index lacks {missing}"


def test_the_columns_page_is_the_declared_glossary() -> None:
    text = (DOCS_DIR / "columns.md").read_text(encoding="utf-8")
    assert text == docs_pages.columns_page(), (
        "docs/columns.md differs from analysis/columns.py: run `python -m tests.docs_pages`"
    )
    # What `python -m analysis.columns` prints, after the header.
    assert text.removeprefix(docs_pages.COLUMNS_HEADER).rstrip("\n") == glossary()
    for name in SUMMARY_COLUMNS:
        assert f"| `{name}` |" in text


def test_the_peer_table_is_rendered_from_its_results_file() -> None:
    page = (DOCS_DIR / "peers.md").read_text(encoding="utf-8")
    results = peers_doc.load(peers_doc.RESULTS)
    assert peers_doc.MARKERS.part(page) == peers_doc.render(results), (
        "docs/peers.md's table differs from docs/peers-results.json: run "
        "`python tests/benchmarks/peers_doc.py`"
    )
    assert {e["system"] for e in results["systems"]}, "the results file names no system"
    for entry in results["systems"]:
        assert entry.get("date") and entry.get("commit"), entry["system"]
        assert all(row.get("source") for row in entry["rows"]), entry["system"]


def test_the_power_loss_table_is_rendered_from_its_results_file() -> None:
    page = (DOCS_DIR / "durability.md").read_text(encoding="utf-8")
    results = durability_doc.load(durability_doc.RESULTS)
    assert durability_doc.MARKERS.part(page) == durability_doc.render(results), (
        "docs/durability.md's table differs from docs/durability-results.json: run "
        "`python tests/benchmarks/durability_doc.py`"
    )
    for entry in results["scenarios"]:
        assert entry.get("date") and entry.get("commit"), entry["scenario"]
        assert (SCENARIOS / f"{entry['scenario']}.toml").exists(), entry["scenario"]


def _keys(schema: dict, node: dict) -> set[str]:
    """Every property name under a JSON-schema node, through references."""
    found: set[str] = set()
    if "$ref" in node:
        node = schema["$defs"][node["$ref"].rsplit("/", 1)[1]]
    for name, sub in node.get("properties", {}).items():
        found.add(name)
        found |= _keys(schema, sub)
    for key in ("anyOf", "allOf", "oneOf"):
        for sub in node.get(key, []):
            found |= _keys(schema, sub)
    if isinstance(node.get("items"), dict):
        found |= _keys(schema, node["items"])
    return found


def test_scenarios_md_names_every_key_of_the_format() -> None:
    schema = Scenario.model_json_schema()
    text = (DOCS_DIR / "scenarios.md").read_text(encoding="utf-8")
    named = [re.compile(rf"`{k}`|\[{k}\]|\.{k}\]") for k in sorted(_keys(schema, schema))]
    missing = [k.pattern.split("`")[1] for k in named if not k.search(text)]
    assert not missing, f"docs/scenarios.md does not name these scenario keys: {missing}"
