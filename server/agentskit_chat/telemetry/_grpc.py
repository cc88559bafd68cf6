"""The gRPC server span: W3C trace context from client metadata, no spans for probes."""

from __future__ import annotations

import grpc
from opentelemetry import trace
from opentelemetry.instrumentation.grpc import aio_server_interceptor, filters

UNTRACED_SERVICES = ("grpc.health.v1.Health", "grpc.reflection.")
"""Service-name prefixes whose calls get no span: health probes and reflection."""


def server_interceptors(tracer_provider: trace.TracerProvider) -> list[grpc.aio.ServerInterceptor]:
    """Interceptors for `grpc.aio.server(interceptors=...)` that open a SERVER span per call.

    The span continues the caller's `traceparent` (the global propagator, W3C trace
    context and baggage by default) and is current while the handler runs.
    """
    untraced = filters.any_of(*(filters.service_prefix(prefix) for prefix in UNTRACED_SERVICES))
    interceptor: grpc.aio.ServerInterceptor = aio_server_interceptor(  # type: ignore[no-untyped-call]
        tracer_provider=tracer_provider, filter_=filters.negate(untraced)
    )
    return [interceptor]
