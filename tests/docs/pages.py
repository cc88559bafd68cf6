"""The documentation's marked blocks: programs a test runs, command lists a test replays,
and files a tutorial has the reader write.

The documentation is README.md and every page under docs/. A fence right after
`<!-- snippet: LANGUAGE -->` is a whole program in that language (tests/docs/test_snippets.py
runs it against a live server); a fence right after `<!-- commands: NAME -->` holds one
command per line (tests/tools and others replay them); a fence right after
`<!-- file: PATH -->` is a file the reader saves at PATH.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"

Kind = Literal["snippet", "commands", "file"]
_KINDS: dict[str, Kind] = {"snippet": "snippet", "commands": "commands", "file": "file"}

_FENCE = re.compile(r"^```(?P<info>[\w+-]*)\n(?P<code>.*?)^```$", re.M | re.S)
_MARKER = re.compile(r"<!-- (?P<kind>snippet|commands|file): (?P<name>[\w+./-]+) -->\n\Z")


@dataclass(frozen=True, slots=True)
class Block:
    """One fenced block of a Markdown text."""

    info: str
    """The fence's info string (`python`, `sh`...)."""
    code: str
    line: int
    """The line of the opening fence, from 1."""
    kind: Kind | None = None
    name: str | None = None
    """The marker's language, name or path; None for an unmarked block."""
    path: Path | None = None
    """The page the block is on; None for a text given directly."""

    @property
    def where(self) -> str:
        """`page:line`, relative to the repository."""
        page = self.path.relative_to(ROOT) if self.path else "<text>"
        return f"{page}:{self.line}"


def pages() -> list[Path]:
    """Every page of the documentation: the README, then docs/ in path order."""
    return [README, *sorted(DOCS.rglob("*.md"))]


def blocks(text: str, path: Path | None = None) -> list[Block]:
    """Every fenced block of `text`, in order, with the marker on the line before it."""
    found = []
    for fence in _FENCE.finditer(text):
        before = text[: fence.start()]
        marker = _MARKER.search(before[before.rfind("\n", 0, len(before) - 1) + 1 :])
        line = before.count("\n") + 1
        if marker is None:
            found.append(Block(fence["info"], fence["code"], line, path=path))
        else:
            kind = _KINDS[marker["kind"]]
            found.append(Block(fence["info"], fence["code"], line, kind, marker["name"], path))
    return found


def _all(text: str | None, where: list[Path] | None) -> list[Block]:
    if text is not None:
        return blocks(text)
    return [b for page in where or pages() for b in blocks(page.read_text("utf-8"), page)]


def marked(kind: Kind, text: str | None = None, where: list[Path] | None = None) -> list[Block]:
    """The blocks marked as `kind` on every page (or on `where`'s pages, or in `text`)."""
    return [block for block in _all(text, where) if block.kind == kind]


def unmarked(info: str, text: str | None = None, where: list[Path] | None = None) -> list[Block]:
    """The blocks fenced as `info` and not marked, on every page (or `where`, or `text`)."""
    return [block for block in _all(text, where) if block.kind is None and block.info == info]


def commands(name: str) -> list[str]:
    """The lines of the one command block marked `name`, wherever it is."""
    (found,) = (b for b in marked("commands") if b.name == name)
    return found.code.splitlines()
