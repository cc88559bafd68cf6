"""The `openai` adapter against the fake model server over real HTTP: streaming, the request,
cancellation and the shared connection pool."""

from __future__ import annotations

import asyncio
from contextlib import aclosing
from typing import Any

import pytest
from opentelemetry import context, trace

from agentskit_chat.conversation import Message, Role
from agentskit_chat.fakemodel import DEFAULT_CHUNKS, Ending, FakeModelServer, Reply
from agentskit_chat.models import (
    AdapterRegistry,
    FinishChunk,
    ModelChunk,
    ModelRequest,
    OpenAIAdapter,
    ResponseChunk,
    TextChunk,
    UsageChunk,
)
from agentskit_chat.models import openai as openai_adapter

HISTORY = (
    Message("u1", Role.USER, "Hello"),
    Message("a1", Role.ASSISTANT, "Hi, how can I help?"),
    Message("u2", Role.USER, "Tell me about streams"),
)


def settings(server: FakeModelServer, **extra: Any) -> dict[str, Any]:
    return {"adapter": "openai", "base_url": server.url, "model": "test-model", **extra}


def request(model: dict[str, Any], messages: tuple[Message, ...] = HISTORY) -> ModelRequest:
    return ModelRequest("chat", "s1", messages, model)


async def collect(adapter: OpenAIAdapter, model: dict[str, Any]) -> list[ModelChunk]:
    async with aclosing(adapter.stream(request(model))) as chunks:
        return [chunk async for chunk in chunks]


def texts(chunks: list[ModelChunk]) -> list[str]:
    return [c.text for c in chunks if isinstance(c, TextChunk)]


def test_chunks_arrive_in_order_with_finish_reason_and_usage(server: FakeModelServer) -> None:
    server.enqueue(
        Reply(chunks=("One, ", "two, ", "three."), usage=(11, 7), finish_reason="length")
    )
    model = settings(server)

    async def run() -> list[ModelChunk]:
        adapter = OpenAIAdapter(model)
        try:
            return await collect(adapter, model)
        finally:
            await adapter.close()

    chunks = asyncio.run(run())
    assert isinstance(chunks[0], ResponseChunk)  # the completion's id and model come first
    assert chunks[0].response_id is not None
    assert chunks[0].response_id.startswith("chatcmpl-")
    assert chunks[0].model == model["model"]
    assert texts(chunks) == ["One, ", "two, ", "three."]
    assert chunks[4:] == [FinishChunk("length"), UsageChunk(11, 7)]


def test_the_first_chunk_arrives_before_the_server_sends_the_last(
    server: FakeModelServer,
) -> None:
    server.enqueue(Reply(chunks=("first ", "second ", "last"), pause_after=1))
    model = settings(server)

    async def run() -> list[ModelChunk]:
        adapter = OpenAIAdapter(model)
        try:
            async with aclosing(adapter.stream(request(model))) as chunks:
                described = await anext(chunks)
                assert isinstance(described, ResponseChunk)
                first = await anext(chunks)
                answer = server.requests[-1]
                # The server is holding the rest back: the first chunk came on its own.
                assert answer.chunks_sent == 1
                assert not answer.finished.is_set()
                server.resume()
                return [first, *[chunk async for chunk in chunks]]
        finally:
            await adapter.close()

    chunks = asyncio.run(run())
    assert texts(chunks) == ["first ", "second ", "last"]
    assert server.requests[-1].finished.wait(10)


