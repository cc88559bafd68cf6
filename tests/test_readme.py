"""The README's in-process examples run as written (its client snippets run against a live
server in tests/test_readme_snippets.py)."""

from __future__ import annotations

from typing import Any

from tests.readme import README, marked, unmarked


def test_readme_python_examples_run() -> None:
    found = unmarked("python")
    assert len(found) >= 2, "README lost its python examples"
    for block in found:
        namespace: dict[str, Any] = {}
        exec(compile(block.code, f"{README}:{block.line}", "exec"), namespace)


def test_readme_client_snippets_are_marked_to_run() -> None:
    """A client example written as a bare python fence would only be compiled here."""
    for block in unmarked("python"):
        assert "ChatClient(" not in block.code, f"README line {block.line}: mark it as a snippet"
    assert marked("snippet"), "README lost its client snippets"


def test_readme_names_the_entry_points() -> None:
    text = README.read_text(encoding="utf-8")
    for command in ("make serve", "make test", "make demo", "make bench"):
        assert command in text
