"""`make test` refuses a contract that breaks compatibility with the committed baseline.

Each case copies the repository's buf.yaml and proto/ tree (baseline included), makes one
incompatible edit and runs the gate's own command, taken from the Makefile, on the copy.
"""

from __future__ import annotations

import json
import re
import shlex
import shutil
from pathlib import Path

import pytest

from tests.contract.tooling import BASELINE, NODE_BIN, PROTO, ROOT, require_toolchain, run

CHAT = "agentskit/chat/v1/chat.proto"
EDITS = {
    "renamed field": (
        r"(message GetSessionRequest \{[^}]*?string )session_id( = 1;)",
        r"\1session_key\2",
        "FIELD_SAME_NAME",
    ),
    "renumbered field": (
        r"(message GetDefinitionRequest \{[^}]*?string definition_id = )1;",
        r"\g<1>7;",
        "FIELD_NO_DELETE",
    ),
    "removed method": (
        r"\n  // TruncateHistory [^\n]*\n(  //[^\n]*\n)*  rpc TruncateHistory\([^\n]*\n",
        "\n",
        "RPC_NO_DELETE",
    ),
    "changed Go package": (
        r'(option go_package = "agentskit\.dev/chat/client/go/agentskit/chat/)v1;chatv1"',
        r'\1v1beta;chatv1"',
        "FILE_SAME_GO_PACKAGE",
    ),
}


@pytest.fixture(scope="module")
def gate() -> list[str]:
    """The command `make test` runs as its breaking-change gate."""
    require_toolchain("node", "make", NODE_BIN / "buf")
    dry_run = run(["make", "--no-print-directory", "-n", "test"]).stdout.splitlines()
    (line,) = (line for line in dry_run if " breaking " in line)
    command = shlex.split(line)
    assert command[-2:] == ["--against", BASELINE.relative_to(ROOT).as_posix()]
    return command


def copy_of_the_contract(tmp_path: Path) -> Path:
    shutil.copy2(ROOT / "buf.yaml", tmp_path / "buf.yaml")
    shutil.copytree(PROTO, tmp_path / "proto")
    (tmp_path / "node_modules").symlink_to(ROOT / "node_modules")
    return tmp_path


def breaks(gate: list[str], tree: Path) -> list[str]:
    """The rules the gate reports as broken in `tree`; none when it passes."""
    done = run([*gate, "--error-format=json"], cwd=tree, check=False)
    found = [json.loads(line)["type"] for line in done.stdout.splitlines() if line.strip()]
    assert (done.returncode == 0) == (not found), done.stderr
    return found


def test_the_current_contract_passes_the_gate(gate: list[str]) -> None:
    assert breaks(gate, ROOT) == []


@pytest.mark.parametrize("edit", list(EDITS))
def test_an_incompatible_change_fails_the_gate(gate: list[str], tmp_path: Path, edit: str) -> None:
    pattern, replacement, rule = EDITS[edit]
    tree = copy_of_the_contract(tmp_path)
    chat = tree / "proto" / CHAT
    text, count = re.subn(pattern, replacement, chat.read_text(encoding="utf-8"))
    assert count == 1, f"the {edit} edit no longer applies to {CHAT}"
    chat.write_text(text, encoding="utf-8")
    assert rule in breaks(gate, tree)
