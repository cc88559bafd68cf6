"""The HTTP listener's telemetry: one SERVER span and one duration per Connect or gRPC-Web
call, continuing the browser's W3C trace context, as `ServerTelemetry` does for gRPC.

A leading metadata interceptor of the Connect application: it starts before the request
body is read and ends with the call's error, in the call's own task, so the context it
attaches is current in the handler (the turn span becomes the SERVER span's child) and
detached when the call ends. The span is named like the gRPC one (`package.Service/Method`)
and carries the HTTP request's method, path and protocol besides the RPC attributes;
`rpc.system.name` says which protocol the browser spoke (`connect_rpc` or `grpc_web`).
"""

from __future__ import annotations

import time
from contextvars import Token
from typing import Any, Final

from connectrpc.code import Code
from connectrpc.errors import ConnectError
from connectrpc.request import RequestContext
from opentelemetry import context, metrics, trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from . import _names as n
from ._grpc import drops_unsampled_callers, incoming_context, rpc_instruments, unsampled_caller
from ._spans import rpc_call_context

SERVER_ERRORS: Final = frozenset(
    {
        Code.UNKNOWN,
        Code.DEADLINE_EXCEEDED,
        Code.UNIMPLEMENTED,
        Code.INTERNAL,
        Code.UNAVAILABLE,
        Code.DATA_LOSS,
    }
)
"""The codes that mark a server span as an error, as for gRPC."""
HTTP_REQUEST_METHOD: Final = "http.request.method"
URL_PATH: Final = "url.path"


class ConnectTelemetry:
    """SERVER spans (with a tracer provider), `rpc.server.call.duration` (with a meter
    provider) and, always, the caller's trace context for the turn log line.

    With `rpc_spans` false there is no SERVER span: the turn span continues the caller's
    trace directly and carries the call's method (see `ServerTelemetry`).
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
        self._skip_unsampled = drops_unsampled_callers(self._tracer)
        self._recording = self._tracer is not None or self._duration is not None

    async def on_start(self, ctx: RequestContext[Any, Any]) -> _Call | None:
        """Continue the caller's trace and start the call's span; None when the call is
        not recorded at all (only its trace context continued)."""
        headers = ctx.request_headers
        incoming = incoming_context(headers.items())
        if not (self._recording or self._name_calls):
            return None if incoming is None else _Call(0, "", "", None, context.attach(incoming))
        method = ctx.method
        name = f"{method.service_name}/{method.name}"
        system = _system(headers.get("content-type", ""))
        span: trace.Span | None = None
        if self._tracer is not None and not (
            self._skip_unsampled and incoming is not None and unsampled_caller(incoming)
        ):
            span = self._tracer.start_span(
                name, incoming, kind=SpanKind.SERVER, record_exception=False
            )
            if span.is_recording():
                span.set_attributes(
                    {
                        n.RPC_SYSTEM_NAME: system,
                        n.RPC_METHOD: name,
                        HTTP_REQUEST_METHOD: ctx.http_method,
                        URL_PATH: f"/{name}",
                    }
                )
                _set_peer(span, ctx.client_address)
            incoming = trace.set_span_in_context(span, incoming)
        elif self._name_calls:
            incoming = rpc_call_context(system, name, incoming)
        token = None if incoming is None else context.attach(incoming)
        return _Call(time.perf_counter_ns(), name, system, span, token)

    async def on_end(
        self, call: _Call | None, ctx: RequestContext[Any, Any], error: Exception | None, /
    ) -> None:
        """End the span with the call's code and record its duration."""
        if call is None:
            return
        if call.token is not None:
            context.detach(call.token)
        if not self._recording:
            return
        code = _code(error)
        span = call.span
        if span is not None:
            if span.is_recording():
                span.set_attribute(n.RPC_RESPONSE_STATUS_CODE, code)
                if error is not None and _connect_code(error) in SERVER_ERRORS:
                    span.set_attribute(n.ERROR_TYPE, code)
                    span.set_status(Status(StatusCode.ERROR))
            span.end()
        if self._duration is not None:
            seconds = (time.perf_counter_ns() - call.started) / 1e9
            attributes = {
                n.RPC_SYSTEM_NAME: call.system,
                n.RPC_METHOD: call.name,
                n.RPC_RESPONSE_STATUS_CODE: code,
            }
            if error is not None and _connect_code(error) in SERVER_ERRORS:
                attributes[n.ERROR_TYPE] = code
            self._duration.record(seconds, attributes)


class _Call:
    __slots__ = ("name", "span", "started", "system", "token")

    def __init__(
        self,
        started: int,
        name: str,
        system: str,
        span: trace.Span | None,
        token: Token[context.Context] | None,
    ) -> None:
        self.started = started
        self.name = name
        self.system = system
        self.span = span
        self.token = token


def _system(content_type: str) -> str:
    return "grpc_web" if content_type.startswith("application/grpc-web") else "connect_rpc"


def _connect_code(error: Exception) -> Code:
    return error.code if isinstance(error, ConnectError) else Code.UNKNOWN


def _code(error: Exception | None) -> str:
    """The gRPC name of the call's code (`OK`, `NOT_FOUND`, `CANCELLED`...), as the gRPC
    transport's spans and metrics name it, so both transports aggregate together."""
    if error is None:
        return "OK"
    code = _connect_code(error)
    return "CANCELLED" if code is Code.CANCELED else code.name


def _set_peer(span: trace.Span, address: str | None) -> None:
    if not address:
        return
    host, _, port = address.rpartition(":")
    span.set_attribute(n.NETWORK_PEER_ADDRESS, host.strip("[]"))
    if port.isdigit():
        span.set_attribute(n.NETWORK_PEER_PORT, int(port))
