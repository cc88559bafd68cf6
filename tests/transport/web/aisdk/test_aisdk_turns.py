"""The `/ai-sdk/` front's turns over plain HTTP: the stream's chunks, regenerate, server-held
chats, repeated turn ids, reattach and cancel, CORS, drain and telemetry (the AI SDK's own
client is driven in test_aisdk_client)."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterator
from pathlib import Path

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from agentskit_chat.fakemodel import FakeModelServer
from agentskit_chat.service import Limits
from agentskit_chat.telemetry import HttpTelemetry, OtelObserver
from agentskit_chat_client import ChatError, HistoryMode
from tests.transport.conftest import CANARY, run
from tests.transport.web.aisdk.chat import (
    DEFINITION,
    GOOD,
    ORIGIN,
    SLOW,
    SLOW_TEXT,
    answer,
    assistant,
    chunks,
    decision,
    post,
    served,
    user,
    with_,
)
from tests.transport.web.conftest import draining
from tests.waiting import longer_deadlines, until, until_async


@pytest.fixture
def model() -> Iterator[FakeModelServer]:
    with FakeModelServer() as server:
        server.model.answers[SLOW_TEXT] = SLOW
        yield server


def test_a_deterministic_turn_and_its_replay_over_plain_http(
    tmp_path: Path, model: FakeModelServer
) -> None:
    async def scenario() -> None:
        async with served(tmp_path, model) as web:
            response = await post(web.http, GOOD)
            assert response.status_code == 200
            assert response.headers["x-vercel-ai-ui-message-stream"] == "v1"
            assert response.headers["content-type"] == "text/event-stream"
            found = chunks(response.text)
            assert [c if c == "[DONE]" else c["type"] for c in found] == [
                "start",
                "data-agentskit-snapshot",
                "data-agentskit-decision",
                "start-step",
                "text-start",
                "text-delta",
                "text-end",
                "finish-step",
                "data-agentskit-snapshot",
                "finish",
                "[DONE]",
            ]
            assert found[1]["data"]["state"] == "idle"
            assert found[1]["data"]["commands"] == [
                {"route": "start", "input": "/start"},
                {"route": "boom", "input": "/boom"},
            ]
            assert found[8]["data"]["state"] == "collecting"
            assert found[1]["id"] == found[8]["id"]  # the second replaces the first
            # Regenerate with the answer still in the history: it is dropped, and the
            # recorded decision replayed.
            history = [user("u1", "/start"), assistant(found[0]["messageId"], "What?")]
            again = await post(web.http, with_(messages=history, trigger="regenerate-message"))
            replayed = decision(chunks(again.text))
            assert (replayed["route"], replayed["replayed"]) == ("start", True)
            assert answer(chunks(again.text)) == "What?"
            # A failing route: an error chunk with its code and safe message, then [DONE].
            boom = await post(web.http, with_(id="chat-boom", messages=[user("b1", "/boom")]))
            failed = chunks(boom.text)
            assert failed[-2] == {
                "type": "error",
                "errorText": "route_failed: Deterministic route failed.",
            }
            assert failed[-1] == "[DONE]"
            assert CANARY not in boom.text

    run(scenario())


def test_a_repeated_turn_id_runs_once(tmp_path: Path, model: FakeModelServer) -> None:
    async def scenario() -> None:
        async with served(tmp_path, model) as web:
            body = with_(messages=[user("u1", "hello")], turnId="turn-1")
            first = chunks((await post(web.http, body)).text)
            second = chunks((await post(web.http, body)).text)
            assert decision(first) == decision(second)
            assert decision(first)["turnId"] == "turn-1"
            assert second[-2]["type"] == "finish"
            assert len(model.requests) == 1

    run(scenario())


def test_a_server_held_chat_takes_only_its_last_user_message(
    tmp_path: Path, model: FakeModelServer
) -> None:
    async def scenario() -> None:
        async with served(tmp_path, model) as web:
            client = web.env.client
            await client.create_session(
                DEFINITION, session_id="held", history_mode=HistoryMode.SERVER
            )
            started = chunks((await post(web.http, with_(id="held"))).text)
            assert decision(started)["to"] == "collecting"
            # The earlier messages the client sends are not taken: the server holds them.
            history = [
                user("u1", CANARY),
                assistant(started[0]["messageId"], CANARY),
                user("u2", "/name Ada"),
            ]
            named = chunks((await post(web.http, with_(id="held", messages=history))).text)
            assert answer(named) == "Welcome, Ada."
            stored = await client.get_session("held")
            assert [m.id for m in stored.messages][::2] == ["u1", "u2"]
            assert [m.content for m in stored.messages][::2] == ["/start", "/name Ada"]
            # Regenerate: the held user message is retried, its decision replayed.
            again = with_(id="held", messages=history, trigger="regenerate-message")
            retried = decision(chunks((await post(web.http, again)).text))
            assert (retried["route"], retried["replayed"]) == ("name", True)
            # Submit of a held message with new text: an edit.
            history[2] = user("u2", "/name Bo")
            edit = with_(id="held", messages=history, messageId="u2")
            assert answer(chunks((await post(web.http, edit)).text)) == "Welcome, Bo."
            stored = await client.get_session("held")
            assert [m.content for m in stored.messages] == [
                "/start",
                "What?",
                "/name Bo",
                "Welcome, Bo.",
            ]

    run(scenario())


def test_a_resumable_turn_is_reattached_and_cancelled(
    tmp_path: Path, model: FakeModelServer
) -> None:
    async def scenario() -> None:
        async with served(tmp_path, model) as web:
            body = with_(messages=[user("u1", SLOW_TEXT)], resumable=True)
            first = asyncio.ensure_future(post(web.http, body))
            path = f"/ai-sdk/{DEFINITION}/chat-1/stream"
            await until(lambda: bool(model.requests), "the turn's model request")
            async with web.http.stream("GET", path) as watching:
                assert watching.status_code == 200
                assert watching.headers["x-vercel-ai-ui-message-stream"] == "v1"
                cancel = await web.http.post(f"/ai-sdk/{DEFINITION}/chat-1/cancel")
                assert cancel.status_code == 204
                watched = chunks((await watching.aread()).decode())
            assert watched[-2]["type"] == "error"
            assert watched[-2]["errorText"].startswith("cancelled: ")
            started = chunks((await first).text)
            assert started[-2] == watched[-2]
            assert (await web.http.get(path)).status_code == 204
            cancelled = await web.http.post(f"/ai-sdk/{DEFINITION}/chat-1/cancel")
            assert cancelled.status_code == 204

    run(scenario())


def test_cors_and_drain(tmp_path: Path, model: FakeModelServer) -> None:
    async def scenario() -> None:
        async with served(tmp_path, model) as web:
            preflight = await web.http.options(
                f"/ai-sdk/{DEFINITION}",
                headers={
                    "origin": ORIGIN,
                    "access-control-request-method": "POST",
                    "access-control-request-headers": "authorization, content-type",
                },
            )
            assert preflight.status_code == 204
            assert "POST" in preflight.headers["access-control-allow-methods"]
            response = await post(web.http, GOOD, origin=ORIGIN)
            assert response.headers["access-control-allow-origin"] == ORIGIN
            foreign = await post(web.http, with_(id="chat-2"), origin="https://elsewhere.example")
            assert "access-control-allow-origin" not in foreign.headers
            # A real drain with a turn in flight: new chats are refused, the turn finishes.
            slow = with_(id="chat-slow", messages=[user("u1", SLOW_TEXT)])
            in_flight = asyncio.ensure_future(post(web.http, slow))
            await until(lambda: bool(model.requests), "the turn's model request")
            drain = asyncio.ensure_future(web.env.server.drain(10.0))
            await until_async(draining(web.http), "the drain's 503")
            refused = await post(web.http, with_(id="chat-3"), origin=ORIGIN)
            assert refused.status_code == 503
            assert refused.headers["retry-after"] == "1"
            exposed = refused.headers["access-control-expose-headers"].lower()
            assert "retry-after" in [name.strip() for name in exposed.split(",")]
            assert refused.json()["error"]["code"] == "shutting_down"
            with pytest.raises(ChatError):  # the refused chat was not created
                await web.env.client.get_session("chat-3")
            model.resume()
            finished = chunks((await in_flight).text)
            assert answer(finished) == "one two"
            assert finished[-2]["type"] == "finish"
            await asyncio.wait_for(drain, 15)

    run(scenario())


def test_telemetry_names_the_route_and_never_the_content(
    tmp_path: Path, model: FakeModelServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    spans = InMemorySpanExporter()
    tracer = TracerProvider(shutdown_on_exit=False)
    tracer.add_span_processor(SimpleSpanProcessor(spans))
    meter = MeterProvider(metric_readers=[InMemoryMetricReader()], shutdown_on_exit=False)

    async def scenario() -> None:
        async with served(
            tmp_path,
            model,
            observer=OtelObserver(tracer, meter),
            http_telemetry=HttpTelemetry(tracer, meter),
        ) as web:
            traceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
            body = with_(messages=[user("u1", CANARY)])
            ok = await post(web.http, body, traceparent=traceparent)
            assert CANARY not in ok.text
            await post(web.http, with_(id="chat-b", messages=[user("b1", "/boom")]))
            assert (await post(web.http, with_(id=f"{CANARY} x"))).status_code == 400
            await web.http.get(f"/ai-sdk/{DEFINITION}/chat-1/stream")

    try:
        run(scenario())
        finished = spans.get_finished_spans()
    finally:
        tracer.shutdown()
        meter.shutdown()
    servers = [s for s in finished if s.kind is SpanKind.SERVER]
    names = sorted({s.name for s in servers})
    assert names == [
        "GET /ai-sdk/{definition_id}/{chat_id}/stream",
        "POST /ai-sdk/{definition_id}",
    ]
    turns = [s for s in finished if s.name.startswith("chat.turn")]
    assert len(turns) == 2
    (first,) = [s for s in servers if s.context.trace_id == 0x4BF92F3577B34DA6A3CE929D0E0E4736]
    assert any(t.parent is not None and t.parent.span_id == first.context.span_id for t in turns)
    for span in finished:
        assert CANARY not in json.dumps(dict(span.attributes or {}), default=str)
        assert CANARY not in span.name
        for event in span.events:
            assert CANARY not in json.dumps(dict(event.attributes or {}), default=str)
    for record in caplog.records:
        assert CANARY not in record.getMessage()


def test_a_turn_past_its_deadline_ends_with_an_error_chunk(
    tmp_path: Path, model: FakeModelServer
) -> None:
    async def attempt(folder: Path, timeout: float) -> bool:
        limits = Limits(turn_timeout=timeout, lease_ttl=max(5.0, 2 * timeout))
        async with served(folder, model, limits=limits) as web:
            response = await post(web.http, with_(messages=[user("u1", SLOW_TEXT)]))
            found = chunks(response.text)
            kinds = [c if c == "[DONE]" else c["type"] for c in found]
            assert found[-2]["errorText"].startswith("deadline_exceeded: ")
            if "text-delta" not in kinds:
                return False  # the turn timed out before the model's first piece: try longer
            assert kinds[-4:] == ["text-delta", "text-end", "error", "[DONE]"]
            return True

    run(longer_deadlines(tmp_path, attempt))
