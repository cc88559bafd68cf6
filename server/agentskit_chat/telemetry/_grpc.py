"""The gRPC server's own telemetry: one SERVER span and one duration per call, by the
current RPC semantic conventions, continuing the caller's W3C trace context.

A lean interceptor of our own rather than `opentelemetry-instrumentation-grpc`'s: that
one still writes deprecated attributes (`rpc.system`, `rpc.service`, `net.peer.*`), marks
every non-OK status as an error with an exception event and its stack trace (so a client
sending a bad request looks like a server fault), records no `rpc.server.call.duration`,
and builds a new handler and servicer-context wrapper for every call. Here each method's
handler is wrapped once, its attributes are computed once, and a call costs one span
(none of its attributes computed when the sampler drops it, and no span at all when the
caller's traceparent says not sampled and the sampler follows the caller) and one
histogram point.

Conventions: https://opentelemetry.io/docs/specs/semconv/rpc/rpc-spans/ and
https://opentelemetry.io/docs/specs/semconv/rpc/grpc/ (which status codes are server
errors).
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextvars import Token
from typing import TYPE_CHECKING, Any, Final

import grpc
from opentelemetry import context, metrics, propagate, trace
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF
from opentelemetry.trace import SpanKind, Status, StatusCode

from agentskit_chat import __version__

from . import _names as n
from ._spans import rpc_call_context

UNTRACED_SERVICES = ("grpc.health.v1.Health", "grpc.reflection.")
"""Service-name prefixes whose calls get no span and no metric: health probes, reflection."""
_UNTRACED_METHODS = tuple(f"/{prefix}" for prefix in UNTRACED_SERVICES)

SERVER_ERRORS: Final = frozenset(
    {
        grpc.StatusCode.UNKNOWN,
        grpc.StatusCode.DEADLINE_EXCEEDED,
        grpc.StatusCode.UNIMPLEMENTED,
        grpc.StatusCode.INTERNAL,
        grpc.StatusCode.UNAVAILABLE,
        grpc.StatusCode.DATA_LOSS,
    }
)
"""The codes that mark a gRPC server span as an error; the others are the caller's doing."""
_CODES: Final = {code.value[0]: code for code in grpc.StatusCode}
_PROPAGATION_KEYS: Final = frozenset({"traceparent", "tracestate", "baggage"})
RPC_SECONDS_BUCKETS: Final = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.0075,
    0.01,
    0.025,
    0.05,
    0.075,
    0.1,
    0.25,
    0.5,
    0.75,
    1.0,
    2.5,
    5.0,
    7.5,
    10.0,
    30.0,
    60.0,
)
"""Sub-millisecond deterministic calls up to streamed model turns of a minute."""

if TYPE_CHECKING:
    Handler = grpc.RpcMethodHandler[Any, Any]
Behavior = Callable[..., Any]


def rpc_instruments(
    tracer_provider: trace.TracerProvider | None, meter_provider: metrics.MeterProvider | None
) -> tuple[trace.Tracer | None, metrics.Histogram | None]:
    """The tracer of SERVER spans and the `rpc.server.call.duration` histogram, each None
    when its provider is; shared by every transport, so their calls aggregate together."""
    tracer = None if tracer_provider is None else tracer_provider.get_tracer(n.SCOPE, __version__)
    duration = (
        None
        if meter_provider is None
        else meter_provider.get_meter(n.SCOPE, __version__).create_histogram(
            n.RPC_SERVER_CALL_DURATION,
            unit="s",
            description="Measures the duration of an incoming Remote Procedure Call (RPC).",
            explicit_bucket_boundaries_advisory=RPC_SECONDS_BUCKETS,
        )
    )
    return tracer, duration


def drops_unsampled_callers(tracer: trace.Tracer | None) -> bool:
    """Whether `tracer` is sure to drop a call whose caller's traceparent says not sampled,
    and to record nothing about dropping it, so that such a call can skip `start_span`.

    True for the SDK's parent-based samplers with their default delegate for an unsampled
    remote parent, which is every `OTEL_TRACES_SAMPLER` but `always_on`, `always_off` and
    `traceidratio`, when the SDK counts no spans of its own. The call then continues the
    caller's unsampled context as it came, rather than under a non-recording span of the
    SDK's that carries the same trace id and flags.
    """
    if tracer is None:
        return False
    sampler = getattr(tracer, "sampler", None)
    own_metrics = getattr(tracer, "_tracer_metrics", None)
    return (
        getattr(sampler, "_remote_parent_not_sampled", None) is ALWAYS_OFF
        and type(own_metrics).__name__ == "NoOpTracerMetrics"
    )


