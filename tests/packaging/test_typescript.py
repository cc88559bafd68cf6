"""docs/install.md for TypeScript: a new npm project (`type: module`) outside the checkout
installs the client's tarball from `make dist` with TypeScript and Node's types, compiles
the page's program with the page's flags and runs it against a live server."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.cli.fixtures.serving import Server

from .install import assert_printed_a_turn, clean_env, run, save_program

pytestmark = pytest.mark.skipif(
    "node" in os.environ.get("CONTRACT_SKIP_TOOLCHAINS", ""),
    reason="CONTRACT_SKIP_TOOLCHAINS names node",
)


def test_the_tarball_installs_into_a_new_module_project(
    tmp_path: Path, checkout: Path, example_server: Server
) -> None:
    reader = tmp_path / "chat-ts"
    env = clean_env(checkout, {"AGENTSKIT_CHAT_TARGET": example_server.target})
    run("typescript-install", reader, env)
    manifest = json.loads((reader / "package.json").read_text())
    assert manifest["type"] == "module"
    assert manifest["dependencies"]["@agentskit/chat-client"].startswith("file:")
    installed = reader / "node_modules" / "@agentskit" / "chat-client"
    assert not installed.is_symlink()  # copied from the tarball, not linked to the checkout
    assert (installed / "dist" / "src" / "index.d.ts").is_file()
    assert not (installed / "dist" / "test").exists()
    save_program("typescript", reader)
    printed = run("typescript-run", reader, env)
    assert_printed_a_turn(printed.stdout)
