"""The gRPC server span: W3C trace context from client metadata, no spans for probes."""

from __future__ import annotations

import grpc
from opentelemetry import trace
from opentelemetry.instrumentation.grpc import aio_server_interceptor

UNTRACED_SERVICES = ("grpc.health.v1.Health", "grpc.reflection.")
"""Service-name prefixes whose calls get no span: health probes and reflection."""
_UNTRACED_METHODS = tuple(f"/{prefix}" for prefix in UNTRACED_SERVICES)


def traced(details: grpc.HandlerCallDetails) -> bool:
    """Whether a call gets a span: everything but health probes and reflection.

    One prefix test on the method path (`/package.Service/Method`), as every call pays it.
    """
    method: str = details.method
    return not method.startswith(_UNTRACED_METHODS)


def server_interceptors(tracer_provider: trace.TracerProvider) -> list[grpc.aio.ServerInterceptor]:
    """Interceptors for `grpc.aio.server(interceptors=...)` that open a SERVER span per call.

    The span continues the caller's `traceparent` (the global propagator, W3C trace
    context and baggage by default) and is current while the handler runs.
    """
    interceptor: grpc.aio.ServerInterceptor = aio_server_interceptor(  # type: ignore[no-untyped-call]
        tracer_provider=tracer_provider, filter_=traced
    )
    return [interceptor]
