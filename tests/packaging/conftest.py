"""`make dist`, once per run, into a stand-in for the reader's clone.

The stand-in holds the built `dist/` and links to the checkout's `examples` and `client`
(the page's commands read the example definitions and the Go module there), so nothing the
tests build lands in the checkout's own `dist/`. When the run has several workers, the
first one to need the stand-in builds it and the others reuse it (tests/parallel.py).
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests import parallel
from tests.cli.fixtures.serving import EXAMPLES, Server, base_env, command
from tests.docs.pages import ROOT

DIST_TIMEOUT = 900


@pytest.fixture(scope="session")
def checkout(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = parallel.run_directory(tmp_path_factory) / "clone"
    built = root.parent / "clone.built"
    with parallel.run_lock(tmp_path_factory, "clone"):
        if not built.exists():
            _make_dist(root)
            built.touch()
    return root


def _make_dist(root: Path) -> None:
    """`make dist` into root/dist, and root's links to the checkout."""
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir()
    # npm pack's prepack compiles the TypeScript client into client/typescript/dist again.
    with parallel.typescript_client():
        made = subprocess.run(
            ["make", "--no-print-directory", "dist", f"DIST_DIR={root / 'dist'}"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=DIST_TIMEOUT,
            check=False,
        )
    assert made.returncode == 0, f"make dist failed:\n{made.stdout}\n{made.stderr}"
    for name in ("examples", "client"):
        (root / name).symlink_to(ROOT / name)


@pytest.fixture
def example_server(tmp_path: Path) -> Iterator[Server]:
    """`serve` on the example definitions from the checkout, on a free port, memory store."""
    stderr_path = tmp_path / "serve.stderr"
    stderr = stderr_path.open("wb")
    process = subprocess.Popen(
        command(
            "serve",
            "--definitions",
            str(EXAMPLES),
            "--store",
            "memory://",
            "--listen",
            "127.0.0.1:0",
            log_level="INFO",
        ),
        cwd=tmp_path,
        env=base_env(),
        stdout=subprocess.PIPE,
        stderr=stderr,
    )
    server = Server(process, stderr, stderr_path)
    try:
        server.wait_listening()
        yield server
    finally:
        server.close()