def test_the_request_carries_the_settings_history_and_credentials(
    server: FakeModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("FAKE_MODEL_TEST_KEY", "sk-test-0123456789")
    model = settings(
        server,
        api_key_env="FAKE_MODEL_TEST_KEY",
        system_prompt="You are terse.",
        temperature=0.3,
        max_tokens=42,
        headers={"X-Tenant": "acme", "Accept": "text/event-stream"},
    )

    async def run() -> None:
        adapter = OpenAIAdapter(model)
        try:
            await collect(adapter, model)
        finally:
            await adapter.close()

    asyncio.run(run())
    (received,) = server.requests
    assert (received.method, received.path) == ("POST", "/v1/chat/completions")
    assert received.headers["authorization"] == "Bearer sk-test-0123456789"
    assert received.headers["x-tenant"] == "acme"
    assert received.headers["content-type"] == "application/json"
    assert received.headers["accept"] == "text/event-stream"
    assert received.body == {
        "model": "test-model",
        "messages": [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "Hello"},
            {"role": "assistant", "content": "Hi, how can I help?"},
            {"role": "user", "content": "Tell me about streams"},
        ],
        "stream": True,
        "stream_options": {"include_usage": True},
        "temperature": 0.3,
        "max_tokens": 42,
    }


def test_optional_settings_are_left_out_of_the_request(server: FakeModelServer) -> None:
    model = settings(server)

    async def run() -> list[ModelChunk]:
        adapter = OpenAIAdapter(model)
        try:
            return await collect(adapter, model)
        finally:
            await adapter.close()

    assert "".join(texts(asyncio.run(run()))) == "".join(DEFAULT_CHUNKS)
    (received,) = server.requests
    assert "authorization" not in received.headers
    assert set(received.body) == {"model", "messages", "stream", "stream_options"}
    assert [m["role"] for m in received.body["messages"]] == ["user", "assistant", "user"]


