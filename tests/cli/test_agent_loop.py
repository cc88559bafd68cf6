"""The turn's agent loop in a real `serve`: the fake model over HTTP calls a server tool of
a real MCP server, the service runs it and the model answers with its result; each front
shows it its own way (gRPC events, AI SDK tool output, AG-UI TOOL_CALL_RESULT) or hides it
(the OpenAI front, whose client never answers a server tool)."""

from __future__ import annotations

import asyncio
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from agentskit_chat.fakemodel import Call, FakeModelServer, ToolCalls
from agentskit_chat_client import (
    ChatClient,
    Submit,
    ToolCallEnded,
    ToolCallResult,
    ToolCallStarted,
    TurnCompleted,
)
from tests.cli.conftest import Launcher
from tests.cli.fixtures.serving import REPO, collect, terminal

QUESTION = "where is A-17?"
ANSWER = "The fake model got 1 tool result (call-look)."
MIXED = "where is A-17, and what time is it?"
CLOCK: list[Any] = [{"type": "function", "function": {"name": "local_time"}}]


@pytest.fixture
def model() -> Iterator[FakeModelServer]:
    look = Call("lookup_order", '{"order_id": "A-17"}', id="call-look")
    calls = ToolCalls(calls=(look,))
    mixed = ToolCalls(calls=(look, Call("local_time", "{}", id="call-time")))
    with FakeModelServer(answers={QUESTION: calls, MIXED: mixed}) as server:
        yield server


def shop(directory: Path, model_url: str, record: Path) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    server = {
        "command": sys.executable,
        "args": ["-m", "tests.mcp.servers.orders", "stdio"],
        "env": {"PYTHONPATH": str(REPO), "ORDERS_RECORD": str(record)},
    }
    chat = {
        "id": "shop",
        "revision": 1,
        "model": {"adapter": "openai", "base_url": model_url, "model": "fake-1"},
        "conversation": {"initial": "open", "states": {"open": {}}},
        "mcp_servers": {"orders": server},
        "tools": {"lookup_order": {"server": "orders"}},
    }
    (directory / "shop.json").write_text(json.dumps(chat), encoding="utf-8")
    return directory


def sse(text: str) -> list[Any]:
    found: list[Any] = []
    for line in text.splitlines():
        if line.startswith("data: "):
            data = line.removeprefix("data: ")
            found.append(data if data == "[DONE]" else json.loads(data))
    return found


def test_a_server_tool_round_through_every_front(
    launch: Launcher, model: FakeModelServer, tmp_path: Path
) -> None:
    definitions = shop(tmp_path / "defs", model.url, tmp_path / "record.jsonl")
    server = launch(
        tmp_path / "state", "--definitions", str(definitions), "--http-listen", "127.0.0.1:0"
    )
    port = re.search(r"http listening on 127\.0\.0\.1:(\d+)", server.stdout)
    assert port is not None

    async def scenario() -> None:
        async with ChatClient(server.target, timeout=30) as client:
            session = await client.create_session("shop")
            events = await collect(client, session.session_id, Submit(QUESTION))
            started = [e for e in events if isinstance(e, ToolCallStarted)]
            ended = [e for e in events if isinstance(e, ToolCallEnded)]
            ran = [e for e in events if isinstance(e, ToolCallResult)]
            assert [(e.name, e.wait) for e in started] == [("lookup_order", "server")]
            assert [e.wait for e in ended] == ["server"]
            assert [(e.tool_call_id, e.content, e.error_type) for e in ran] == [
                ("call-look", "order A-17: 2 items, shipped", None)
            ]
            done = terminal(events)
            assert isinstance(done, TurnCompleted)
            assert (done.content, done.pending_tool_calls) == (ANSWER, ())
        async with httpx.AsyncClient(
            base_url=f"http://127.0.0.1:{port.group(1)}", timeout=30
        ) as http:
            message = {"id": "u1", "role": "user", "parts": [{"type": "text", "text": QUESTION}]}
            body = {"id": "chat-1", "trigger": "submit-message", "messages": [message]}
            chunks = sse((await http.post("/ai-sdk/shop", json=body)).text)
            kinds = [c if c == "[DONE]" else c["type"] for c in chunks]
            assert kinds.count("start-step") == 2  # one per model call
            (output,) = [c for c in chunks if c != "[DONE]" and c["type"].startswith("tool-output")]
            assert output == {
                "type": "tool-output-available",
                "toolCallId": "call-look",
                "output": "order A-17: 2 items, shipped",
            }
            run = {
                "threadId": "thread-1",
                "runId": "run-1",
                "messages": [{"id": "m1", "role": "user", "content": QUESTION}],
                "tools": [],
                "context": [],
                "state": {},
                "forwardedProps": {},
            }
            agui = sse((await http.post("/agui/shop", json=run)).text)
            results = [e for e in agui if e["type"] == "TOOL_CALL_RESULT"]
            assert [(e["toolCallId"], e["content"], e["role"]) for e in results] == [
                ("call-look", "order A-17: 2 items, shipped", "tool")
            ]
            request = {
                "model": "shop",
                "stream": True,
                "messages": [{"role": "user", "content": QUESTION}],
            }
            completion = sse((await http.post("/v1/chat/completions", json=request)).text)
            choices = [c["choices"][0] for c in completion if c != "[DONE]" and c["choices"]]
            deltas = [choice["delta"] for choice in choices]
            assert not [d for d in deltas if "tool_calls" in d]  # the service's own business
            assert "".join(d.get("content") or "" for d in deltas) == ANSWER
            assert "stop" in [choice.get("finish_reason") for choice in choices]

    asyncio.run(asyncio.wait_for(scenario(), 120))


def test_an_answer_calling_server_and_client_tools_over_the_openai_front(
    launch: Launcher, model: FakeModelServer, tmp_path: Path
) -> None:
    """The OpenAI front shows only the client's call; the client answers it, and the model
    is asked with the server's result too (the turn kept it), which ran once."""
    record = tmp_path / "record.jsonl"
    definitions = shop(tmp_path / "defs", model.url, record)
    server = launch(
        tmp_path / "state", "--definitions", str(definitions), "--http-listen", "127.0.0.1:0"
    )
    port = re.search(r"http listening on 127\.0\.0\.1:(\d+)", server.stdout)
    assert port is not None
    headers = {"X-AgentsKit-Conversation": "c-mixed"}
    ask: list[Any] = [{"role": "user", "content": MIXED}]

    async def scenario() -> None:
        async with httpx.AsyncClient(
            base_url=f"http://127.0.0.1:{port.group(1)}", timeout=30, headers=headers
        ) as http:
            request = {"model": "shop", "messages": ask, "tools": CLOCK}
            first = (await http.post("/v1/chat/completions", json=request)).json()
            message = first["choices"][0]["message"]
            assert [c["id"] for c in message["tool_calls"]] == ["call-time"]  # ours hidden
            history = [
                *ask,
                {"role": "assistant", "content": None, "tool_calls": message["tool_calls"]},
                {"role": "tool", "tool_call_id": "call-time", "content": "12:00"},
            ]
            request = {"model": "shop", "messages": history, "tools": CLOCK}
            second = (await http.post("/v1/chat/completions", json=request)).json()
            answer = second["choices"][0]["message"]["content"]
            assert answer == "The fake model got 2 tool results (call-look, call-time)."
        sent = model.requests[-1].body["messages"]
        assert [m["role"] for m in sent] == ["user", "assistant", "tool", "tool"]
        assert {c["id"] for c in sent[1]["tool_calls"]} == {"call-look", "call-time"}

    asyncio.run(asyncio.wait_for(scenario(), 120))
