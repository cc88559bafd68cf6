"""ServerTools over stdio: starting, specs, calls and every kind of error outcome."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from collections.abc import Awaitable, Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, TextIO

import pytest

from agentskit_chat.conversation import ChatDefinition
from agentskit_chat.mcp import (
    CALL_ID_META,
    INVALID_ARGUMENTS,
    RESULT_TOO_LARGE,
    SERVER_GONE,
    TIMEOUT,
    TOOL_ERROR,
    TURN_ID_META,
    UNKNOWN_TOOL,
    ServerTools,
    ServerToolsError,
    ToolOutcome,
)

from .conftest import BOUND, definition, records, stdio_server


def run(
    chat: ChatDefinition, body: Callable[[ServerTools], Awaitable[None]], **options: Any
) -> None:
    async def scenario() -> None:
        tools = ServerTools([chat], **options)
        async with asyncio.timeout(BOUND):
            await tools.start()
            try:
                await body(tools)
            finally:
                await tools.close()

    asyncio.run(scenario())


async def call(tools: ServerTools, name: str, arguments: dict[str, Any], n: int = 1) -> ToolOutcome:
    return await tools.call(name, json.dumps(arguments), turn_id="turn-1", call_id=f"call-{n}")


def test_start_offers_the_declared_tools_as_specs(record: Path, server_stderr: TextIO) -> None:
    chat = definition(stdio_server(record), {"lookup_order": {}, "count": {}})

    async def body(tools: ServerTools) -> None:
        specs = {spec.name: spec for spec in tools.specs()}
        assert sorted(specs) == ["count", "lookup_order"]
        assert specs["lookup_order"].description == "Look up an order by its id."
        assert specs["lookup_order"].parameters["properties"]["order_id"]["type"] == "string"
        assert specs["lookup_order"].parameters["required"] == ["order_id"]
        assert tools.specs(chat) == tuple(specs[name] for name in sorted(specs))

    run(chat, body, server_stderr=server_stderr)


def test_a_declared_tool_the_server_lacks_is_refused_naming_both(
    record: Path, server_stderr: TextIO
) -> None:
    chat = definition(stdio_server(record), {"lookup_order": {}, "cancel_order": {}})

    async def scenario() -> None:
        tools = ServerTools([chat], server_stderr=server_stderr)
        with pytest.raises(ServerToolsError) as error:
            await tools.start()
        message = str(error.value)
        assert "'orders'" in message
        assert "'cancel_order'" in message
        assert "lookup_order" in message  # what it offers

    asyncio.run(scenario())


def test_a_server_that_cannot_start_is_refused_naming_it(tmp_path: Path) -> None:
    server = {"command": str(tmp_path / "no-such-orders-server")}
    chat = definition(server, {"lookup_order": {}})

    async def scenario() -> None:
        with pytest.raises(ServerToolsError, match="MCP server 'orders' cannot be reached"):
            await ServerTools([chat]).start()

    asyncio.run(scenario())


def test_a_call_returns_the_tools_result(record: Path, server_stderr: TextIO) -> None:
    async def body(tools: ServerTools) -> None:
        outcome = await call(tools, "lookup_order", {"order_id": "A-17"})
        assert outcome == ToolOutcome("order A-17: 2 items, shipped")

    run(definition(stdio_server(record)), body, server_stderr=server_stderr)


def test_a_failing_tool_is_a_tool_error_outcome(record: Path, server_stderr: TextIO) -> None:
    async def body(tools: ServerTools) -> None:
        outcome = await call(tools, "fail", {"reason": "no stock"})
        assert (outcome.is_error, outcome.error_type) == (True, TOOL_ERROR)
        assert outcome.text
        wrong = await call(tools, "lookup_order", {"order": 3})  # the server refuses them
        assert (wrong.is_error, wrong.error_type) == (True, TOOL_ERROR)

    run(definition(stdio_server(record)), body, server_stderr=server_stderr)


def test_arguments_that_are_not_an_object_never_reach_the_server(
    record: Path, server_stderr: TextIO
) -> None:
    async def body(tools: ServerTools) -> None:
        for text in ("not json", "[1, 2]", '"count"'):
            outcome = await tools.call("count", text, turn_id="t", call_id="c")
            assert (outcome.is_error, outcome.error_type) == (True, INVALID_ARGUMENTS)
        assert records(record) == []

    run(definition(stdio_server(record)), body, server_stderr=server_stderr)


def test_an_undeclared_tool_is_an_unknown_tool_outcome(record: Path, server_stderr: TextIO) -> None:
    async def body(tools: ServerTools) -> None:
        outcome = await call(tools, "release", {"gate": "g"})
        assert (outcome.is_error, outcome.error_type) == (True, UNKNOWN_TOOL)

    chat = definition(stdio_server(record), {"lookup_order": {}})
    run(chat, body, server_stderr=server_stderr)


def test_a_call_past_its_timeout_is_a_timeout_outcome(record: Path, server_stderr: TextIO) -> None:
    chat = definition(
        stdio_server(record),
        {"slow": {"timeout": 0.2}, "release": {}, "lookup_order": {}},
    )

    async def body(tools: ServerTools) -> None:
        outcome = await call(tools, "slow", {"gate": "never-yet"})  # blocks until released
        assert (outcome.is_error, outcome.error_type) == (True, TIMEOUT)
        assert "0.2 s" in outcome.text
        assert (await call(tools, "release", {"gate": "never-yet"})).is_error is False
        assert (await call(tools, "lookup_order", {"order_id": "B"})).is_error is False

    run(chat, body, server_stderr=server_stderr)


def test_calls_run_side_by_side_on_one_server(record: Path, server_stderr: TextIO) -> None:
    async def body(tools: ServerTools) -> None:
        waiting = asyncio.create_task(call(tools, "slow", {"gate": "g"}, 1))
        released = await call(tools, "release", {"gate": "g"}, 2)
        assert released == ToolOutcome("released g")
        assert await waiting == ToolOutcome("released g")

    run(definition(stdio_server(record)), body, server_stderr=server_stderr)


def test_a_result_past_the_limit_is_refused(record: Path, server_stderr: TextIO) -> None:
    async def body(tools: ServerTools) -> None:
        outcome = await call(tools, "big", {"size": 1001})
        assert (outcome.is_error, outcome.error_type) == (True, RESULT_TOO_LARGE)
        assert "x" * 10 not in outcome.text
        assert await call(tools, "big", {"size": 1000}) == ToolOutcome("x" * 1000)

    chat = definition(stdio_server(record))
    run(chat, body, server_stderr=server_stderr, max_result_bytes=1000)


def test_meta_carries_the_turn_and_call_ids(record: Path, server_stderr: TextIO) -> None:
    async def body(tools: ServerTools) -> None:
        outcome = await tools.call("count", '{"key": "k"}', turn_id="turn-9", call_id="call_3")
        assert outcome == ToolOutcome("counted k")

    run(definition(stdio_server(record)), body, server_stderr=server_stderr)
    [line] = records(record)
    assert line["meta"][TURN_ID_META] == "turn-9"
    assert line["meta"][CALL_ID_META] == "call_3"


def test_a_server_dying_mid_call_is_server_gone_then_a_fresh_one_serves(
    record: Path, server_stderr: TextIO
) -> None:
    async def body(tools: ServerTools) -> None:
        assert (await call(tools, "count", {"key": "before"})).is_error is False
        outcome = await call(tools, "die", {})
        assert (outcome.is_error, outcome.error_type) == (True, SERVER_GONE)
        assert await call(tools, "count", {"key": "after"}) == ToolOutcome("counted after")

    run(definition(stdio_server(record)), body, server_stderr=server_stderr)
    before, after = records(record)
    assert (before["key"], after["key"]) == ("before", "after")
    assert before["pid"] != after["pid"]


def test_a_server_that_cannot_come_back_is_server_gone_until_it_can(
    record: Path, server_stderr: TextIO, tmp_path: Path
) -> None:
    refuse = tmp_path / "refuse"
    server = stdio_server(record)
    server["env"]["ORDERS_REFUSE"] = str(refuse)

    async def body(tools: ServerTools) -> None:
        await call(tools, "die", {})
        refuse.touch()
        for n in range(2):
            outcome = await call(tools, "count", {"key": "lost"}, n)
            assert (outcome.is_error, outcome.error_type) == (True, SERVER_GONE)
        refuse.unlink()
        assert await call(tools, "count", {"key": "back"}) == ToolOutcome("counted back")

    run(definition(server), body, server_stderr=server_stderr, reconnect_backoff=0.01)
    assert [line["key"] for line in records(record)] == ["back"]


def test_two_definitions_declaring_one_server_differently_are_refused(record: Path) -> None:
    first = definition(stdio_server(record), {"lookup_order": {}})
    other = {**stdio_server(record), "args": ["-m", "tests.mcp.servers.orders", "stdio", "x"]}
    second = definition(other, {"lookup_order": {}})
    with pytest.raises(ServerToolsError, match="'orders' is declared differently"):
        ServerTools([first, second])


def test_a_server_that_ended_while_idle_is_reconnected_before_the_next_call(
    record: Path, server_stderr: TextIO
) -> None:
    async def body(tools: ServerTools) -> None:
        assert (await call(tools, "count", {"key": "first"})).is_error is False
        [first] = records(record)
        connection = tools._servers["orders"].connection
        os.kill(first["pid"], signal.SIGKILL)
        await connection.ended.wait()  # the client has seen the server's output end
        assert await call(tools, "count", {"key": "second"}) == ToolOutcome("counted second")

    run(definition(stdio_server(record)), body, server_stderr=server_stderr)
    first, second = records(record)
    assert first["pid"] != second["pid"]


def test_an_attached_definition_runs_on_its_own_servers_beside_the_started_ones(
    record: Path, tmp_path: Path, server_stderr: TextIO
) -> None:
    """A definition the tools were not started with (a published revision) connects its
    own declaration of a server of the same name; each definition's calls reach its own
    server, and one that cannot start ends its calls as `server_gone`."""
    started = definition(stdio_server(record), {"count": {}})
    other_record = tmp_path / "other.jsonl"
    published = replace(definition(stdio_server(other_record), {"count": {}}), revision=2)
    missing = {"command": str(tmp_path / "no-such-server"), "args": []}
    unreachable = replace(definition(missing, {"count": {}}), revision=3)

    async def body(tools: ServerTools) -> None:
        assert not tools.covers(published)
        assert tools.specs(published) == ()
        await tools.attach(published)
        await tools.attach(published)  # once per revision and declaration
        assert [s.name for s in tools.specs(published)] == ["count"]
        mine = await tools.call(
            "count", '{"key": "a"}', turn_id="t", call_id="c1", definition=started
        )
        theirs = await tools.call(
            "count", '{"key": "b"}', turn_id="t", call_id="c2", definition=published
        )
        assert not mine.is_error
        assert not theirs.is_error
        assert [r["key"] for r in records(record)] == ["a"]
        assert [r["key"] for r in records(other_record)] == ["b"]
        await tools.attach(unreachable)
        gone = await tools.call(
            "count", '{"key": "c"}', turn_id="t", call_id="c3", definition=unreachable
        )
        assert gone.error_type == SERVER_GONE

    run(started, body, server_stderr=server_stderr, reconnect_backoff=0.0)