def test_the_stream_ends_at_done_while_the_body_is_still_open(
    server: FakeModelServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The server never ends this body. However long a wait for its end might be allowed,
    # the answer ends at [DONE], without waiting on the server.
    monkeypatch.setattr(openai_adapter, "DRAIN_SECONDS", 3600.0, raising=False)
    server.enqueue(Reply(chunks=("held ", "open"), usage=(3, 2), ending=Ending.HOLD))
    model = settings(server)

    async def run() -> tuple[list[ModelChunk], list[ModelChunk]]:
        adapter = OpenAIAdapter(model)
        try:
            held = await asyncio.wait_for(collect(adapter, model), 10)
            answer = server.requests[-1]
            assert not answer.finished.is_set()  # The body is still open on the server.
            # The connection of the unfinished body is given up, never handed to another call.
            assert await asyncio.to_thread(server.wait_disconnect, 10)
            assert answer.disconnected.is_set()
            return held, await asyncio.wait_for(collect(adapter, model), 10)
        finally:
            await adapter.close()

    held, after = asyncio.run(run())
    assert held[1:] == [
        TextChunk("held "),
        TextChunk("open"),
        FinishChunk("stop"),
        UsageChunk(3, 2),
    ]
    assert texts(after) == list(DEFAULT_CHUNKS)
    first, second = server.requests
    assert first.client_port != second.client_port
    assert second.finished.wait(10)


def test_a_body_ending_with_done_leaves_its_connection_for_the_next_call(
    server: FakeModelServer,
) -> None:
    model = settings(server)

    async def run() -> None:
        adapter = OpenAIAdapter(model)
        try:
            for _ in range(3):
                assert texts(await collect(adapter, model)) == list(DEFAULT_CHUNKS)
        finally:
            await adapter.close()

    asyncio.run(run())
    assert len(server.requests) == 3
    assert len({r.client_port for r in server.requests}) == 1
    assert not any(r.disconnected.is_set() for r in server.requests)


def test_closing_the_stream_mid_answer_hangs_up_on_the_server(server: FakeModelServer) -> None:
    server.enqueue(Reply(chunks=("a", "b", "c"), pause_after=1))
    model = settings(server)

    async def run() -> None:
        adapter = OpenAIAdapter(model)
        try:
            chunks = adapter.stream(request(model))
            assert isinstance(await anext(chunks), ResponseChunk)
            assert await anext(chunks) == TextChunk("a")
            await chunks.aclose()
            assert await asyncio.to_thread(server.wait_disconnect, 10)
        finally:
            await adapter.close()

    asyncio.run(run())
    (answer,) = server.requests
    assert answer.disconnected.is_set()
    assert not answer.finished.is_set()
    assert answer.chunks_sent == 1


def test_cancelling_the_consuming_task_hangs_up_on_the_server(server: FakeModelServer) -> None:
    server.enqueue(Reply(chunks=("a", "b"), pause_after=1))
    model = settings(server)

    async def run() -> None:
        adapter = OpenAIAdapter(model)
        first = asyncio.Event()

        async def consume() -> None:
            async with aclosing(adapter.stream(request(model))) as chunks:
                async for _ in chunks:
                    first.set()

        task = asyncio.create_task(consume())
        try:
            await first.wait()
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task
            assert await asyncio.to_thread(server.wait_disconnect, 10)
        finally:
            await adapter.close()

    asyncio.run(run())
    assert server.requests[0].disconnected.is_set()


def test_adapters_of_one_base_url_share_one_client_and_its_connections(
    server: FakeModelServer,
) -> None:
    with FakeModelServer() as other:

        async def run() -> None:
            registry = AdapterRegistry()
            first = registry.adapter(settings(server, model="model-a"))
            second = registry.adapter(settings(server, model="model-b", temperature=0.5))
            elsewhere = registry.adapter(settings(other))
            assert isinstance(first, OpenAIAdapter)
            assert isinstance(second, OpenAIAdapter)
            assert isinstance(elsewhere, OpenAIAdapter)
            assert first is not second
            assert first.client is second.client
            assert elsewhere.client is not first.client
            for adapter in (first, second, first):
                async with aclosing(adapter.stream(request({}))) as chunks:
                    assert texts([c async for c in chunks]) == list(DEFAULT_CHUNKS)
            client = first.client
            await registry.close()
            assert client.is_closed

        asyncio.run(run())
    assert [r.body["model"] for r in server.requests] == ["model-a", "model-b", "model-a"]
    assert len({r.client_port for r in server.requests}) == 1  # One kept-alive connection.


def test_the_last_adapter_of_a_base_url_closes_the_client(server: FakeModelServer) -> None:
    async def run() -> None:
        registry = AdapterRegistry()
        first = registry.adapter(settings(server, model="a"))
        second = registry.adapter(settings(server, model="b"))
        assert isinstance(first, OpenAIAdapter)
        assert isinstance(second, OpenAIAdapter)
        client = first.client
        assert second.client is client
        await first.close()
        assert not client.is_closed
        await second.close()
        assert client.is_closed

    asyncio.run(run())


def test_the_adapter_names_its_model(server: FakeModelServer) -> None:
    adapter = OpenAIAdapter(settings(server, model="llama3:8b"))
    assert adapter.model == "llama3:8b"
    with pytest.raises(AttributeError):
        adapter.model = "other"  # type: ignore[misc]


def test_the_adapter_names_its_provider(server: FakeModelServer) -> None:
    assert OpenAIAdapter(settings(server)).provider == "openai"
    adapter = OpenAIAdapter(settings(server, provider="vllm"))
    assert (adapter.name, adapter.provider) == ("openai", "vllm")


def test_the_request_carries_the_current_trace_context(server: FakeModelServer) -> None:
    model = settings(server)
    current = trace.SpanContext(
        trace_id=0x4BF92F3577B34DA6A3CE929D0E0E4736,
        span_id=0x00F067AA0BA902B7,
        is_remote=False,
        trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED),
        trace_state=trace.TraceState([("vendor", "v1")]),
    )

    async def run() -> None:
        adapter = OpenAIAdapter(model)
        try:
            await collect(adapter, model)  # no current span: nothing to carry
            token = context.attach(trace.set_span_in_context(trace.NonRecordingSpan(current)))
            try:
                await collect(adapter, model)
            finally:
                context.detach(token)
        finally:
            await adapter.close()

    asyncio.run(run())
    untraced, traced = server.requests
    assert "traceparent" not in untraced.headers
    assert (
        traced.headers["traceparent"] == "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
    )
    assert traced.headers["tracestate"] == "vendor=v1"
