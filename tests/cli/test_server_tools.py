"""`serve` starts the served definitions' server tools, and refuses to run without them."""

from __future__ import annotations

import asyncio
import json
import signal
import sys
from pathlib import Path

from agentskit_chat.cli._server_tools import ServedTools
from agentskit_chat.conversation import load_definitions
from agentskit_chat.mcp import NO_TOOL_OBSERVER
from tests.cli.conftest import Launcher
from tests.cli.fixtures.serving import REPO, run_cli


def shop(directory: Path, tools: list[str]) -> Path:
    """A definitions directory with one chat whose server tools are `tools` (each start of
    its server is a line of `starts` beside it)."""
    directory.mkdir(exist_ok=True)
    server = {
        "command": sys.executable,
        "args": ["-m", "tests.mcp.servers.orders", "stdio"],
        "env": {
            "PYTHONPATH": str(REPO),
            "ORDERS_RECORD": str(directory.parent / "record.jsonl"),
            "ORDERS_STARTS": str(directory.parent / "starts"),
        },
    }
    chat = {
        "id": "shop",
        "revision": 1,
        "conversation": {"initial": "idle", "states": {"idle": {}}},
        "mcp_servers": {"orders": server},
        "tools": {name: {"server": "orders"} for name in tools},
    }
    (directory / "shop.json").write_text(json.dumps(chat), encoding="utf-8")
    return directory


def test_serve_exits_2_naming_the_server_that_lacks_a_declared_tool(
    launch: Launcher, tmp_path: Path
) -> None:
    definitions = shop(tmp_path / "defs", ["lookup_order", "cancel_order"])
    server = launch(tmp_path / "state", "--definitions", str(definitions), wait=False)
    assert server.wait() == 2
    assert "agentskit-chat: MCP server 'orders' has no tool 'cancel_order'" in server.stderr


def test_serve_runs_with_its_server_tools_started(launch: Launcher, tmp_path: Path) -> None:
    definitions = shop(tmp_path / "defs", ["lookup_order"])
    server = launch(tmp_path / "state", "--definitions", str(definitions))
    server.send(signal.SIGTERM)
    assert server.wait() == 0


def test_validate_reports_a_literal_token_and_an_unknown_server(tmp_path: Path) -> None:
    path = tmp_path / "shop.yaml"
    path.write_text(
        "id: shop\nrevision: 1\n"
        "conversation: {initial: idle, states: {idle: {}}}\n"
        "mcp_servers: {billing: {url: 'https://billing.example/mcp', token: s3cret-4a}}\n"
        "tools: {refund: {server: billing}, lookup_order: {server: orders}}\n",
        encoding="utf-8",
    )
    result = run_cli("validate", str(path))
    assert result.returncode == 1
    assert "mcp_servers.billing.token: credentials are never written" in result.stderr
    assert "[literal_secret]" in result.stderr
    assert "tools.lookup_order.server: no MCP server named 'orders'" in result.stderr
    assert "s3cret-4a" not in result.stderr + result.stdout


def starts(tmp_path: Path) -> int:
    path = tmp_path / "starts"
    return len(path.read_text(encoding="utf-8").splitlines()) if path.exists() else 0


def test_a_reload_connects_changed_servers_first_and_is_refused_when_they_fail(
    launch: Launcher, tmp_path: Path
) -> None:
    definitions = shop(tmp_path / "defs", ["lookup_order"])
    server = launch(tmp_path / "state", "--definitions", str(definitions))
    assert starts(tmp_path) == 1
    shop(definitions, ["lookup_order", "cancel_order"])
    server.send(signal.SIGHUP)
    server.wait_output("reload refused")
    assert "MCP server 'orders' has no tool 'cancel_order'" in server.stdout + server.stderr
    assert starts(tmp_path) == 2
    shop(definitions, ["lookup_order", "count"])
    server.send(signal.SIGHUP)
    server.wait_output("definitions reloaded")
    assert starts(tmp_path) == 3
    server.send(signal.SIGTERM)
    assert server.wait() == 0


def test_unchanged_declarations_keep_their_connections(tmp_path: Path) -> None:
    definitions = shop(tmp_path / "defs", ["lookup_order"])

    async def scenario() -> None:
        served = ServedTools(NO_TOOL_OBSERVER)
        assert await served.start(load_definitions(definitions).values())
        try:
            assert await served.prepare(load_definitions(definitions).values()) is None
        finally:
            await served.close()

    asyncio.run(asyncio.wait_for(scenario(), 60))
    assert starts(tmp_path) == 1


def test_tools_come_with_the_first_definition_that_declares_a_server(tmp_path: Path) -> None:
    """Until a definition declares a server there are no server tools (and the MCP SDK is
    not loaded); a reload that declares one starts them, one that drops it closes them,
    and a published revision that declares one is attached even when none was started."""
    plain = tmp_path / "plain"
    plain.mkdir()
    chat = {
        "id": "plain",
        "revision": 1,
        "conversation": {"initial": "idle", "states": {"idle": {}}},
    }
    (plain / "plain.json").write_text(json.dumps(chat), encoding="utf-8")
    definitions = shop(tmp_path / "defs", ["lookup_order"])

    async def scenario() -> None:
        served = ServedTools(NO_TOOL_OBSERVER)
        assert await served.start(load_definitions(plain).values())
        assert served.current is None
        assert await served.prepare(load_definitions(plain).values()) is None
        fresh = await served.prepare(load_definitions(definitions).values())
        assert fresh is not None
        assert starts(tmp_path) == 1
        await served.adopt(fresh)
        shop_chat = load_definitions(definitions)["shop"]
        assert [spec.name for spec in served.specs(shop_chat)] == ["lookup_order"]
        emptied = await served.prepare(load_definitions(plain).values())
        assert emptied is not None
        assert emptied.names == frozenset()
        await served.adopt(emptied)
        assert served.specs(shop_chat) == ()
        attaching = ServedTools(NO_TOOL_OBSERVER)
        assert await attaching.start(load_definitions(plain).values())
        try:
            await attaching.attach(shop_chat)
            assert [spec.name for spec in attaching.specs(shop_chat)] == ["lookup_order"]
            assert starts(tmp_path) == 2
        finally:
            await attaching.close()
            await served.close()

    asyncio.run(asyncio.wait_for(scenario(), 60))
