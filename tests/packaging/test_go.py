"""docs/install.md for Go: a new module outside the checkout requires the client through the
documented `replace`, fetches its dependencies with `go mod tidy` and runs the page's
program against a live server."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.cli.fixtures.serving import Server

from .install import assert_printed_a_turn, clean_env, run, save_program

pytestmark = pytest.mark.skipif(
    "go" in os.environ.get("CONTRACT_SKIP_TOOLCHAINS", ""),
    reason="CONTRACT_SKIP_TOOLCHAINS names go",
)


def test_the_module_runs_the_program_through_the_replace(
    tmp_path: Path, checkout: Path, example_server: Server
) -> None:
    reader = tmp_path / "chat-go"
    env = clean_env(checkout, {"AGENTSKIT_CHAT_TARGET": example_server.target})
    run("go-install", reader, env)
    go_mod = (reader / "go.mod").read_text()
    assert f"agentskit.dev/chat/client/go => {checkout}/client/go" in go_mod
    save_program("go", reader)
    printed = run("go-run", reader, env)
    assert_printed_a_turn(printed.stdout)
