"""The HTTP listener's telemetry: a SERVER span per Connect or gRPC-Web call, continuing the
browser's `traceparent`, with the turn span inside it; client mistakes are no server errors."""

from __future__ import annotations

import json
from pathlib import Path

from opentelemetry.sdk.metrics.export import HistogramDataPoint
from opentelemetry.trace import SpanKind, StatusCode

from agentskit.chat.v1 import chat_pb2 as pb
from agentskit_chat.telemetry._connect import ConnectTelemetry
from tests.transport.conftest import CANARY, run
from tests.transport.web.conftest import web_live
from tests.transport.web.wire import grpc_web, stream, unary

from .conftest import CountingSampler, InMemory, sampled_by

TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
BROWSER_SPAN_ID = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{BROWSER_SPAN_ID}-01"


def test_a_connect_turn_continues_the_browsers_trace(tmp_path: Path, in_memory: InMemory) -> None:
    telemetry = ConnectTelemetry(in_memory.tracer_provider, in_memory.meter_provider)

    async def scenario() -> None:
        async with web_live(
            tmp_path, observer=in_memory.observer, http_interceptors=[telemetry]
        ) as web:
            created = await unary(web.http, "CreateSession", {"definitionId": "probe"})
            sid = created.json()["session"]["sessionId"]
            result = await stream(
                web.http,
                "StreamTurn",
                {"sessionId": sid, "turnId": "t1", "submit": {"content": CANARY}},
                traceparent=TRACEPARENT,
            )
            assert result.error is None

    run(scenario())
    spans = in_memory.spans.get_finished_spans()
    (server,) = [s for s in spans if s.name == "agentskit.chat.v1.ChatService/StreamTurn"]
    assert server.kind is SpanKind.SERVER
    assert server.context is not None
    assert f"{server.context.trace_id:032x}" == TRACE_ID
    assert server.parent is not None
    assert f"{server.parent.span_id:016x}" == BROWSER_SPAN_ID
    attributes = dict(server.attributes or {})
    assert attributes["rpc.system.name"] == "connect_rpc"
    assert attributes["rpc.method"] == "agentskit.chat.v1.ChatService/StreamTurn"
    assert attributes["http.request.method"] == "POST"
    assert attributes["url.path"] == "/agentskit.chat.v1.ChatService/StreamTurn"
    assert attributes["rpc.response.status_code"] == "OK"
    (turn,) = [s for s in spans if s.name.startswith("chat.turn")]
    assert turn.parent is not None
    assert turn.parent.span_id == server.context.span_id
    for span in spans:
        assert CANARY not in json.dumps(dict(span.attributes or {}))
    data = in_memory.reader.get_metrics_data()
    assert data is not None
    points = [
        point
        for metric in data.resource_metrics[0].scope_metrics[0].metrics
        if metric.name == "rpc.server.call.duration"
        for point in metric.data.data_points
    ]
    assert all(isinstance(p, HistogramDataPoint) for p in points)
    systems = {dict(p.attributes or {})["rpc.system.name"] for p in points}
    assert systems == {"connect_rpc"}


def test_client_mistakes_are_no_server_errors(tmp_path: Path, in_memory: InMemory) -> None:
    telemetry = ConnectTelemetry(in_memory.tracer_provider, in_memory.meter_provider)

    async def scenario() -> None:
        async with web_live(tmp_path, http_interceptors=[telemetry]) as web:
            missing = await grpc_web(
                web.http, "GetSession", pb.GetSessionRequest(session_id="missing")
            )
            assert missing.code == 5

    run(scenario())
    (span,) = [s for s in in_memory.spans.get_finished_spans() if s.kind is SpanKind.SERVER]
    attributes = dict(span.attributes or {})
    assert attributes["rpc.system.name"] == "grpc_web"
    assert attributes["rpc.response.status_code"] == "NOT_FOUND"
    assert span.status.status_code is not StatusCode.ERROR
    assert "error.type" not in attributes


def test_a_browser_that_sampled_its_trace_out_gets_no_span_but_its_counts(
    tmp_path: Path, in_memory: InMemory
) -> None:
    sampler = CountingSampler()
    sampled_by(in_memory, sampler)
    telemetry = ConnectTelemetry(in_memory.tracer_provider, in_memory.meter_provider)

    async def scenario() -> None:
        async with web_live(
            tmp_path, observer=in_memory.observer, http_interceptors=[telemetry]
        ) as web:
            created = await unary(web.http, "CreateSession", {"definitionId": "probe"})
            sid = created.json()["session"]["sessionId"]
            result = await stream(
                web.http,
                "StreamTurn",
                {"sessionId": sid, "turnId": "t1", "submit": {"content": "hello"}},
                traceparent=f"00-{TRACE_ID}-{BROWSER_SPAN_ID}-00",
            )
            assert result.error is None

    run(scenario())
    (created,) = in_memory.spans.get_finished_spans()  # nothing of the turn's call
    assert created.name == "agentskit.chat.v1.ChatService/CreateSession"  # no traceparent: a root
    assert sampler.decisions == 1  # that root's alone
    data = in_memory.reader.get_metrics_data()
    assert data is not None
    counted = {
        metric.name: sum(getattr(point, "count", 0) for point in metric.data.data_points)
        for metric in data.resource_metrics[0].scope_metrics[0].metrics
    }
    assert counted["rpc.server.call.duration"] == 2
    assert counted["agentskit.chat.turn.duration"] == 1
