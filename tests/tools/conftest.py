"""The Go tools pinned in tools/go.mod, run against real `serve` processes.

`make contract-tools` builds them into build/bin; a missing one fails the test unless
CONTRACT_SKIP_TOOLCHAINS names `go`.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from agentskit_chat.transport import token_digest
from tests.cli.conftest import launch as launch
from tests.contract.tooling import ROOT, require_toolchain, run

BIN = ROOT / "build" / "bin"
GRPCURL = BIN / "grpcurl"
HEALTH_PROBE = BIN / "grpc-health-probe"
TOKEN = "tools-token-abcdefghijklmnopqrstuv"


@pytest.fixture
def grpcurl() -> Path:
    require_toolchain("go", GRPCURL)
    return GRPCURL


@pytest.fixture
def health_probe() -> Path:
    require_toolchain("go", HEALTH_PROBE)
    return HEALTH_PROBE


@pytest.fixture
def tokens(tmp_path: Path) -> Path:
    """A tokens file for `serve --auth-tokens` that accepts TOKEN."""
    path = tmp_path / "tokens.yaml"
    path.write_text(f"tokens:\n  - {{sha256: {token_digest(TOKEN)}, tenant: tools}}\n")
    return path


def tool(path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """Run a tool to its end, whatever its exit status."""
    return run([path, *args], check=False)
