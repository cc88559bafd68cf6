"""The server interceptor: a SERVER span and a call duration by the current RPC conventions,
continuing the caller's trace; client mistakes are no server errors; none for probes."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable

import grpc
import pytest
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection, reflection_pb2, reflection_pb2_grpc
from opentelemetry import trace
from opentelemetry.sdk.metrics.export import HistogramDataPoint
from opentelemetry.sdk.trace.sampling import ALWAYS_ON
from opentelemetry.trace import SpanKind, StatusCode

from agentskit_chat.telemetry import OtelObserver, server_interceptors

from .conftest import CountingSampler, InMemory, sampled_by
from .reports import REPORTS

SERVICE = "agentskit.test.Probe"
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
CLIENT_SPAN_ID = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{CLIENT_SPAN_ID}-01"
Probe = grpc.aio.UnaryStreamMultiCallable[bytes, bytes]
Unary = grpc.aio.UnaryUnaryMultiCallable[bytes, bytes]


def probe_handler(observer: OtelObserver, seen: list[str]) -> grpc.GenericRpcHandler:
    async def turn(
        request: bytes, context: grpc.aio.ServicerContext[bytes, bytes]
    ) -> AsyncIterator[bytes]:
        yield b"started"
        observer.turn_finished(REPORTS["agentic"])  # after the turn's last event, as the service
        yield b"done"

    async def fail(request: bytes, context: grpc.aio.ServicerContext[bytes, bytes]) -> bytes:
        span = trace.get_current_span().get_span_context()
        seen.append(trace.format_trace_id(span.trace_id) if span.is_valid else "")
        code = grpc.StatusCode[request.decode()]
        if code == grpc.StatusCode.OK:
            return b"fine"
        if code == grpc.StatusCode.UNKNOWN:
            raise RuntimeError("handler bug")
        await context.abort(code, "refused")
        raise AssertionError("unreachable")

    return grpc.method_handlers_generic_handler(
        SERVICE,
        {
            "Turn": grpc.unary_stream_rpc_method_handler(turn),
            "Fail": grpc.unary_unary_rpc_method_handler(fail),
        },
    )


async def serving(
    sinks: InMemory,
    body: Callable[[grpc.aio.Channel], Awaitable[None]],
    *,
    providers: bool = True,
    seen: list[str] | None = None,
    rpc_spans: bool = True,
) -> None:
    interceptors = (
        server_interceptors(sinks.tracer_provider, sinks.meter_provider, rpc_spans=rpc_spans)
        if providers
        else server_interceptors()
    )
    server = grpc.aio.server(interceptors=interceptors)
    server.add_generic_rpc_handlers((probe_handler(sinks.observer, [] if seen is None else seen),))
    health_pb2_grpc.add_HealthServicer_to_server(health.aio.HealthServicer(), server)
    reflection.enable_server_reflection((SERVICE, health.SERVICE_NAME), server)
    port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            await body(channel)
    finally:
        await server.stop(None)


def durations(sinks: InMemory) -> list[HistogramDataPoint]:
    data = sinks.reader.get_metrics_data()
    found: list[HistogramDataPoint] = []
    for resource in data.resource_metrics if data else ():
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name == "rpc.server.call.duration":
                    assert metric.unit == "s"
                    found.extend(metric.data.data_points)  # type: ignore[arg-type]
    return found


def test_server_span_continues_traceparent_and_parents_the_turn(in_memory: InMemory) -> None:
    async def body(channel: grpc.aio.Channel) -> None:
        call: Probe = channel.unary_stream(f"/{SERVICE}/Turn")
        answers = [answer async for answer in call(b"", metadata=(("traceparent", TRACEPARENT),))]
        assert answers == [b"started", b"done"]

    asyncio.run(serving(in_memory, body))
    spans = {span.name: span for span in in_memory.spans.get_finished_spans()}
    assert set(spans) == {f"{SERVICE}/Turn", "chat.turn submit", "chat gpt-4o-mini"}
    server = spans[f"{SERVICE}/Turn"]
    assert server.kind == SpanKind.SERVER
    assert server.parent is not None
    assert server.parent.is_remote
    assert f"{server.parent.span_id:016x}" == CLIENT_SPAN_ID
    attributes = dict(server.attributes or {})
    assert attributes.pop("network.peer.address") == "127.0.0.1"
    assert isinstance(attributes.pop("network.peer.port"), int)
    assert attributes == {
        "rpc.system.name": "grpc",
        "rpc.method": f"{SERVICE}/Turn",
        "rpc.response.status_code": "OK",
    }
    assert server.status.status_code == StatusCode.UNSET
    turn = spans["chat.turn submit"]
    assert turn.parent is not None
    assert turn.parent.span_id == server.context.span_id
    model = spans["chat gpt-4o-mini"]
    assert model.parent is not None
    assert model.parent.span_id == turn.context.span_id
    for span in spans.values():
        assert f"{span.context.trace_id:032x}" == TRACE_ID
    (point,) = durations(in_memory)
    assert dict(point.attributes or {}) == {
        "rpc.system.name": "grpc",
        "rpc.method": f"{SERVICE}/Turn",
        "rpc.response.status_code": "OK",
    }
    assert point.count == 1
    assert server.end_time is not None
    assert server.start_time is not None
    assert point.sum <= (server.end_time - server.start_time) / 1e9 + 0.01


def test_a_call_without_traceparent_starts_a_trace(in_memory: InMemory) -> None:
    async def body(channel: grpc.aio.Channel) -> None:
        call: Probe = channel.unary_stream(f"/{SERVICE}/Turn")
        assert [answer async for answer in call(b"")] == [b"started", b"done"]

    asyncio.run(serving(in_memory, body))
    spans = {span.name: span for span in in_memory.spans.get_finished_spans()}
    assert spans[f"{SERVICE}/Turn"].parent is None
    turn = spans["chat.turn submit"]
    assert turn.parent is not None
    assert turn.parent.span_id == spans[f"{SERVICE}/Turn"].context.span_id


CLIENT_MISTAKES = (
    "INVALID_ARGUMENT",
    "NOT_FOUND",
    "ABORTED",
    "ALREADY_EXISTS",
    "FAILED_PRECONDITION",
    "RESOURCE_EXHAUSTED",
    "UNAUTHENTICATED",
)


@pytest.mark.parametrize(
    ("code", "error"),
    [
        *((code, False) for code in CLIENT_MISTAKES),
        ("OK", False),
        ("INTERNAL", True),
        ("UNAVAILABLE", True),
        ("UNKNOWN", True),  # the handler raised
    ],
)
def test_client_mistakes_are_not_server_errors(in_memory: InMemory, code: str, error: bool) -> None:
    async def body(channel: grpc.aio.Channel) -> None:
        call: Unary = channel.unary_unary(f"/{SERVICE}/Fail")
        if code == "OK":
            assert await call(code.encode()) == b"fine"
            return
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await call(code.encode())
        assert refused.value.code() == grpc.StatusCode[code]

    asyncio.run(serving(in_memory, body))
    (span,) = in_memory.spans.get_finished_spans()
    assert span.attributes is not None
    assert span.attributes["rpc.response.status_code"] == code
    assert list(span.events) == []  # never an exception event or stack trace
    assert span.status.status_code == (StatusCode.ERROR if error else StatusCode.UNSET)
    assert span.attributes.get("error.type") == (code if error else None)
    (point,) = durations(in_memory)
    assert (point.attributes or {}).get("rpc.response.status_code") == code
    assert (point.attributes or {}).get("error.type") == (code if error else None)


def test_without_providers_the_handler_still_sees_the_callers_trace(in_memory: InMemory) -> None:
    seen: list[str] = []

    async def body(channel: grpc.aio.Channel) -> None:
        call: Unary = channel.unary_unary(f"/{SERVICE}/Fail")
        assert await call(b"OK", metadata=(("traceparent", TRACEPARENT),)) == b"fine"
        assert await call(b"OK") == b"fine"

    asyncio.run(serving(in_memory, body, providers=False, seen=seen))
    assert seen == [TRACE_ID, ""]  # and nothing of one call leaks into the next
    assert in_memory.spans.get_finished_spans() == ()


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
    assert durations(in_memory) == []


def test_an_unsampled_call_records_no_span_but_its_duration(in_memory: InMemory) -> None:
    async def body(channel: grpc.aio.Channel) -> None:
        call: Probe = channel.unary_stream(f"/{SERVICE}/Turn")
        unsampled = f"00-{TRACE_ID}-{CLIENT_SPAN_ID}-00"
        answers = [answer async for answer in call(b"", metadata=(("traceparent", unsampled),))]
        assert answers == [b"started", b"done"]

    asyncio.run(serving(in_memory, body))
    assert in_memory.spans.get_finished_spans() == ()  # nor the turn's, nor the model's
    (point,) = durations(in_memory)
    assert point.count == 1


def test_without_rpc_spans_the_turn_span_continues_the_caller_and_names_the_method(
    in_memory: InMemory,
) -> None:
    async def body(channel: grpc.aio.Channel) -> None:
        call: Probe = channel.unary_stream(f"/{SERVICE}/Turn")
        answers = [answer async for answer in call(b"", metadata=(("traceparent", TRACEPARENT),))]
        assert answers == [b"started", b"done"]

    asyncio.run(serving(in_memory, body, rpc_spans=False))
    spans = in_memory.spans.get_finished_spans()
    assert not [span for span in spans if span.kind == SpanKind.SERVER]
    (turn,) = [span for span in spans if span.name == "chat.turn submit"]
    assert turn.parent is not None
    assert turn.parent.is_remote
    assert f"{turn.parent.span_id:016x}" == CLIENT_SPAN_ID
    assert turn.context is not None
    assert f"{turn.context.trace_id:032x}" == TRACE_ID
    attributes = dict(turn.attributes or {})
    assert attributes["rpc.method"] == f"{SERVICE}/Turn"
    assert attributes["rpc.system.name"] == "grpc"
    (point,) = durations(in_memory)  # the call's duration is still recorded
    assert dict(point.attributes or {})["rpc.method"] == f"{SERVICE}/Turn"


def test_a_caller_that_sampled_its_trace_out_costs_no_sampling_decision(
    in_memory: InMemory,
) -> None:
    sampler = CountingSampler()
    sampled_by(in_memory, sampler)
    seen: list[str] = []

    async def body(channel: grpc.aio.Channel) -> None:
        call: Unary = channel.unary_unary(f"/{SERVICE}/Fail")
        unsampled = f"00-{TRACE_ID}-{CLIENT_SPAN_ID}-00"
        assert await call(b"OK", metadata=(("traceparent", unsampled),)) == b"fine"
        assert sampler.decisions == 0  # the caller's flags decided: no span was started
        assert await call(b"OK", metadata=(("traceparent", TRACEPARENT),)) == b"fine"
        assert sampler.decisions == 1

    asyncio.run(serving(in_memory, body, seen=seen))
    assert seen == [TRACE_ID, TRACE_ID]  # the unsampled call still continues the caller's trace
    (span,) = in_memory.spans.get_finished_spans()  # only the sampled call's
    assert span.context is not None
    assert span.context.trace_flags.sampled
    assert sum(point.count for point in durations(in_memory)) == 2


def test_a_sampler_that_records_unsampled_callers_still_decides(in_memory: InMemory) -> None:
    sampler = CountingSampler(remote_parent_not_sampled=ALWAYS_ON)
    sampled_by(in_memory, sampler)

    async def body(channel: grpc.aio.Channel) -> None:
        call: Unary = channel.unary_unary(f"/{SERVICE}/Fail")
        unsampled = f"00-{TRACE_ID}-{CLIENT_SPAN_ID}-00"
        assert await call(b"OK", metadata=(("traceparent", unsampled),)) == b"fine"

    asyncio.run(serving(in_memory, body))
    assert sampler.decisions == 1
    (span,) = in_memory.spans.get_finished_spans()
    assert span.kind == SpanKind.SERVER
    assert span.parent is not None
    assert f"{span.parent.span_id:016x}" == CLIENT_SPAN_ID
