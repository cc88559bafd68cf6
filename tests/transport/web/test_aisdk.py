"""The `/ai-sdk/` front over plain HTTP: its refusals, server-held chats, repeated turn ids,
cancel, CORS, drain and telemetry; the AI SDK's own client is driven in test_aisdk_client."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from grpc_health.v1 import health_pb2
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind

from agentskit_chat.conversation import load_definitions
from agentskit_chat.fakemodel import FakeModelServer, Reply
from agentskit_chat.telemetry import HttpTelemetry, OtelObserver
from agentskit_chat.transport.web._logbound import LOGGER_NAME, MAX_EVENT_CHARS
from agentskit_chat_client import HistoryMode
from tests.transport.conftest import CANARY, EXAMPLES, run
from tests.transport.test_auth import TOKEN_A, TOKEN_B, authenticator

from .aisdk import DEFINITION, assistant, chat_definition, chunks, post, user
from .conftest import WebLive, web_live

AUTH_A = {"authorization": f"Bearer {TOKEN_A}"}
ORIGIN = "https://chat.example.com"
SLOW = Reply(chunks=("one ", "two"), pause_after=1)
SLOW_TEXT = "slowly"


@pytest.fixture
def model() -> Iterator[FakeModelServer]:
    with FakeModelServer() as server:
        server.model.answers[SLOW_TEXT] = SLOW
        yield server


@asynccontextmanager
async def served(tmp_path: Path, model: FakeModelServer, **options: Any) -> AsyncIterator[WebLive]:
    definitions = [chat_definition(model.url), load_definitions(EXAMPLES)["support"]]
    async with web_live(
        tmp_path,
        definitions=definitions,
        authenticator=authenticator(tmp_path),
        token=TOKEN_A,
        cors=frozenset({ORIGIN}),
        **options,
    ) as web:
        web.http.headers.update(AUTH_A)
        yield web


def decision(found: list[Any]) -> dict[str, Any]:
    (data,) = [c["data"] for c in found if c != "[DONE]" and c["type"].endswith("-decision")]
    return data  # type: ignore[no-any-return]


def answer(found: list[Any]) -> str:
    return "".join(c["delta"] for c in found if c != "[DONE]" and c["type"] == "text-delta")


GOOD = {"id": "chat-1", "trigger": "submit-message", "messages": [user("u1", "/start")]}


def _with(**changes: Any) -> dict[str, Any]:
    return {**GOOD, **changes}


def _message(**changes: Any) -> dict[str, Any]:
    return _with(messages=[{**user("u1", "/start"), **changes}])


MALFORMED: list[tuple[Any, str]] = [
    (CANARY, "body"),
    ([CANARY], "body"),
    ({"messages": GOOD["messages"]}, "id"),
    (_with(id=5), "id"),
    (_with(id=f"bad id {CANARY}"), "id"),
    (_with(messages=[]), "messages"),
    (_with(messages=[CANARY]), "messages[0]"),
    (_message(id=None), "messages[0].id"),
    (_message(role=CANARY), "messages[0].role"),
    (_message(parts=CANARY), "messages[0].parts"),
    (_message(parts=[{"text": CANARY}]), "messages[0].parts[0]"),
    (_message(parts=[{"type": "text", "text": 5}]), "messages[0].parts[0].text"),
    (_with(trigger=CANARY), "trigger"),
    (_with(messageId=5), "messageId"),
    (_with(turnId=f"{CANARY} x"), "turnId"),
    (_with(resumable=CANARY), "resumable"),
    (_with(messages=[user("u1", "/start"), user("u1", CANARY)]), "messages[1].id"),
    (_with(messages=[assistant("a1", CANARY)]), "messages"),
    (_with(messages=[user("u1", CANARY), user("u2", "  ")]), "messages[1].parts"),
]


@pytest.mark.parametrize(("body", "field"), MALFORMED)
def test_a_malformed_request_is_refused_naming_its_field(
    tmp_path: Path,
    model: FakeModelServer,
    caplog: pytest.LogCaptureFixture,
    body: Any,
    field: str,
) -> None:
    caplog.set_level(logging.DEBUG)

    async def scenario() -> None:
        async with served(tmp_path, model) as web:
            before = web.env.dump()
            content = body.encode() if isinstance(body, str) else json.dumps(body).encode()
            response = await web.http.post(
                f"/ai-sdk/{DEFINITION}",
                content=content,
                headers={"content-type": "application/json"},
            )
            assert response.status_code == 400
            assert response.headers["content-type"] == "application/json"
            error = response.json()["error"]
            assert (error["code"], error["field"]) == ("invalid_argument", field)
            assert CANARY not in response.text
            assert web.env.dump() == before

    run(scenario())
    assert not model.requests
    lines = [r for r in caplog.records if r.name == LOGGER_NAME]
    assert len(lines) <= 1
    for record in caplog.records:
        assert CANARY not in record.getMessage()
    for record in lines:
        assert len(record.getMessage()) <= MAX_EVENT_CHARS


def test_a_request_without_a_valid_token_is_refused(tmp_path: Path, model: FakeModelServer) -> None:
    async def scenario() -> None:
        async with served(tmp_path, model) as web:
            before = web.env.dump()
            for token in (None, "not-a-token"):
                headers = {} if token is None else {"authorization": f"Bearer {token}"}
                web.http.headers.pop("authorization")
                web.http.headers.update(headers)
                for method, path in (
                    ("POST", f"/ai-sdk/{DEFINITION}"),
                    ("GET", f"/ai-sdk/{DEFINITION}/chat-1/stream"),
                    ("DELETE", f"/ai-sdk/{DEFINITION}/chat-1/stream"),
                    ("GET", "/ai-sdk/nothing/here"),
                ):
                    response = await web.http.request(method, path, json=GOOD)
                    assert response.status_code == 401
                    assert response.json()["error"]["code"] == "unauthenticated"
                web.http.headers["authorization"] = ""
            assert web.env.dump() == before

    run(scenario())


def test_paths_methods_and_definitions(tmp_path: Path, model: FakeModelServer) -> None:
    async def scenario() -> None:
        async with served(tmp_path, model) as web:
            before = web.env.dump()
            missing = await post(web.http, GOOD, "nowhere")
            assert missing.status_code == 404
            assert missing.json()["error"]["code"] == "definition_not_found"
            wrong = await web.http.get(f"/ai-sdk/{DEFINITION}")
            assert (wrong.status_code, wrong.headers["allow"]) == (405, "POST")
            wrong = await web.http.post(f"/ai-sdk/{DEFINITION}/chat-1/stream")
            assert (wrong.status_code, wrong.headers["allow"]) == (405, "GET, DELETE")
            for path in ("/ai-sdk/", f"/ai-sdk/{DEFINITION}/chat-1", "/ai-sdk/a/b/c/d"):
                assert (await web.http.get(path)).status_code == 404
            assert web.env.dump() == before
            # A chat belongs to the definition it was created on.
            assert (await post(web.http, GOOD)).status_code == 200
            other = await post(web.http, GOOD, "support")
            assert other.status_code == 409
            assert other.json()["error"]["field"] == "id"
            none = await web.http.get("/ai-sdk/support/chat-1/stream")
            assert none.status_code == 204
            # Tenants: another tenant's token sees no such chat, and makes its own.
            theirs = await post(web.http, GOOD, "support", authorization=f"Bearer {TOKEN_B}")
            assert theirs.status_code == 200

    run(scenario())


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
                "text-start",
                "text-delta",
                "text-end",
                "data-agentskit-snapshot",
                "finish",
                "[DONE]",
            ]
            assert found[1]["data"]["state"] == "idle"
            assert found[6]["data"]["state"] == "collecting"
            assert found[1]["id"] == found[6]["id"]  # the second replaces the first
            # Regenerate with the answer still in the history: it is dropped, and the
            # recorded decision replayed.
            history = [user("u1", "/start"), assistant(found[0]["messageId"], "What?")]
            again = await post(web.http, _with(messages=history, trigger="regenerate-message"))
            replayed = decision(chunks(again.text))
            assert (replayed["route"], replayed["replayed"]) == ("start", True)
            assert answer(chunks(again.text)) == "What?"
            # A failing route: an error chunk with its code and safe message, then [DONE].
            boom = await post(web.http, _with(id="chat-boom", messages=[user("b1", "/boom")]))
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
            body = _with(messages=[user("u1", "hello")], turnId="turn-1")
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
            started = chunks((await post(web.http, _with(id="held"))).text)
            assert decision(started)["to"] == "collecting"
            # The earlier messages the client sends are not taken: the server holds them.
            history = [
                user("u1", CANARY),
                assistant(started[0]["messageId"], CANARY),
                user("u2", "/name Ada"),
            ]
            named = chunks((await post(web.http, _with(id="held", messages=history))).text)
            assert answer(named) == "Welcome, Ada."
            stored = await client.get_session("held")
            assert [m.id for m in stored.messages][::2] == ["u1", "u2"]
            assert [m.content for m in stored.messages][::2] == ["/start", "/name Ada"]
            # Regenerate: the held user message is retried, its decision replayed.
            again = _with(id="held", messages=history, trigger="regenerate-message")
            retried = decision(chunks((await post(web.http, again)).text))
            assert (retried["route"], retried["replayed"]) == ("name", True)
            # Submit of a held message with new text: an edit.
            history[2] = user("u2", "/name Bo")
            edit = _with(id="held", messages=history, messageId="u2")
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
            body = _with(messages=[user("u1", SLOW_TEXT)], resumable=True)
            first = asyncio.ensure_future(post(web.http, body))
            path = f"/ai-sdk/{DEFINITION}/chat-1/stream"
            for _ in range(500):
                if model.requests:
                    break
                await asyncio.sleep(0.01)
            async with web.http.stream("GET", path) as watching:
                assert watching.status_code == 200
                assert watching.headers["x-vercel-ai-ui-message-stream"] == "v1"
                cancel = await web.http.delete(path)
                assert cancel.status_code == 204
                watched = chunks((await watching.aread()).decode())
            assert watched[-2]["type"] == "error"
            assert watched[-2]["errorText"].startswith("cancelled: ")
            started = chunks((await first).text)
            assert started[-2] == watched[-2]
            assert (await web.http.get(path)).status_code == 204
            assert (await web.http.delete(path)).status_code == 204

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
            foreign = await post(web.http, _with(id="chat-2"), origin="https://elsewhere.example")
            assert "access-control-allow-origin" not in foreign.headers
            before = web.env.dump()
            await web.env.server.health.set("", health_pb2.HealthCheckResponse.NOT_SERVING)
            refused = await post(web.http, _with(id="chat-3"))
            assert refused.status_code == 503
            assert refused.headers["retry-after"] == "1"
            assert refused.json()["error"]["code"] == "shutting_down"
            assert web.env.dump() == before

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
            body = _with(messages=[user("u1", CANARY)])
            ok = await post(web.http, body, traceparent=traceparent)
            assert CANARY not in ok.text
            await post(web.http, _with(id="chat-b", messages=[user("b1", "/boom")]))
            assert (await post(web.http, _with(id=f"{CANARY} x"))).status_code == 400
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


def test_requests_over_the_limits_are_refused(tmp_path: Path, model: FakeModelServer) -> None:
    async def scenario() -> None:
        async with served(tmp_path, model, max_request_bytes=64 * 1024) as web:
            before = web.env.dump()
            body = _with(messages=[user("u1", CANARY * 4000)])  # over 64 KiB
            large = await post(web.http, body)
            assert large.status_code == 413
            assert large.json()["error"]["field"] == "body"
            body = _with(messages=[user("u1", "x" * 40_000)])  # over the 32 KiB of a message
            long = await post(web.http, body)
            assert long.status_code == 429
            error = long.json()["error"]
            assert (error["code"], error["field"]) == ("limit_exceeded", "messages[0].parts")
            assert "dispatch" not in error["message"]
            assert web.env.dump() == before
            assert CANARY not in large.text + long.text

    run(scenario())
