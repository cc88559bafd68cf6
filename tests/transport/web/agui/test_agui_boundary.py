"""The AG-UI front at the listener's boundary: malformed input, tokens and tenants, CORS,
drain, telemetry, and no content in logs or spans."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from agentskit_chat.telemetry import HttpTelemetry, OtelObserver
from agentskit_chat.transport import Authenticator, token_digest
from tests.transport.conftest import CANARY, run
from tests.transport.web.agui.runs import post_run, run_input, user
from tests.transport.web.conftest import draining, web_live
from tests.waiting import until_async

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
TRACEPARENT = f"00-{TRACE_ID}-00f067aa0ba902b7-01"
MALFORMED: list[tuple[object, str]] = [
    ({"runId": "r", "messages": []}, "threadId"),
    ({"threadId": CANARY, "runId": 7, "messages": []}, "runId"),
    ({"threadId": "t", "runId": "r", "messages": {"0": CANARY}}, "messages"),
    ({"threadId": "t", "runId": "r", "messages": [CANARY]}, "messages[0]"),
    (
        {"threadId": "t", "runId": "r", "messages": [{"id": "m", "role": CANARY}]},
        "messages[0].role",
    ),
    (
        {"threadId": "t", "runId": "r", "messages": [{"role": "user", "content": CANARY}]},
        "messages[0].id",
    ),
    (
        {"threadId": "t", "runId": "r", "messages": [{"id": "m", "role": "user", "content": 5}]},
        "messages[0].content",
    ),
    (
        {
            "threadId": "t",
            "runId": "r",
            "messages": [
                {"id": "m", "role": "user", "content": [{"type": "binary", "data": CANARY}]}
            ],
        },
        "messages[0].content[0]",
    ),
    ({"threadId": "t", "runId": "r", "messages": [], "tools": CANARY}, "tools"),
    ({"threadId": "bad id!", "runId": "r", "messages": [user("m", CANARY)]}, "threadId"),
    ({"threadId": "t", "runId": "bad id!", "messages": [user("m", CANARY)]}, "runId"),
    ({"threadId": "t", "runId": "r", "messages": [user("bad id!", CANARY)]}, "messages[0].id"),
    ([CANARY], "body"),
    # Lone surrogates: no UTF-8 form, refused where they are read.
    (
        {"threadId": "t", "runId": "r", "messages": [user("m", f"{CANARY} \ud800")]},
        "messages[0].content",
    ),
    (
        {
            "threadId": "t",
            "runId": "r",
            "messages": [
                {"id": "m", "role": "user", "content": [{"type": "text", "text": "\udfff"}]}
            ],
        },
        "messages[0].content[0].text",
    ),
    ({"threadId": "t", "runId": "r", "messages": [user("m\ud800", CANARY)]}, "messages[0].id"),
    ({"threadId": "t\ud800", "runId": "r", "messages": [user("m", CANARY)]}, "threadId"),
    ({"threadId": "t", "runId": "r\ud800", "messages": [user("m", CANARY)]}, "runId"),
    (
        {"threadId": "t", "runId": "r", "messages": [{"id": "m", "role": ["user"]}]},
        "messages[0].role",
    ),
]
DEEP = '{"threadId":"t","runId":"r","messages":[],"state":' + "[" * 50000 + "]" * 50000 + "}"


def test_malformed_input_is_a_400_naming_the_field_and_changes_nothing(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with web_live(tmp_path) as web:
            sid = (await web.env.client.create_session("support")).session_id
            done = await post_run(web.http, "support", run_input(sid, "r0", [user("u", "/start")]))
            assert done.status == 200
            before = web.env.dump()
            for body, field in MALFORMED:
                answer = await post_run(web.http, "support", json.dumps(body).encode())
                assert answer.status == 400, (field, answer.body)
                error = json.loads(answer.body)["error"]
                assert (error["code"], error["field"]) == ("invalid_argument", field)
                assert CANARY not in answer.body.decode()
            broken = await post_run(web.http, "support", f'{{"threadId": "{CANARY}'.encode())
            assert (broken.status, json.loads(broken.body)["error"]["field"]) == (400, "body")
            deep = await post_run(web.http, "support", DEEP.encode())
            assert (deep.status, json.loads(deep.body)["error"]["field"]) == (400, "body")
            # A server-held thread: the new message is checked by the service, named here.
            empty = await post_run(web.http, "support", run_input(sid, "r1", [user("u2", " ")]))
            assert empty.status == 400
            assert json.loads(empty.body)["error"]["field"] == "messages[0].content"
            wrong = await web.http.get(f"/agui/support?{CANARY}")
            assert wrong.status_code == 405
            assert wrong.headers["allow"] == "POST"
            nested = await post_run(web.http, "support/extra", run_input(sid, "r2"))
            assert nested.status == 404
            assert web.env.dump() == before

    run(scenario())


def test_tokens_and_tenants_guard_agui_runs(tmp_path: Path) -> None:
    tokens = tmp_path / "tokens.yaml"
    tokens.write_text(
        "tokens:\n"
        f"  - sha256: {token_digest('alpha-secret')}\n    tenant: alpha\n"
        f"  - sha256: {token_digest('beta-secret')}\n    tenant: beta\n",
        encoding="utf-8",
    )

    async def scenario() -> None:
        async with web_live(
            tmp_path, authenticator=Authenticator(tokens), token="alpha-secret"
        ) as web:
            body = run_input("shared-thread", "r1", [user("u1", "/count")])
            before = web.env.dump()
            for headers in ({}, {"authorization": "Bearer wrong"}):
                refused = await post_run(web.http, "probe", body, headers)
                assert refused.status == 401
                assert json.loads(refused.body)["error"]["code"] == "unauthenticated"
            assert web.env.dump() == before
            alpha = {"authorization": "Bearer alpha-secret"}
            beta = {"authorization": "Bearer beta-secret"}
            assert (await post_run(web.http, "probe", body, alpha)).text() == "counted 1"
            # The same thread id in another tenant is another thread.
            other = await post_run(web.http, "probe", body, beta)
            assert other.text() == "counted 2"
            (decision,) = other.of("CUSTOM")
            assert decision["value"]["replayed"] is False

    run(scenario())


def test_cors_preflight_allows_what_agui_clients_send(tmp_path: Path) -> None:
    async def scenario() -> None:
        origin = "https://chat.example.com"
        async with web_live(tmp_path, cors=frozenset({origin})) as web:
            preflight = await web.http.options(
                "/agui/probe",
                headers={
                    "origin": origin,
                    "access-control-request-method": "POST",
                    "access-control-request-headers": "last-event-id, agentskit-on-disconnect",
                },
            )
            assert preflight.status_code == 204
            allowed = preflight.headers["access-control-allow-headers"].lower()
            assert "last-event-id" in allowed
            assert "agentskit-on-disconnect" in allowed
            answer = await post_run(
                web.http, "probe", run_input("t", "r", [user("u", "/count")]), {"origin": origin}
            )
            assert answer.headers["access-control-allow-origin"] == origin

    run(scenario())


def test_a_draining_server_refuses_new_runs(tmp_path: Path) -> None:
    async def scenario() -> None:
        async with web_live(tmp_path) as web:
            slow = run_input("in-flight", "r", [user("u", "/slow")])
            in_flight = asyncio.create_task(post_run(web.http, "probe", slow))
            await web.env.probe.entered.wait()
            drain = asyncio.create_task(web.env.server.drain(10.0))
            await until_async(draining(web.http), "the drain's 503")
            before = web.env.dump()
            refused = await post_run(web.http, "probe", run_input("t", "r", [user("u", "hi")]))
            assert refused.status == 503
            assert refused.headers["retry-after"] == "1"
            assert json.loads(refused.body)["error"]["code"] == "shutting_down"
            assert web.env.dump() == before
            web.env.probe.gate.set()
            assert (await in_flight).types[-1] == "RUN_FINISHED"
            await drain

    run(scenario())


def test_agui_runs_are_traced_without_content(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    spans = InMemorySpanExporter()
    tracer_provider = TracerProvider(shutdown_on_exit=False)
    tracer_provider.add_span_processor(SimpleSpanProcessor(spans))
    meter_provider = MeterProvider(shutdown_on_exit=False)
    observer = OtelObserver(tracer_provider, meter_provider)
    telemetry = HttpTelemetry(tracer_provider, meter_provider)

    async def scenario() -> None:
        async with web_live(tmp_path, observer=observer, http_telemetry=telemetry) as web:
            body = run_input("traced", "r1", [user("u1", f"{CANARY} tell me")])
            answer = await post_run(web.http, "probe", body, {"traceparent": TRACEPARENT})
            assert answer.types[-1] == "RUN_FINISHED"
            failed = run_input("traced-2", "r1", [user("u1", "/boom")])
            assert (await post_run(web.http, "probe", failed)).types[-1] == "RUN_ERROR"
            bad = run_input("traced-3", "r1", [{"id": "m", "role": CANARY}])
            assert (await post_run(web.http, "probe", bad)).status == 400

    with caplog.at_level(logging.DEBUG):
        run(scenario())
    finished = spans.get_finished_spans()
    servers = [s for s in finished if s.kind is SpanKind.SERVER and "agui" in s.name]
    assert servers, [s.name for s in finished]
    first = servers[0]
    assert first.context is not None
    assert f"{first.context.trace_id:032x}" == TRACE_ID
    turn = next(s for s in finished if s.name.startswith("chat.turn"))
    assert turn.parent is not None
    assert turn.parent.span_id == first.context.span_id
    # The failed turn (its route raised with the canary in its message) is recorded as an
    # error without it: nowhere in names, attributes, status or events.
    assert any(s.status.status_code is StatusCode.ERROR for s in finished)
    for span in finished:
        assert CANARY not in json.dumps(dict(span.attributes or {}), default=str)
        assert CANARY not in span.name
        assert CANARY not in (span.status.description or "")
        for event in span.events:
            assert CANARY not in event.name
            assert CANARY not in json.dumps(dict(event.attributes or {}), default=str)
        for link in span.links:
            assert CANARY not in json.dumps(dict(link.attributes or {}), default=str)
    assert CANARY not in caplog.text
    tracer_provider.shutdown()
    meter_provider.shutdown()
