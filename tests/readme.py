"""The README's marked blocks: programs a test runs, and command lists a test replays.

A fence right after `<!-- snippet: LANGUAGE -->` is a whole program in that language
(tests/test_readme_snippets.py runs it against a live server); a fence right after
`<!-- commands: TOOL -->` holds one command per line (tests/tools replays them).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"

Kind = Literal["snippet", "commands"]

_FENCE = re.compile(r"^```(?P<info>[\w+-]*)\n(?P<code>.*?)^```$", re.M | re.S)
_MARKER = re.compile(r"<!-- (?P<kind>snippet|commands): (?P<name>[\w+-]+) -->\n\Z")


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
    """The marker's language or tool; None for an unmarked block."""


def blocks(text: str) -> list[Block]:
    """Every fenced block of `text`, in order, with the marker on the line before it."""
    found = []
    for fence in _FENCE.finditer(text):
        before = text[: fence.start()]
        marker = _MARKER.search(before[before.rfind("\n", 0, len(before) - 1) + 1 :])
        line = before.count("\n") + 1
        if marker is None:
            found.append(Block(fence["info"], fence["code"], line))
        else:
            kind: Kind = "snippet" if marker["kind"] == "snippet" else "commands"
            found.append(Block(fence["info"], fence["code"], line, kind, marker["name"]))
    return found


def marked(kind: Kind, text: str | None = None) -> list[Block]:
    """The README's blocks (or `text`'s) marked as `kind`."""
    source = README.read_text(encoding="utf-8") if text is None else text
    return [block for block in blocks(source) if block.kind == kind]


def unmarked(info: str, text: str | None = None) -> list[Block]:
    """The README's blocks (or `text`'s) fenced as `info` and not marked."""
    source = README.read_text(encoding="utf-8") if text is None else text
    return [block for block in blocks(source) if block.kind is None and block.info == info]
