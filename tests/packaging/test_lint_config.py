"""`pip install ./client/python` leaves `client/python/build/` behind (setuptools builds in
the source tree); `make lint` must not lint those copies, with or without Git's ignore rules
(a checkout from an archive has no `.git`, so ruff cannot read `.gitignore` there)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RUFF = Path(sys.executable).with_name("ruff")
UNLINTED = "import os, sys\ndef f(x): return x\n"  # unsorted imports, no annotations


def _tree(tmp_path: Path, bad: str) -> Path:
    """The project's lint configuration outside Git, a clean module and `UNLINTED` at `bad`."""
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    (tmp_path / "client/python/agentskit_chat_client").mkdir(parents=True)
    (tmp_path / "client/python/agentskit_chat_client/ok.py").write_text('"""Clean."""\n')
    (tmp_path / bad).parent.mkdir(parents=True, exist_ok=True)
    (tmp_path / bad).write_text(UNLINTED)
    return tmp_path


def _ruff(tree: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(RUFF), "check", "--no-cache", "client/python"],
        cwd=tree,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_a_build_directory_left_by_pip_is_not_linted(tmp_path: Path) -> None:
    tree = _tree(tmp_path, "client/python/build/lib/agentskit_chat_client/_hints.py")
    assert not (tree / ".git").exists()
    result = _ruff(tree)
    assert result.returncode == 0, result.stdout


def test_the_same_file_outside_a_build_directory_is_linted(tmp_path: Path) -> None:
    tree = _tree(tmp_path, "client/python/agentskit_chat_client/_hints.py")
    result = _ruff(tree)
    assert result.returncode == 1
    assert "_hints.py" in result.stdout
