"""Every relative link in the docs and the README resolves: its file exists and, into Markdown, its anchor too.

Links to http(s) and mailto are skipped; links inside fenced code blocks and inline code are not links. Anchors
are GitHub's: the heading in lower case, without punctuation but hyphens and underscores, spaces as hyphens, and
``-1``, ``-2`` ... after a repeated heading.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
PAGES = sorted([*(REPO / "docs").rglob("*.md"), REPO / "README.md", REPO / "CHANGELOG.md"])

FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
INLINE_CODE = re.compile(r"(`+).+?\1")
# [text](target) and ![alt](target); the text may hold one level of brackets, the target no spaces.
LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\[\]]*\])*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
HEADING = re.compile(r"^ {0,3}#{1,6}\s+(.*?)\s*#*\s*$")
EXTERNAL = ("http://", "https://", "mailto:")


def prose_lines(text: str) -> list[tuple[int, str]]:
    """The lines outside fenced code blocks, numbered from 1."""
    lines, fence = [], ""
    for number, line in enumerate(text.splitlines(), 1):
        opened = FENCE.match(line)
        if fence:
            if opened and opened.group(1)[0] == fence[0] and len(opened.group(1)) >= len(fence):
                fence = ""
        elif opened:
            fence = opened.group(1)
        else:
            lines.append((number, line))
    return lines


def slug(heading: str) -> str:
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)  # a link in a heading keeps its text
    text = re.sub(r"[^\w\- ]", "", text.strip().lower())
    return text.replace(" ", "-")


@cache
def anchors(page: Path) -> frozenset[str]:
    seen: dict[str, int] = {}
    found = set()
    for _, line in prose_lines(page.read_text(encoding="utf-8")):
        heading = HEADING.match(line)
        if not heading:
            continue
        base = slug(heading.group(1))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return frozenset(found)


def broken_links(page: Path, root: Path = REPO) -> list[str]:
    broken = []
    for number, line in prose_lines(page.read_text(encoding="utf-8")):
        for match in LINK.finditer(INLINE_CODE.sub("", line)):
            target = match.group(1)
            if target.startswith(EXTERNAL):
                continue
            path_part, _, anchor = target.partition("#")
            where = (page.parent / path_part).resolve() if path_part else page
            if not where.is_relative_to(root.resolve()):  # resolves here, but not in a clone of the repository
                broken.append(f"{page.relative_to(root)}:{number}: {target} (outside the repository)")
            elif not where.exists():
                broken.append(f"{page.relative_to(root)}:{number}: {target} (no such file)")
            elif anchor and where.suffix == ".md" and anchor not in anchors(where):
                broken.append(f"{page.relative_to(root)}:{number}: {target} (no such heading)")
    return broken


@pytest.mark.parametrize("page", PAGES, ids=lambda page: str(page.relative_to(REPO)))
def test_every_relative_link_resolves(page: Path) -> None:
    assert broken_links(page) == []


def test_the_checker_finds_a_broken_file_and_a_broken_anchor(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text("# A heading, `with` code\n\n## Twice\n\n## Twice\n")
    page = tmp_path / "page.md"
    page.write_text(
        "# Page\n\n[ok](other.md#a-heading-with-code) [ok](other.md#twice-1) [ok](#page) [web](https://x.org/y)\n"
        "[gone](missing.md) [bad anchor](other.md#nowhere) `[in code](missing.md)` [out](../elsewhere.md)\n\n"
        "```\n[in a fence](missing.md)\n```\n"
    )
    problems = [problem.split(": ", 1)[1] for problem in broken_links(page, root=tmp_path)]
    assert problems == [
        "missing.md (no such file)",
        "other.md#nowhere (no such heading)",
        "../elsewhere.md (outside the repository)",
    ]
