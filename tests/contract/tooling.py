"""The contract as files: protoc from grpcio-tools, the pinned generators, the toolchains.

Only `proto/` is on the include path (protoc adds its own well-known types), so whatever
these tests generate is generated from the repository alone.

A test whose toolchain (Go, or Node.js for buf, protoc-gen-es and tsc) is missing fails,
unless CONTRACT_SKIP_TOOLCHAINS names it ("go", "node", or both, comma separated).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest
from google.protobuf import any_pb2, descriptor_pb2, duration_pb2
from google.rpc import error_details_pb2, status_pb2

ROOT = Path(__file__).resolve().parents[2]
PROTO = ROOT / "proto"
BASELINE = PROTO / "baseline.binpb"
VENDORED = ("google/rpc/status.proto", "google/rpc/error_details.proto")
NODE_BIN = ROOT / "node_modules" / ".bin"
PROTOC_GEN_GO = ROOT / "build" / "bin" / "protoc-gen-go"
SKIP_ENV = "CONTRACT_SKIP_TOOLCHAINS"
TIMEOUT = 600.0
"""Seconds any one tool may take; generous, since the machine may be busy."""


def contract_files() -> list[str]:
    """The contract's own proto files, relative to proto/ (the vendored ones excluded)."""
    found = sorted(p.relative_to(PROTO).as_posix() for p in (PROTO / "agentskit").rglob("*.proto"))
    assert found, "no contract files under proto/agentskit"
    return found


def require_toolchain(name: str, *tools: Path | str) -> None:
    """Fail (or skip, when CONTRACT_SKIP_TOOLCHAINS names `name`) unless every tool exists."""
    missing = [str(t) for t in tools if not _exists(t)]
    if not missing:
        return
    skipped = {part.strip() for part in os.environ.get(SKIP_ENV, "").replace(",", " ").split()}
    message = f"{name} toolchain missing: {', '.join(missing)} (run `make contract-tools`)"
    if name in skipped:
        pytest.skip(f"{message}; skipped by {SKIP_ENV}")
    pytest.fail(f"{message}; set {SKIP_ENV}={name} to skip on purpose", pytrace=False)


def _exists(tool: Path | str) -> bool:
    if isinstance(tool, Path):
        return tool.is_file() and os.access(tool, os.X_OK)
    return shutil.which(tool) is not None


def run(
    argv: Sequence[str | Path],
    cwd: Path = ROOT,
    env: Mapping[str, str] | None = None,
    check: bool = True,
) -> subprocess.CompletedProcess[str]:
    """Run a tool; a failure shows its output."""
    done = subprocess.run(
        [str(a) for a in argv],
        cwd=cwd,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
    )
    if check and done.returncode != 0:
        pytest.fail(
            f"{' '.join(map(str, argv))} exited {done.returncode}\n{done.stdout}\n{done.stderr}",
            pytrace=False,
        )
    return done


def protoc(*args: str | Path, files: Sequence[str]) -> None:
    """protoc (grpcio-tools) with proto/ as the only include root."""
    run([sys.executable, "-m", "grpc_tools.protoc", f"-I{PROTO}", *args, *files])


def descriptor_set(tmp_path: Path, files: Sequence[str]) -> descriptor_pb2.FileDescriptorSet:
    """What protoc makes of `files`, without their imports."""
    out = tmp_path / "contract.binpb"
    protoc(f"--descriptor_set_out={out}", files=files)
    return descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes())


def sample_status() -> tuple[bytes, dict[str, object]]:
    """A google.rpc.Status as the server encodes one, and what a client must read from it."""
    info = error_details_pb2.ErrorInfo(
        reason="ERROR_REASON_SESSION_BUSY",
        domain="chat.agentskit.dev",
        metadata={"retry_after_ms": "250"},
    )
    retry = error_details_pb2.RetryInfo(retry_delay=duration_pb2.Duration(nanos=250_000_000))
    details = [any_pb2.Any(), any_pb2.Any()]
    details[0].Pack(info)
    details[1].Pack(retry)
    status = status_pb2.Status(code=10, message="session busy", details=details)
    expected: dict[str, object] = {
        "code": 10,
        "reason": "ERROR_REASON_SESSION_BUSY",
        "known_reason": True,
        "domain": "chat.agentskit.dev",
        "metadata": {"retry_after_ms": "250"},
        "retry_delay_ms": 250,
    }
    return status.SerializeToString(), expected


def service_methods(tmp_path: Path) -> list[str]:
    """ChatService's methods in declaration order, as protoc reads the contract."""
    files = descriptor_set(tmp_path, contract_files()).file
    (service,) = (s for f in files for s in f.service if s.name == "ChatService")
    return [method.name for method in service.method]
