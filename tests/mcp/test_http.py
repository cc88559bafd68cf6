"""ServerTools over streamable HTTP: the bearer token, the trace context, a server gone."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from agentskit_chat.mcp import SERVER_GONE, ServerTools, ServerToolsError, ToolOutcome
from agentskit_chat.telemetry import ToolTelemetry

from .conftest import BOUND, TOKEN, HttpServer, definition, records


def test_calls_go_over_http_with_the_token_from_its_file(
    http_server: HttpServer, record: Path, tmp_path: Path
) -> None:
    token_file = tmp_path / "orders.token"
    token_file.write_text(TOKEN + "\n", encoding="utf-8")
    chat = definition({"url": http_server.url, "token_file": str(token_file)})

    async def scenario() -> None:
        tools = ServerTools([chat])
        async with asyncio.timeout(BOUND):
            await tools.start()
            try:
                assert {spec.name for spec in tools.specs()} >= {"lookup_order", "count"}
                outcome = await tools.call(
                    "lookup_order", '{"order_id": "H-1"}', turn_id="t", call_id="c"
                )
                assert outcome == ToolOutcome("order H-1: 2 items, shipped")
                counted = await tools.call("count", '{"key": "k"}', turn_id="t-2", call_id="c-2")
                assert counted == ToolOutcome("counted k")
            finally:
                await tools.close()

    asyncio.run(scenario())
    [line] = records(record)
    assert (line["meta"]["agentskit.turn_id"], line["meta"]["agentskit.call_id"]) == ("t-2", "c-2")


def test_a_wrong_token_is_refused_at_start_naming_the_server(
    http_server: HttpServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ORDERS_TEST_TOKEN", "not-the-token")
    chat = definition({"url": http_server.url, "token_env": "ORDERS_TEST_TOKEN"})

    async def scenario() -> None:
        async with asyncio.timeout(BOUND):
            with pytest.raises(ServerToolsError) as error:
                await ServerTools([chat], connect_timeout=BOUND / 2).start()
        assert "MCP server 'orders' cannot be reached" in str(error.value)
        assert "not-the-token" not in str(error.value)

    asyncio.run(scenario())


def test_an_unset_token_variable_is_refused_naming_it(http_server: HttpServer) -> None:
    chat = definition({"url": http_server.url, "token_env": "ORDERS_TEST_UNSET_TOKEN"})

    async def scenario() -> None:
        with pytest.raises(ServerToolsError, match="ORDERS_TEST_UNSET_TOKEN is not set"):
            await ServerTools([chat]).start()

    asyncio.run(scenario())


def test_a_missing_token_file_is_refused_naming_it(http_server: HttpServer, tmp_path: Path) -> None:
    missing = tmp_path / "absent.token"
    chat = definition({"url": http_server.url, "token_file": str(missing)})

    async def scenario() -> None:
        with pytest.raises(ServerToolsError) as error:
            await ServerTools([chat]).start()
        assert "'orders'" in str(error.value)
        assert str(missing) in str(error.value)

    asyncio.run(scenario())


def test_the_call_span_context_reaches_the_server_as_traceparent(
    http_server: HttpServer, record: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ORDERS_TEST_TOKEN", TOKEN)
    chat = definition({"url": http_server.url, "token_env": "ORDERS_TEST_TOKEN"})
    spans = InMemorySpanExporter()
    provider = TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(SimpleSpanProcessor(spans))

    async def scenario() -> None:
        tools = ServerTools([chat], observer=ToolTelemetry(provider))
        async with asyncio.timeout(BOUND):
            await tools.start()
            try:
                await tools.call("count", json.dumps({"key": "traced"}), turn_id="t", call_id="c")
            finally:
                await tools.close()

    asyncio.run(scenario())
    [span] = [s for s in spans.get_finished_spans() if s.name == "execute_tool count"]
    [line] = records(record)
    version, trace_id, _parent, _flags = line["traceparent"].split("-")
    assert version == "00"
    assert span.context is not None
    assert int(trace_id, 16) == span.context.trace_id
    provider.shutdown()


def test_an_http_server_dying_mid_call_is_server_gone(
    http_server: HttpServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ORDERS_TEST_TOKEN", TOKEN)
    chat = definition({"url": http_server.url, "token_env": "ORDERS_TEST_TOKEN"})

    async def scenario() -> None:
        tools = ServerTools([chat], reconnect_backoff=0.01)
        async with asyncio.timeout(BOUND):
            await tools.start()
            try:
                outcome = await tools.call("die", "{}", turn_id="t", call_id="c")
                assert (outcome.is_error, outcome.error_type) == (True, SERVER_GONE)
                later = await tools.call(
                    "lookup_order", '{"order_id": "1"}', turn_id="t", call_id="d"
                )
                assert (later.is_error, later.error_type) == (True, SERVER_GONE)
            finally:
                await tools.close()

    asyncio.run(scenario())
