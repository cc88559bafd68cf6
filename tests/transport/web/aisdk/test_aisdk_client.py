"""The AI SDK's own client code (`ai` 6, unchanged: a headless `AbstractChat` over
`DefaultChatTransport`, `reconnectToStream` and `readUIMessageStream`) against the `/ai-sdk/`
front of a live server, with the fake model answering agentic turns over real HTTP.

`ai` 6.0.325 is pinned in tests/frameworks: the newest major that runs on Node.js 20, the
Node the project requires (7.x needs 22).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from agentskit_chat.fakemodel import FakeModelServer, HttpResponse, Reply, Script
from tests.conformance.harness import live_server
from tests.transport.conftest import CANARY, run
from tests.transport.test_auth import TOKEN_A, authenticator
from tests.transport.web.aisdk.chat import DEFINITION, chat_definition, node, require_node
from tests.transport.web.conftest import WebLive, web_live
from tests.waiting import EVENT_WAIT, until_async

STREAM_TEXT = f"Describe the weather {CANARY}"
STREAM_REPLY = Reply(chunks=("Sunny ", "with a ", "light ", "breeze."))
FAIL_TEXT = f"Ask a model that is down {CANARY}"
RETRIED_REPLY = Reply(chunks=("Back ", "up."))
SLOW_TEXT = "Explain it at length"
SLOW_REPLY = Reply(chunks=("Part one. ", "Part two. ", "Part three. ", "The end."), pause_after=1)


@pytest.fixture
def model() -> Iterator[FakeModelServer]:
    with FakeModelServer() as server:
        server.model.answers[STREAM_TEXT] = STREAM_REPLY
        server.model.answers[SLOW_TEXT] = SLOW_REPLY
        yield server


@asynccontextmanager
async def served(tmp_path: Path, model: FakeModelServer) -> AsyncIterator[WebLive]:
    async with web_live(
        tmp_path,
        definitions=[chat_definition(model.url)],
        authenticator=authenticator(tmp_path),
        token=TOKEN_A,
    ) as web:
        yield web


def api(web: WebLive) -> str:
    return f"{web.url}/ai-sdk/{DEFINITION}"


def parts(message: dict[str, Any], kind: str) -> list[Any]:
    return [p["data"] for p in message["parts"] if p["type"] == f"data-agentskit-{kind}"]


def text(message: dict[str, Any]) -> str:
    return "".join(p["text"] for p in message["parts"] if p["type"] == "text")


def types(chunks: list[dict[str, Any]]) -> list[str]:
    return [c["type"] for c in chunks]


def test_turns_through_the_ai_sdk_chat(
    tmp_path: Path, model: FakeModelServer, caplog: pytest.LogCaptureFixture
) -> None:
    require_node()
    caplog.set_level(logging.DEBUG)
    # Not keyed: the failing turn takes the first (a refusal, which is not retried), its
    # retry the second.
    model.enqueue(HttpResponse(400, f'{{"error": "{CANARY}"}}'), RETRIED_REPLY)

    async def scenario() -> list[dict[str, Any]]:
        async with served(tmp_path, model) as web:
            env = {"chat_id": "chat-turns", "stream_text": STREAM_TEXT, "fail_text": FAIL_TEXT}
            async with node("turns", api(web), TOKEN_A, **env) as script:
                steps: list[dict[str, Any]] = await script.result()
            # The chat is a client-held session of the tenant: no content stored.
            stored = web.env.dump()
            assert any(row[1] == "chat-turns" for row in stored)
            assert CANARY not in repr(stored)
            return steps

    start, name, regenerated, agentic, failed, retried = run(scenario())
    # A deterministic turn: its decision and the snapshot after it, as data parts.
    assert start["status"] == "ready"
    assert start["roles"] == ["user", "assistant"]
    assert text(start["last"]) == "What?"
    assert parts(start["last"], "decision") == [
        {
            "kind": "deterministic",
            "route": "start",
            "from": "idle",
            "to": "collecting",
            "replayed": False,
            "turnId": start["last"]["metadata"]["turnId"],
        }
    ]
    snapshot = {
        "state": "collecting",
        "allowedEvents": ["finish"],
        "actions": ["cancel"],
        "commands": [],  # the name route has a pattern, no command
    }
    assert parts(start["last"], "snapshot") == [snapshot]
    assert types(start["chunks"])[0] == "start"
    assert start["chunks"][0]["messageId"] == start["last"]["id"]
    assert types(start["chunks"])[-1] == "finish"
    assert text(name["last"]) == "Welcome, Ada."
    (decided,) = parts(name["last"], "decision")
    assert (decided["route"], decided["to"], decided["replayed"]) == ("name", "complete", False)
    # Regenerate: the history without its last answer, whose recorded decision is replayed.
    assert regenerated["roles"] == ["user", "assistant", "user", "assistant"]
    assert text(regenerated["last"]) == "Welcome, Ada."
    (replayed,) = parts(regenerated["last"], "decision")
    assert (replayed["route"], replayed["replayed"]) == ("name", True)
    assert replayed["turnId"] != decided["turnId"]
    # An agentic turn: the fake model's chunks as text deltas.
    deltas = [c["delta"] for c in agentic["chunks"] if c["type"] == "text-delta"]
    assert len(deltas) >= 2
    assert "".join(deltas) == text(agentic["last"]) == STREAM_REPLY.text
    assert parts(agentic["last"], "decision")[0]["kind"] == "agentic"
    assert agentic["last"]["metadata"]["usage"]["outputTokens"] > 0
    # A failed turn: an error chunk with the failure's code and safe message.
    assert failed["status"] == "error"
    assert types(failed["chunks"])[-1] == "error"
    assert failed["error"].startswith("model_")
    assert failed["error"] == failed["chunks"][-1]["errorText"]
    # The user's retry (regenerate after the error) is a new turn, and answers.
    assert retried["status"] == "ready"
    assert text(retried["last"]) == RETRIED_REPLY.text
    assert len(model.requests) == 3
    for record in caplog.records:
        assert CANARY not in record.getMessage()


def test_a_bad_token_is_refused_to_the_ai_sdk_client(
    tmp_path: Path, model: FakeModelServer
) -> None:
    require_node()

    async def scenario() -> None:
        async with served(tmp_path, model) as web:
            before = web.env.dump()
            async with node("badToken", api(web), "not-a-token") as script:
                result = await script.result()
            assert result["send"]["status"] == "error"
            assert '"code":"unauthenticated"' in result["send"]["error"]
            assert '"code":"unauthenticated"' in result["reconnect"]
            assert web.env.dump() == before

    run(scenario())


def test_a_reconnect_mid_answer_loses_nothing(tmp_path: Path, model: FakeModelServer) -> None:
    require_node()

    async def scenario() -> dict[str, Any]:
        async with served(tmp_path, model) as web:
            async with node(
                "resume", api(web), TOKEN_A, chat_id="chat-resume", slow_text=SLOW_TEXT
            ) as script:
                cut = await script.next_event()
                assert cut["event"] == "cut"
                result: dict[str, Any] = await script.result(lambda waiting: model.resume())
            return result

    result = run(scenario())
    first = [c for c in result["before"] if c["type"] == "text-delta"]
    assert [c["delta"] for c in first] == ["Part one. "]
    reconnect = result["reconnect"]
    assert reconnect[0]["type"] == "start"
    assert reconnect[0]["messageId"] == result["before"][0]["messageId"]
    assert "".join(c["delta"] for c in reconnect if c["type"] == "text-delta") == SLOW_REPLY.text
    assert types(reconnect)[-1] == "finish"
    assert text(result["message"]) == SLOW_REPLY.text
    # A new page's Chat resuming the same chat shows the whole answer and its decision.
    page = result["afterwards"]
    assert page["status"] == "ready"
    assert page["roles"] == ["user", "assistant"]
    assert text(page["last"]) == SLOW_REPLY.text
    assert parts(page["last"], "decision")[0]["kind"] == "agentic"
    # Once the turn ended, a reconnect finds nothing running: 204.
    assert result["noneAfter"] is True
    assert len(model.requests) == 1


def test_a_turn_that_is_not_resumable_ends_with_its_connection(
    tmp_path: Path, model: FakeModelServer
) -> None:
    require_node()

    async def scenario() -> None:
        async with served(tmp_path, model) as web:

            async def cancelled(waiting: dict[str, Any]) -> None:
                assert await asyncio.to_thread(model.wait_disconnect, EVENT_WAIT)

                async def ended() -> bool:
                    page = await web.env.client.list_turns("chat-cut", page_size=1)
                    return not page.turns or page.turns[0].outcome != "running"

                await until_async(ended, "the cut turn's end", pause=0.02)

            async with node(
                "cancelled", api(web), TOKEN_A, chat_id="chat-cut", slow_text=SLOW_TEXT
            ) as script:
                result = await script.result(cancelled)
            assert [c["type"] for c in result["before"]][-1] == "text-delta"
            assert result["reconnected"] is False

    run(scenario())


def test_the_ai_sdk_chat_against_serve(tmp_path: Path) -> None:
    """The same chat against `agentskit-chat serve` (a child process, JSON logs, tokens)
    and the fake model: the front is wired into the listener the CLI starts, and its log
    holds none of the messages."""
    require_node()
    answers: dict[str, Script] = {
        STREAM_TEXT: STREAM_REPLY,
        FAIL_TEXT: HttpResponse(400, f'"{CANARY}"'),
    }
    with live_server(tmp_path, answers=answers) as server:

        async def scenario() -> list[dict[str, Any]]:
            env = {"chat_id": "chat-serve", "stream_text": STREAM_TEXT, "fail_text": FAIL_TEXT}
            api = f"{server.http_url}/ai-sdk/conformance"
            async with node("turns", api, server.tokens["curl"], **env) as script:
                steps: list[dict[str, Any]] = await script.result()
            return steps

        start, name, regenerated, agentic, failed, retried = run(scenario())
    assert parts(start["last"], "decision")[0]["to"] == "collecting"
    assert text(name["last"]) == "Welcome, Ada."
    assert parts(regenerated["last"], "decision")[0]["replayed"] is True
    assert text(agentic["last"]) == STREAM_REPLY.text
    assert failed["status"] == retried["status"] == "error"
    log = (tmp_path / "serve.log").read_text(encoding="utf-8")
    assert "chat-serve" in log  # the turns' log lines, which name the session
    assert CANARY not in log


def test_a_tool_round_through_the_ai_sdk_chat(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """`onToolCall` runs each call with `addToolOutput`, and `sendAutomaticallyWhen`
    (`lastAssistantMessageIsCompleteWithToolCalls`) continues the answer in the same
    assistant message."""
    require_node()
    caplog.set_level(logging.DEBUG)
    tools = [
        {"name": "weather", "description": "The weather.", "inputSchema": {"type": "object"}},
        {"name": "clock", "inputSchema": {"type": "object"}},
    ]

    async def scenario() -> dict[str, Any]:
        async with web_live(tmp_path) as web:
            env = {"chat_id": "chat-tools", "tools": json.dumps(tools), "note": CANARY}
            async with node("tools", f"{web.url}/ai-sdk/probe", **env) as script:
                result: dict[str, Any] = await script.result()
            assert web.env.probe.model_calls == [1, 4]
            assert CANARY not in repr(web.env.dump())
            return result

    result = run(scenario())
    assert [(c["toolCallId"], c["toolName"], c["input"]) for c in result["calls"]] == [
        ("call-0", "weather", {"n": 0}),
        ("call-1", "clock", {"n": 1}),
    ]
    assert result["requests"] == 2  # the round, then the automatic continuation
    assert result["status"] == "ready"
    assert result["roles"] == ["user", "assistant"]  # one answer, two steps
    message = result["last"]
    assert [p["type"] for p in message["parts"] if not p["type"].startswith("data-")] == [
        "step-start",
        "tool-weather",
        "tool-clock",
        "step-start",
        "text",
    ]
    tools_parts = [p for p in message["parts"] if p["type"].startswith("tool-")]
    assert [p["state"] for p in tools_parts] == ["output-available", "output-available"]
    assert tools_parts[0]["output"] == {"ran": "weather", "note": CANARY}
    assert text(message) == "2 tool results"
    assert types(result["first"])[-1] == "finish"
    assert result["first"][-1]["finishReason"] == "tool-calls"
    for record in caplog.records:
        assert CANARY not in record.getMessage()
