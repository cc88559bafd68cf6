"""The server interceptor: a SERVER span continuing the caller's trace, none for probes."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection, reflection_pb2, reflection_pb2_grpc
from opentelemetry.trace import SpanKind

from agentskit_chat.telemetry import OtelObserver, server_interceptors

from .conftest import InMemory
from .reports import REPORTS

SERVICE = "agentskit.test.Probe"
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
CLIENT_SPAN_ID = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{CLIENT_SPAN_ID}-01"
Probe = grpc.aio.UnaryStreamMultiCallable[bytes, bytes]


def probe_handler(observer: OtelObserver) -> grpc.GenericRpcHandler:
    async def turn(
        request: bytes, context: grpc.aio.ServicerContext[bytes, bytes]
    ) -> AsyncIterator[bytes]:
        yield b"started"
        observer.turn_finished(REPORTS["agentic"])  # after the turn's last event, as the service
        yield b"done"

    return grpc.method_handlers_generic_handler(
        SERVICE, {"Turn": grpc.unary_stream_rpc_method_handler(turn)}
    )


async def serving(sinks: InMemory, body: Callable[[grpc.aio.Channel], Awaitable[None]]) -> None:
    server = grpc.aio.server(interceptors=server_interceptors(sinks.tracer_provider))
    server.add_generic_rpc_handlers((probe_handler(sinks.observer),))
    health_pb2_grpc.add_HealthServicer_to_server(health.aio.HealthServicer(), server)
    reflection.enable_server_reflection((SERVICE, health.SERVICE_NAME), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            await body(channel)
    finally:
        await server.stop(None)


def test_server_span_continues_traceparent_and_parents_the_turn(in_memory: InMemory) -> None:
    async def body(channel: grpc.aio.Channel) -> None:
        call: Probe = channel.unary_stream(f"/{SERVICE}/Turn")
        answers = [answer async for answer in call(b"", metadata=(("traceparent", TRACEPARENT),))]
        assert answers == [b"started", b"done"]

    asyncio.run(serving(in_memory, body))
    spans = {span.name: span for span in in_memory.spans.get_finished_spans()}
    assert set(spans) == {f"/{SERVICE}/Turn", "chat.turn submit", "chat gpt-4o-mini"}
    server = spans[f"/{SERVICE}/Turn"]
    assert server.kind == SpanKind.SERVER
    assert server.parent is not None
    assert server.parent.is_remote
    assert f"{server.parent.span_id:016x}" == CLIENT_SPAN_ID
    turn = spans["chat.turn submit"]
    assert turn.parent is not None
    assert turn.parent.span_id == server.context.span_id
    model = spans["chat gpt-4o-mini"]
    assert model.parent is not None
    assert model.parent.span_id == turn.context.span_id
    for span in spans.values():
        assert f"{span.context.trace_id:032x}" == TRACE_ID


def test_a_call_without_traceparent_starts_a_trace(in_memory: InMemory) -> None:
    async def body(channel: grpc.aio.Channel) -> None:
        call: Probe = channel.unary_stream(f"/{SERVICE}/Turn")
        assert [answer async for answer in call(b"")] == [b"started", b"done"]

    asyncio.run(serving(in_memory, body))
    spans = {span.name: span for span in in_memory.spans.get_finished_spans()}
    assert spans[f"/{SERVICE}/Turn"].parent is None
    turn = spans["chat.turn submit"]
    assert turn.parent is not None
    assert turn.parent.span_id == spans[f"/{SERVICE}/Turn"].context.span_id


def test_health_checks_and_reflection_make_no_spans(in_memory: InMemory) -> None:
    async def body(channel: grpc.aio.Channel) -> None:
        checked = await health_pb2_grpc.HealthStub(channel).Check(  # type: ignore[attr-defined]
            health_pb2.HealthCheckRequest(service=""),
            metadata=(("traceparent", TRACEPARENT),),
        )
        assert checked.status == health_pb2.HealthCheckResponse.SERVING
        stub = reflection_pb2_grpc.ServerReflectionStub(channel)  # type: ignore[arg-type]
        listing = stub.ServerReflectionInfo(  # type: ignore[operator]
            iter([reflection_pb2.ServerReflectionRequest(list_services="")])
        )
        answers = [answer async for answer in listing]
        assert answers
        assert SERVICE in {s.name for s in answers[0].list_services_response.service}

    asyncio.run(serving(in_memory, body))
    assert in_memory.spans.get_finished_spans() == ()
