"""The first-definition tutorial works as written: its files are what `validate` accepts and
`test` passes, `graph` draws the diagram the page shows, and the misspelt state is reported
as the page says."""

from __future__ import annotations

import contextlib
import io
import logging
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from agentskit_chat.cli import main
from tests.docs.pages import DOCS, marked

TUTORIAL = DOCS / "tutorials" / "first-definition.md"
TIMEOUT = 120
GREETER = ("--definition", "greeter")


@dataclass
class Ran:
    returncode: int
    stdout: str
    stderr: str


def cli(*args: str, cwd: Path) -> Ran:
    """`agentskit-chat ARGS` in `cwd`, in this process (the commands that need no server)."""
    previous = Path.cwd()
    out, err = io.StringIO(), io.StringIO()
    # The CLI quiets httpx's per-call lines and may configure the root logger: keep both
    # as they were, so later tests in this process see the logging they set up.
    httpx_level = logging.getLogger("httpx").level
    root = logging.getLogger()
    root_level, root_handlers = root.level, list(root.handlers)
    os.chdir(cwd)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            status = main(list(args))
    finally:
        os.chdir(previous)
        logging.getLogger("httpx").setLevel(httpx_level)
        root.setLevel(root_level)
        root.handlers[:] = root_handlers
    return Ran(status, out.getvalue(), err.getvalue())


@pytest.fixture
def workdir(tmp_path: Path) -> Path:
    """The files the tutorial has the reader save, saved."""
    files = marked("file", where=[TUTORIAL])
    assert [b.name for b in files] == ["chats/greeter.yaml", "chats/greeter.test.yaml"]
    for block in files:
        target = tmp_path / str(block.name)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(block.code, encoding="utf-8")
    return tmp_path


def test_the_definition_validates_and_its_tests_pass(workdir: Path) -> None:
    validated = cli("validate", "chats", cwd=workdir)
    assert validated.returncode == 0, validated.stdout + validated.stderr
    tested = cli("test", "chats", cwd=workdir)
    assert tested.returncode == 0, tested.stdout + tested.stderr
    page = TUTORIAL.read_text(encoding="utf-8")
    assert tested.stdout.strip() in page, tested.stdout


def test_the_page_shows_the_diagram_graph_draws(workdir: Path) -> None:
    drawn = cli("graph", "chats", "--definition", "greeter", cwd=workdir)
    assert drawn.returncode == 0, drawn.stderr
    marker = "<!-- agentskit-chat graph chats --definition greeter -->"
    page = TUTORIAL.read_text(encoding="utf-8")
    assert f"{marker}\n```mermaid\n{drawn.stdout}```\n" in page


def test_the_misspelt_state_is_reported_as_the_page_says(workdir: Path) -> None:
    definition = workdir / "chats" / "greeter.yaml"
    text = definition.read_text(encoding="utf-8")
    definition.write_text(text.replace("states: [talking]", "states: [talkin]"), "utf-8")
    refused = cli("validate", "chats", cwd=workdir)
    assert refused.returncode == 1
    page = TUTORIAL.read_text(encoding="utf-8")
    (shown,) = re.findall(r"```text\n(1 definition error:\n.*?)```", page, re.S)
    assert shown.strip() in refused.stdout + refused.stderr


def test_the_pages_buttons_and_badges_are_what_chat_prints(workdir: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "agentskit_chat.cli", "chat", "--definitions", "chats", *GREETER],
        cwd=workdir,
        input="hello\n/name Ada\n",
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    page = TUTORIAL.read_text(encoding="utf-8")
    (shown,) = re.findall(r"```text\n(state waiting.*?)```", page, re.S)
    assert shown in done.stdout, done.stdout
