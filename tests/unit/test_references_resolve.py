"""What the project's files point a reader to exists: each `README "Section"` or `docs/x.md, "Section"` names a
heading of that file (in samconfig.toml, worlds/, docs/, the README and the template), and each relative Markdown
link of the README and docs/ names a file that is there (and, with a #fragment, one of its headings)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import ROOT

SECTION_REFERENCE = re.compile(
    r"""((?:README(?:\.md)?)|(?:docs/[\w-]+\.md))(?:'s)?,?\s+\(?["“]([^"”\n]+)["”]"""
)
MARKDOWN_LINK = re.compile(r"\]\(([^)\s]+)\)")
POINTING = [
    ROOT / "samconfig.toml",
    ROOT / "template.yaml",
    ROOT / "README.md",
    *sorted((ROOT / "worlds").glob("*.yaml")),
    *sorted((ROOT / "docs").glob("*.md")),
]
MARKDOWN = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]


def headings(path: Path) -> list[str]:
    return [
        re.sub(r"^#+\s*", "", line).strip().strip("`")
        for line in path.read_text(encoding="utf-8").splitlines()
        if line.startswith("#")
    ]


def slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def section_references(path: Path) -> list[tuple[str, str]]:
    return [(m[1], m[2]) for m in SECTION_REFERENCE.finditer(path.read_text(encoding="utf-8"))]


@pytest.mark.parametrize("path", POINTING, ids=lambda p: str(p.relative_to(ROOT)))
def test_each_section_named_is_a_heading_of_its_file(path: Path) -> None:
    missing = []
    for target, section in section_references(path):
        file = ROOT / ("README.md" if target.startswith("README") else target)
        if not file.exists() or not any(h == section or h.startswith(section) for h in headings(file)):
            missing.append(f'{target} "{section}"')
    assert not missing, f"{path.relative_to(ROOT)} names sections that are not there: {missing}"


@pytest.mark.parametrize("path", MARKDOWN, ids=lambda p: str(p.relative_to(ROOT)))
def test_each_relative_link_resolves(path: Path) -> None:
    broken = []
    for link in MARKDOWN_LINK.findall(path.read_text(encoding="utf-8")):
        if re.match(r"^[a-z]+:", link):
            continue  # https:, mailto:: not this test's
        target, _, fragment = link.partition("#")
        file = (path.parent / target).resolve() if target else path
        if not file.exists() or (
            fragment and file.suffix == ".md" and fragment not in {slug(h) for h in headings(file)}
        ):
            broken.append(link)
    assert not broken, f"{path.relative_to(ROOT)} links to what is not there: {broken}"


def test_the_checker_finds_a_moved_section(tmp_path: Path) -> None:
    moved = tmp_path / "samconfig.toml"
    moved.write_text('# see README "A section that moved" and docs/testing.md, "The world file"\n')
    assert section_references(moved) == [
        ("README", "A section that moved"),
        ("docs/testing.md", "The world file"),
    ]
    assert "The world file" in headings(ROOT / "docs" / "testing.md")
    assert not any(h.startswith("A section that moved") for h in headings(ROOT / "README.md"))


def test_the_license_the_package_declares_is_there() -> None:
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert "Apache License" in text and "Version 2.0, January 2004" in text
    assert 'license = { text = "Apache-2.0" }' in (ROOT / "pyproject.toml").read_text(encoding="utf-8")
