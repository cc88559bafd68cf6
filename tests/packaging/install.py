"""docs/install.md's blocks, run as written in new directories outside the checkout.

A block marked `<!-- commands: NAME -->` runs whole with `sh -eu` in the directory a test
gives it; a block marked `<!-- snippet: LANGUAGE -->` is saved under the file name the page
tells the reader to use. The environment is the test process's without the project's
virtual environment on PATH, without PYTHONPATH and without AGENTSKIT_CHAT_* settings, plus
`CHECKOUT` (the page's first block exports it in the clone) and what a test adds, such as
AGENTSKIT_CHAT_TARGET.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from tests.docs.pages import ROOT, Kind, marked

PAGE = ROOT / "docs" / "install.md"
STEP_TIMEOUT = 600.0
PROGRAM_FILES = {"python": "chat.py", "typescript": "chat.ts", "go": "main.go"}


def block(kind: Kind, name: str) -> str:
    """The code of the page's block marked `kind: name` (exactly one)."""
    (found,) = (b for b in marked(kind, PAGE.read_text(encoding="utf-8")) if b.name == name)
    return found.code


def clean_env(checkout: Path, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment a reader's shell would have: nothing of the project's own."""
    project_bin = str(Path(sys.executable).parent)
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("AGENTSKIT_CHAT_", "PYTHON", "PIP_REQUIRE", "npm_config_"))
        and key not in ("VIRTUAL_ENV", "GOFLAGS")
    }
    env["PATH"] = os.pathsep.join(
        part for part in env.get("PATH", "").split(os.pathsep) if part and part != project_bin
    )
    env["CHECKOUT"] = str(checkout)
    env.update(extra or {})
    return env


def run(
    name: str, directory: Path, env: Mapping[str, str], timeout: float = STEP_TIMEOUT
) -> subprocess.CompletedProcess[str]:
    """Run the page's `commands: NAME` block in `directory`; it must succeed."""
    directory.mkdir(parents=True, exist_ok=True)
    result = subprocess.run(
        ["sh", "-eu", "-c", block("commands", name)],
        cwd=directory,
        env=dict(env),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert result.returncode == 0, f"{name} failed:\n{result.stdout}\n{result.stderr}"
    return result


def save_program(language: str, directory: Path) -> Path:
    """The page's `snippet: LANGUAGE` program, saved as the page says."""
    path = directory / PROGRAM_FILES[language]
    path.write_text(block("snippet", language), encoding="utf-8")
    return path


def assert_printed_a_turn(output: str) -> None:
    """What each program prints against the example `support` chat on the offline adapter."""
    lines = output.splitlines()
    assert len(lines) == 3, output
    assert re.fullmatch(r"session s-[0-9a-f]+ in state idle", lines[0]), output
    assert lines[1] == (
        "No language model is configured for this chat, so I can only answer its known commands."
    )
    assert lines[2] == "completed in state idle"
