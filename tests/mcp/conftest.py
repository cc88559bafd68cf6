"""Fixtures: the orders MCP server (tests/mcp/servers/orders.py) over stdio and over HTTP."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import pytest

from agentskit_chat.conversation import ChatDefinition, parse_definition

ROOT = Path(__file__).resolve().parents[2]
SERVER = [sys.executable, "-m", "tests.mcp.servers.orders"]
TOKEN = "orders-token-5f2c"
BOUND = 60.0
"""Seconds a wait may take before the test fails (a failure bound, never a pause)."""
TOOLS = ("lookup_order", "slow", "release", "fail", "count", "big", "die")


def stdio_server(record: Path) -> dict[str, Any]:
    """The `mcp_servers` entry of the orders server started over stdio."""
    return {
        "command": sys.executable,
        "args": ["-m", "tests.mcp.servers.orders", "stdio"],
        "env": {"ORDERS_RECORD": str(record), "PYTHONPATH": str(ROOT)},
    }


def definition(
    server: dict[str, Any], tools: dict[str, dict[str, Any]] | None = None
) -> ChatDefinition:
    """A chat whose server tools (all of TOOLS unless `tools`) come from `server`."""
    declared = {name: {"server": "orders"} for name in TOOLS} if tools is None else tools
    for settings in declared.values():
        settings.setdefault("server", "orders")
    return parse_definition(
        {
            "id": "shop",
            "revision": 1,
            "conversation": {"initial": "idle", "states": {"idle": {}}},
            "mcp_servers": {"orders": server},
            "tools": declared,
        }
    )


def records(path: Path) -> list[dict[str, Any]]:
    """The lines the `count` tool appended."""
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture
def record(tmp_path: Path) -> Path:
    return tmp_path / "record.jsonl"


@pytest.fixture
def server_stderr(tmp_path: Path) -> Iterator[TextIO]:
    """Where the stdio servers' stderr goes (a file: their tracebacks stay out of the run)."""
    with (tmp_path / "server-stderr.txt").open("w", encoding="utf-8") as file:
        yield file


@dataclass
class HttpServer:
    url: str
    process: subprocess.Popen[str]


def start_http_server(record: Path, env: dict[str, str] | None = None) -> HttpServer:
    """Start the orders server over HTTP and wait for its `port N` line."""
    environment = {
        **os.environ,
        "ORDERS_RECORD": str(record),
        "ORDERS_TOKEN": TOKEN,
        "PYTHONPATH": str(ROOT),
        **(env or {}),
    }
    process = subprocess.Popen(
        [*SERVER, "http"],
        cwd=ROOT,
        env=environment,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert process.stdout is not None
    line: list[str] = []
    reader = threading.Thread(target=lambda: line.append(process.stdout.readline()))  # type: ignore[union-attr]
    reader.start()
    reader.join(BOUND)
    if not line or not line[0].startswith("port "):
        process.kill()
        process.wait()
        process.stdout.close()
        pytest.fail(f"the HTTP orders server did not start: {line!r}")
    port = int(line[0].split()[1])
    return HttpServer(f"http://127.0.0.1:{port}/mcp", process)


@pytest.fixture
def http_server(record: Path) -> Iterator[HttpServer]:
    server = start_http_server(record)
    try:
        yield server
    finally:
        server.process.terminate()
        try:
            server.process.wait(BOUND)
        except subprocess.TimeoutExpired:
            server.process.kill()
            server.process.wait()
        if server.process.stdout is not None:
            server.process.stdout.close()