def unsampled_caller(incoming: context.Context) -> bool:
    """Whether `incoming` carries the caller's span context and it says not sampled."""
    caller = trace.get_current_span(incoming).get_span_context()
    return caller.is_valid and not caller.trace_flags.sampled


def traced(details: grpc.HandlerCallDetails) -> bool:
    """Whether a call gets a span: everything but health probes and reflection.

    One prefix test on the method path (`/package.Service/Method`), as every call pays it.
    """
    method: str = details.method
    return not method.startswith(_UNTRACED_METHODS)


def incoming_context(metadata: Any) -> context.Context | None:
    """The caller's trace context from call metadata; None when it sent none.

    Only the propagation keys are handed to the global propagator (W3C trace context and
    baggage by default), so a call without them costs one scan of its metadata.
    """
    carrier: dict[str, str] | None = None
    for key, value in metadata or ():
        if key in _PROPAGATION_KEYS and isinstance(value, str):
            if carrier is None:
                carrier = {}
            carrier[key] = value
    return None if carrier is None else propagate.extract(carrier)


class ServerTelemetry(grpc.aio.ServerInterceptor):
    """SERVER spans (when given a tracer provider) and `rpc.server.call.duration` (when
    given a meter provider) for every call but health probes and reflection.

    With neither, it still continues the caller's trace context, so the turn log line
    carries the caller's trace id without any span being recorded. That works because
    grpc.aio runs the interceptors and then the handler in one task: a context attached
    here is current in the handler and ends with the call's task.

    With `rpc_spans` false (a mesh proxy makes the call's span), a call gets no SERVER
    span: the caller's trace context is continued directly and the call's method named in
    it, so the turn span becomes the caller's span's child and carries `rpc.method`.
    """

    def __init__(
        self,
        tracer_provider: trace.TracerProvider | None = None,
        meter_provider: metrics.MeterProvider | None = None,
        *,
        rpc_spans: bool = True,
    ) -> None:
        self._tracer, self._duration = rpc_instruments(
            tracer_provider if rpc_spans else None, meter_provider
        )
        self._name_calls = tracer_provider is not None and not rpc_spans
        """Whether calls are named in the context for the turn span (no SERVER span)."""
        self._wrapped: dict[str, tuple[Handler, Handler]] = {}

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[Handler | None]],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> Handler | None:
        """The method's handler, wrapped once per method to record each call."""
        handler = await continuation(handler_call_details)
        method: str = handler_call_details.method
        if handler is None or method.startswith(_UNTRACED_METHODS):
            return handler
        if self._tracer is None and self._duration is None and not self._name_calls:
            incoming = incoming_context(handler_call_details.invocation_metadata)
            if incoming is not None:
                context.attach(incoming)  # Detached with the call's task and its context.
            return handler
        known = self._wrapped.get(method)
        if known is not None and known[0] is handler:
            return known[1]
        wrapped = _Method(method, self._tracer, self._duration, self._name_calls).wrap(handler)
        self._wrapped[method] = (handler, wrapped)
        return wrapped


