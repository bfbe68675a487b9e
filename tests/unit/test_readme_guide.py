"""The README is a guide of about 300 lines; the reference lives in docs/, every page linked, every link resolving."""

from __future__ import annotations

import re
from pathlib import Path

from tests.conftest import ROOT

README = ROOT / "README.md"
DOCS = ROOT / "docs"
LINK = re.compile(r"\]\(([^)#\s]+)(?:#[^)\s]*)?\)")


def _local_links(path: Path) -> list[str]:
    return [t for t in LINK.findall(path.read_text()) if not re.match(r"[a-z]+:", t)]


def test_the_readme_is_a_guide_under_320_lines() -> None:
    assert len(README.read_text().splitlines()) < 320


def test_the_readme_links_every_docs_page() -> None:
    linked = {Path(t).as_posix() for t in _local_links(README)}
    pages = {f"docs/{p.name}" for p in DOCS.glob("*.md") if p.name != "README.md"}
    assert pages, "docs/ holds no page"
    assert not pages - linked, f"README.md does not link {sorted(pages - linked)}"


def test_every_docs_link_resolves() -> None:
    broken = [
        f"{page.relative_to(ROOT)} -> {target}"
        for page in [README, *sorted(DOCS.glob("*.md"))]
        for target in _local_links(page)
        if not (page.parent / target).exists()
    ]
    assert not broken, broken


def test_the_docs_index_lists_every_page() -> None:
    index = _local_links(DOCS / "README.md")
    assert {p.name for p in DOCS.glob("*.md")} - {"README.md"} <= set(index)
