"""Agentic turns through the gRPC service, delegated to the fake model over real HTTP."""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Awaitable, Callable
from contextlib import aclosing
from typing import Any

import pytest

from agentskit_chat.conversation import ChatDefinition, command_route, define_chat
from agentskit_chat.fakemodel import FakeModelServer, HttpResponse, Reply, Stall
from agentskit_chat.models import AdapterRegistry
from agentskit_chat.service import Catalog, ChatService
from agentskit_chat.storage import MemoryStore
from agentskit_chat.transport import start_server
from agentskit_chat_client import ChatClient, Submit, TextDelta, TurnCompleted

CANARY = "canary-93be-upstream"


def assistant(base_url: str, **extra: Any) -> ChatDefinition:
    return define_chat(
        id="assistant",
        model={
            "adapter": "openai",
            "base_url": base_url,
            "model": "test-model",
            "system_prompt": "Be brief.",
            **extra,
        },
        conversation={
            "initial": "chatting",
            "states": {"chatting": {"on": {"help": "chatting"}}},
            "routes": [command_route(id="help", command="/help", event="help", response="Ask.")],
        },
    )


def against_service(
    server: FakeModelServer, body: Callable[[ChatClient, str], Awaitable[None]], **model: Any
) -> None:
    async def run() -> None:
        service = ChatService(
            Catalog([assistant(server.url, **model)]),
            MemoryStore(),
            digest_key=secrets.token_bytes(32),
            adapters=AdapterRegistry(),
        )
        running = await start_server(service, "127.0.0.1:0")
        try:
            async with ChatClient(f"127.0.0.1:{running.port}", timeout=30) as client:
                session = await client.create_session("assistant")
                await body(client, session.session_id)
        finally:
            await running.drain(1.0)

    asyncio.run(run())


def test_an_agentic_turn_streams_the_models_chunks_and_usage(server: FakeModelServer) -> None:
    server.enqueue(Reply(chunks=("Streams ", "are ", "fun."), usage=(12, 3)))

    async def body(client: ChatClient, session_id: str) -> None:
        await client.run_turn(session_id, Submit("/help"))
        result = await client.run_turn(session_id, Submit("What are streams?"))
        assert result.decision is not None
        assert result.decision.kind == "agentic"
        deltas = [e.text for e in result.events if isinstance(e, TextDelta)]
        assert deltas == ["Streams ", "are ", "fun."]
        assert result.completed is not None
        assert result.completed.content == "Streams are fun."
        assert result.completed.usage is not None
        usage = result.completed.usage
        assert (usage.input_tokens, usage.output_tokens) == (12, 3)

    against_service(server, body)
    (sent,) = server.requests
    assert sent.body["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "/help"},
        {"role": "assistant", "content": "Ask."},
        {"role": "user", "content": "What are streams?"},
    ]


def test_a_failing_model_fails_the_turn_with_its_code_and_no_upstream_text(
    server: FakeModelServer,
) -> None:
    server.enqueue(HttpResponse(400, f'{{"error": "{CANARY}"}}'))

    async def body(client: ChatClient, session_id: str) -> None:
        result = await client.run_turn(session_id, Submit("Hello"))
        assert result.failed is not None
        assert (result.failed.code, result.failed.retryable) == ("model_rejected", False)
        assert CANARY not in result.failed.message
        assert result.completed is None

    against_service(server, body)


def test_a_client_cancelling_its_turn_hangs_up_on_the_model(server: FakeModelServer) -> None:
    server.enqueue(Reply(chunks=("first ", "never"), pause_after=1))

    async def body(client: ChatClient, session_id: str) -> None:
        async with aclosing(client.submit(session_id, "Hello")) as events:
            async for event in events:
                if isinstance(event, TextDelta):
                    break
                assert not isinstance(event, TurnCompleted)
        assert await asyncio.to_thread(server.wait_disconnect, 10)

    against_service(server, body)
    assert server.requests[0].disconnected.is_set()
    assert server.requests[0].chunks_sent == 1


def test_debug_logs_hold_neither_content_nor_the_api_key(
    server: FakeModelServer, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    key = "sk-canary-key-7d21"
    monkeypatch.setenv("FAKE_MODEL_TEST_KEY", key)
    server.enqueue(Reply(chunks=(f"{CANARY}-answer",)), HttpResponse(500, CANARY), Stall())
    model = {"api_key_env": "FAKE_MODEL_TEST_KEY", "timeout": 0.5}

    async def body(client: ChatClient, session_id: str) -> None:
        answered = await client.run_turn(session_id, Submit(f"{CANARY}-question"))
        assert answered.completed is not None
        failed = await client.run_turn(session_id, Submit(f"{CANARY}-again"))
        assert failed.failed is not None

    with caplog.at_level(logging.DEBUG):
        against_service(server, body, **model)
    assert server.requests[0].headers["authorization"] == f"Bearer {key}"
    assert "HTTP Request" in caplog.text  # httpx did log each call
    assert CANARY not in caplog.text
    assert key not in caplog.text


def test_the_first_delta_reaches_the_client_before_the_model_has_finished(
    server: FakeModelServer,
) -> None:
    server.enqueue(Reply(chunks=("first ", "second ", "third"), pause_after=1))

    async def body(client: ChatClient, session_id: str) -> None:
        texts: list[str] = []
        async with aclosing(client.submit(session_id, "Hello")) as events:
            async for event in events:
                if isinstance(event, TextDelta):
                    texts.append(event.text)
                    if len(texts) == 1:
                        # The model is paused after its first chunk: it has not finished.
                        assert not server.requests[0].finished.is_set()
                        server.resume()
                if isinstance(event, TurnCompleted):
                    assert event.content == "first second third"
        assert texts == ["first ", "second ", "third"]

    against_service(server, body)
