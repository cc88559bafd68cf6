"""The documentation's in-process Python examples run as written, and the README stays a
short front door whose programs are the tutorials' own (the programs run against a live
server in tests/docs/test_snippets.py)."""

from __future__ import annotations

import re
from typing import Any

from tests.docs.pages import DOCS, README, marked, pages, unmarked

README_LINES = 250


def test_python_examples_run() -> None:
    found = unmarked("python")
    assert len(found) >= 2, "the documentation lost its python examples"
    for block in found:
        namespace: dict[str, Any] = {}
        exec(compile(block.code, block.where, "exec"), namespace)


def test_client_snippets_are_marked_to_run() -> None:
    """A client example written as a bare python fence would only be compiled here."""
    for block in unmarked("python"):
        assert "ChatClient(" not in block.code, f"{block.where}: mark it as a snippet"
    assert marked("snippet"), "the documentation lost its client snippets"


def test_the_readme_programs_are_the_tutorials_programs() -> None:
    """The README shows one program per language; each is the one its tutorial explains,
    so running the tutorials' programs runs the README's."""
    in_readme = {b.name: b.code for b in marked("snippet", where=[README])}
    assert set(in_readme) == {"python", "typescript", "go"}
    for language, code in in_readme.items():
        tutorial = DOCS / "tutorials" / f"{language}.md"
        (block,) = (b for b in marked("snippet", where=[tutorial]) if b.name == language)
        assert block.code == code, f"README's {language} program differs from {block.where}"


def test_the_readme_is_a_short_front_door() -> None:
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= README_LINES
    for command in ("make serve", "make test", "make demo", "make web", "make docs", " chat "):
        assert command in text, command
    assert "docs/web-renderer.png" in text
    assert "docs/orders-states.png" in text


def test_the_readme_links_resolve() -> None:
    text = README.read_text(encoding="utf-8")
    links = re.findall(r"\]\(([^)#]+)(?:#[^)]*)?\)", text)
    assert len(links) >= 30, links
    for link in links:
        if not link.startswith(("http://", "https://")):
            assert (README.parent / link).exists(), link


def test_the_entry_points_are_named() -> None:
    text = "\n".join(page.read_text(encoding="utf-8") for page in pages())
    for command in ("make serve", "make test", "make demo", "make bench", "make docs"):
        assert command in text


def test_command_blocks_have_unique_names() -> None:
    names = [b.name for b in marked("commands")]
    assert len(names) == len(set(names)), names