class _Method:
    """Records the calls of one method; its attributes are computed once, here."""

    def __init__(
        self,
        path: str,
        tracer: trace.Tracer | None,
        duration: metrics.Histogram | None,
        name_calls: bool = False,
    ) -> None:
        name = path.lstrip("/")
        self._name = name
        self._tracer = tracer
        self._duration = duration
        self._name_calls = name_calls
        self._skip_unsampled = drops_unsampled_callers(tracer)
        self._span_attributes = {n.RPC_SYSTEM_NAME: "grpc", n.RPC_METHOD: name}
        self._metric_attributes: dict[grpc.StatusCode, dict[str, str]] = {}

    def wrap(self, handler: Handler) -> Handler:
        """The same handler with each call recorded."""
        if handler.unary_unary is not None:
            return grpc.unary_unary_rpc_method_handler(
                self._unary(handler.unary_unary),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        if handler.unary_stream is not None:
            return grpc.unary_stream_rpc_method_handler(
                self._stream(handler.unary_stream),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        if handler.stream_unary is not None:
            return grpc.stream_unary_rpc_method_handler(
                self._unary(handler.stream_unary),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        if handler.stream_stream is not None:
            return grpc.stream_stream_rpc_method_handler(
                self._stream(handler.stream_stream),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        return handler  # pragma: no cover - grpc has no fifth kind of handler

    def _unary(self, behavior: Behavior) -> Behavior:
        async def call(request: Any, servicer_context: grpc.aio.ServicerContext[Any, Any]) -> Any:
            call = self._begin(servicer_context)
            code = grpc.StatusCode.OK
            try:
                return await behavior(request, servicer_context)
            except BaseException as exc:
                code = _failure_code(exc)
                raise
            finally:
                self._end(call, _final_code(servicer_context, code))

        return call

    def _stream(self, behavior: Behavior) -> Behavior:
        if not inspect.isasyncgenfunction(behavior):
            return self._unary(behavior)  # Writes with `context.write` and returns.

        async def call(
            request: Any, servicer_context: grpc.aio.ServicerContext[Any, Any]
        ) -> AsyncIterator[Any]:
            call = self._begin(servicer_context)
            code = grpc.StatusCode.OK
            try:
                async for response in behavior(request, servicer_context):
                    yield response
            except BaseException as exc:
                code = _failure_code(exc)
                raise
            finally:
                self._end(call, _final_code(servicer_context, code))

        return call

    def _begin(self, servicer_context: grpc.aio.ServicerContext[Any, Any]) -> _Call:
        started = time.perf_counter_ns()
        incoming = incoming_context(servicer_context.invocation_metadata())
        span: trace.Span | None = None
        if self._tracer is not None and not (
            self._skip_unsampled and incoming is not None and unsampled_caller(incoming)
        ):
            span = self._tracer.start_span(
                self._name, incoming, kind=SpanKind.SERVER, record_exception=False
            )
            if span.is_recording():
                span.set_attributes(
                    {**self._span_attributes, **peer_attributes(servicer_context.peer())}
                )
            incoming = trace.set_span_in_context(span, incoming)
        elif self._name_calls:
            incoming = rpc_call_context("grpc", self._name, incoming)
        token = None if incoming is None else context.attach(incoming)
        return _Call(started, span, token)

    def _end(self, call: _Call, code: grpc.StatusCode) -> None:
        if call.token is not None:
            context.detach(call.token)
        span = call.span
        if span is not None:
            if span.is_recording():
                span.set_attribute(n.RPC_RESPONSE_STATUS_CODE, code.name)
                if code in SERVER_ERRORS:
                    span.set_attribute(n.ERROR_TYPE, code.name)
                    span.set_status(Status(StatusCode.ERROR))
            span.end()
        if self._duration is not None:
            seconds = (time.perf_counter_ns() - call.started) / 1e9
            self._duration.record(seconds, self._attributes(code))

    def _attributes(self, code: grpc.StatusCode) -> dict[str, str]:
        attributes = self._metric_attributes.get(code)
        if attributes is None:
            attributes = {
                n.RPC_SYSTEM_NAME: "grpc",
                n.RPC_METHOD: self._name,
                n.RPC_RESPONSE_STATUS_CODE: code.name,
            }
            if code in SERVER_ERRORS:
                attributes[n.ERROR_TYPE] = code.name
            self._metric_attributes[code] = attributes
        return attributes


class _Call:
    __slots__ = ("span", "started", "token")

    def __init__(
        self, started: int, span: trace.Span | None, token: Token[context.Context] | None
    ) -> None:
        self.started = started
        self.span = span
        self.token = token


def _failure_code(exc: BaseException) -> grpc.StatusCode:
    """The status of a call its handler left with `exc`, before the context says more."""
    if isinstance(exc, grpc.aio.AbortError):
        return grpc.StatusCode.UNKNOWN  # `_final_code` reads the aborted code.
    if isinstance(exc, GeneratorExit | asyncio.CancelledError):
        return grpc.StatusCode.CANCELLED
    return grpc.StatusCode.UNKNOWN


def _final_code(
    servicer_context: grpc.aio.ServicerContext[Any, Any], fallback: grpc.StatusCode
) -> grpc.StatusCode:
    """The code the handler set or aborted with, else `fallback`."""
    code: object = servicer_context.code()
    if code is None:
        return fallback
    if isinstance(code, grpc.StatusCode):
        return code
    return _CODES.get(code, fallback) if isinstance(code, int) else fallback


def peer_attributes(peer: str) -> dict[str, str | int]:
    """`network.peer.address` and `.port` from a gRPC peer such as `ipv4:127.0.0.1:5000`."""
    kind, _, where = peer.partition(":")
    if kind in ("ipv4", "ipv6"):
        address, _, port = where.rpartition(":")
        if port.isdigit():
            return {n.NETWORK_PEER_ADDRESS: address.strip("[]"), n.NETWORK_PEER_PORT: int(port)}
        return {n.NETWORK_PEER_ADDRESS: address.strip("[]")}
    if kind == "unix":
        return {n.NETWORK_PEER_ADDRESS: where}
    return {}


def server_interceptors(
    tracer_provider: trace.TracerProvider | None = None,
    meter_provider: metrics.MeterProvider | None = None,
    *,
    rpc_spans: bool = True,
) -> list[grpc.aio.ServerInterceptor]:
    """Interceptors for `grpc.aio.server(interceptors=...)`: see ServerTelemetry."""
    return [ServerTelemetry(tracer_provider, meter_provider, rpc_spans=rpc_spans)]
