"""Tool routes through the service, against a real MCP server over stdio: the answer from
the tool's result, one execution per message however often the turn is retried or
repeated, a failing tool committing nothing, the turn and call ids reaching the tool."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from agentskit_chat.conversation import ChatDefinition, parse_definition
from agentskit_chat.mcp import NO_TOOL_OBSERVER, ServerTools, ToolObserver
from agentskit_chat.service import (
    Catalog,
    ChatService,
    Completed,
    Failed,
    Retry,
    Submit,
    TurnEvent,
    TurnObserver,
    TurnRequest,
)
from agentskit_chat.storage import HistoryMode, MemoryStore
from agentskit_chat.telemetry import ToolTelemetry
from tests.mcp.conftest import BOUND, stdio_server
from tests.telemetry.conftest import InMemory

KEY = b"tool-routes-service-test-key-32b"


def shop(record: Path) -> ChatDefinition:
    """Orders answered by the orders server's tools, from routes alone."""
    routes = [
        {
            "id": "order",
            "pattern": r"/order (?P<order>[\w-]+)",
            "event": "look",
            "tool": {"name": "lookup_order", "arguments": {"order_id": "{order}"}},
            "response": "Order {order}: {result}",
        },
        {
            "id": "count",
            "pattern": r"/count (?P<key>\w+)",
            "event": "look",
            "tool": {"name": "count", "arguments": {"key": "{key}"}},
            "response": "{result} for {session_id}",
        },
        {
            "id": "broken",
            "command": "/broken",
            "event": "look",
            "tool": {"name": "fail", "arguments": {"reason": "{message_id}"}},
            "response": "never {result}",
        },
    ]
    return parse_definition(
        {
            "id": "shop",
            "revision": 1,
            "conversation": {
                "initial": "idle",
                "states": {"idle": {"on": {"look": "idle"}}},
                "routes": routes,
            },
            "mcp_servers": {"orders": stdio_server(record)},
            "tools": {name: {"server": "orders"} for name in ("lookup_order", "count", "fail")},
        }
    )


@asynccontextmanager
async def served(
    tmp_path: Path,
    observer: TurnObserver | None = None,
    tool_observer: ToolObserver = NO_TOOL_OBSERVER,
) -> AsyncIterator[tuple[ChatService, MemoryStore]]:
    definition = shop(tmp_path / "record.jsonl")
    with (tmp_path / "stderr.txt").open("w", encoding="utf-8") as stderr:
        tools = ServerTools([definition], server_stderr=stderr, observer=tool_observer)
        async with asyncio.timeout(BOUND):
            await tools.start()
        store = MemoryStore()
        chat = ChatService(
            Catalog([definition]), store, digest_key=KEY, server_tools=tools, observer=observer
        )
        try:
            yield chat, store
        finally:
            await chat.close()
            await tools.close()


async def turn(chat: ChatService, request: TurnRequest) -> list[TurnEvent]:
    async with asyncio.timeout(BOUND):
        return [event async for event in chat.run_turn(request)]


def records(tmp_path: Path) -> list[dict[str, Any]]:
    path = tmp_path / "record.jsonl"
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    return [json.loads(line) for line in lines]


def run(tmp_path: Path, body: Callable[[ChatService, MemoryStore], Awaitable[None]]) -> None:
    async def scenario() -> None:
        async with served(tmp_path) as (chat, store):
            await body(chat, store)

    asyncio.run(scenario())


def test_a_tool_route_answers_from_the_servers_tool(tmp_path: Path) -> None:
    async def body(chat: ChatService, store: MemoryStore) -> None:
        view = await chat.create_session("shop", "s1", HistoryMode.SERVER)
        events = await turn(chat, TurnRequest(view.session_id, "t1", Submit("/order A-17")))
        completed = events[-1]
        assert isinstance(completed, Completed)
        assert completed.content == "Order A-17: order A-17: 2 items, shipped"
        history = await chat.get_session(view.session_id)
        assert [m.content for m in history.messages] == ["/order A-17", completed.content]

    run(tmp_path, body)


def test_a_side_effect_runs_once_however_the_turn_is_repeated_or_retried(tmp_path: Path) -> None:
    async def body(chat: ChatService, store: MemoryStore) -> None:
        await chat.create_session("shop", "s1", HistoryMode.SERVER)
        first = await turn(chat, TurnRequest("s1", "t1", Submit("/count k1")))
        again = await turn(chat, TurnRequest("s1", "t1", Submit("/count k1")))  # same turn id
        retried = await turn(chat, TurnRequest("s1", "t2", Retry()))
        answers = [events[-1] for events in (first, again, retried)]
        assert all(isinstance(a, Completed) for a in answers), answers
        texts = {a.content for a in answers if isinstance(a, Completed)}
        assert texts == {"counted k1 for s1"}
        executions = records(tmp_path)
        assert [e["key"] for e in executions] == ["k1"]
        history = await chat.get_session("s1")
        user = history.messages[0]
        assert executions[0]["meta"] == {
            "agentskit.turn_id": "t1",
            "agentskit.call_id": f"route-{user.id}",
        }

    run(tmp_path, body)


def test_a_failing_tool_fails_the_route_and_stores_nothing(tmp_path: Path) -> None:
    async def body(chat: ChatService, store: MemoryStore) -> None:
        await chat.create_session("shop", "s1", HistoryMode.SERVER)
        before = await store.load_with_messages("s1")
        events = await turn(chat, TurnRequest("s1", "t1", Submit("/broken")))
        failed = events[-1]
        assert isinstance(failed, Failed)
        assert (failed.code, failed.route_id) == ("route_failed", "broken")
        after = await store.load_with_messages("s1")
        assert before is not None
        assert after is not None
        assert after[1] == before[1] == ()  # no message stored: only the failure's record
        assert (await chat.get_session("s1")).session.snapshot.state == "idle"

    run(tmp_path, body)


@pytest.mark.parametrize("history", [HistoryMode.SERVER])
def test_the_route_span_names_the_tool_and_never_its_arguments(
    tmp_path: Path, history: HistoryMode
) -> None:
    sinks = InMemory()
    canary = "canary3d9e"

    async def scenario() -> None:
        tool_observer = ToolTelemetry(sinks.tracer_provider, sinks.meter_provider)
        async with served(tmp_path, sinks.observer, tool_observer) as (chat, _):
            await chat.create_session("shop", "s1", history)
            await turn(chat, TurnRequest("s1", "t1", Submit(f"/count {canary}")))

    try:
        asyncio.run(scenario())
        spans = sinks.spans.get_finished_spans()
        turns = [s for s in spans if (s.attributes or {}).get("agentskit.chat.turn.id") == "t1"]
        assert turns, [s.name for s in spans]
        attributes = dict(turns[0].attributes or {})
        assert attributes["agentskit.chat.route.id"] == "count"
        assert attributes["agentskit.chat.route.tool"] == "count"
        (executed,) = [s for s in spans if s.name == "execute_tool count"]
        assert executed.parent is not None
        assert executed.parent.span_id == turns[0].context.span_id  # within the turn
        assert str((executed.attributes or {})["gen_ai.tool.call.id"]).startswith("route-")
        for span in spans:
            text = json.dumps(
                {"name": span.name, "attributes": dict(span.attributes or {})}, default=str
            )
            assert canary not in text, span.name
    finally:
        sinks.close()
