"""Telemetry of the HTTP listener's framework fronts (AG-UI, the AI SDK, OpenAI's API).

One SERVER span per request, named `{method} {route}` as the HTTP semantic conventions
name server spans (the route is a template, never a path with ids in it), continuing the
caller's W3C trace context so the turn span becomes its child; and the
`http.server.request.duration` histogram. Without providers, only the caller's trace
context is continued, which the turn log line carries. Nothing here reads a body.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Final

from opentelemetry import context, metrics, trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from agentskit_chat import __version__

from . import _names as n
from ._grpc import RPC_SECONDS_BUCKETS, incoming_context

HTTP_SERVER_REQUEST_DURATION: Final = "http.server.request.duration"
HTTP_REQUEST_METHOD: Final = "http.request.method"
HTTP_ROUTE: Final = "http.route"
HTTP_RESPONSE_STATUS_CODE: Final = "http.response.status_code"


class HttpTelemetry:
    """Spans (with a tracer provider) and durations (with a meter provider) of front
    requests; `start` satisfies the listener's `RequestTelemetry`."""

    def __init__(
        self,
        tracer_provider: trace.TracerProvider | None = None,
        meter_provider: metrics.MeterProvider | None = None,
    ) -> None:
        self._tracer = (
            None if tracer_provider is None else tracer_provider.get_tracer(n.SCOPE, __version__)
        )
        self._duration = (
            None
            if meter_provider is None
            else meter_provider.get_meter(n.SCOPE, __version__).create_histogram(
                HTTP_SERVER_REQUEST_DURATION,
                unit="s",
                description="Duration of HTTP server requests.",
                explicit_bucket_boundaries_advisory=RPC_SECONDS_BUCKETS,
            )
        )

    def start(
        self, method: str, route: str, headers: Iterable[tuple[str, str]], peer: str | None
    ) -> Callable[[int], None]:
        """Continue the caller's trace in this task and open the request's span; the
        returned callable ends them with the response status."""
        started = time.perf_counter_ns()
        incoming = incoming_context(headers)
        span: trace.Span | None = None
        if self._tracer is not None:
            span = self._tracer.start_span(
                f"{method} {route}", incoming, kind=SpanKind.SERVER, record_exception=False
            )
            if span.is_recording():
                span.set_attributes({HTTP_REQUEST_METHOD: method, HTTP_ROUTE: route})
                _set_peer(span, peer)
            incoming = trace.set_span_in_context(span, incoming)
        token = None if incoming is None else context.attach(incoming)
        duration = self._duration

        def end(status: int) -> None:
            if token is not None:
                context.detach(token)
            if span is not None:
                if span.is_recording():
                    span.set_attribute(HTTP_RESPONSE_STATUS_CODE, status)
                    if status >= 500:
                        span.set_attribute(n.ERROR_TYPE, str(status))
                        span.set_status(Status(StatusCode.ERROR))
                span.end()
            if duration is not None:
                attributes: dict[str, str | int] = {
                    HTTP_REQUEST_METHOD: method,
                    HTTP_ROUTE: route,
                    HTTP_RESPONSE_STATUS_CODE: status,
                }
                if status >= 500:
                    attributes[n.ERROR_TYPE] = str(status)
                duration.record((time.perf_counter_ns() - started) / 1e9, attributes)

        return end


def _set_peer(span: trace.Span, address: str | None) -> None:
    if not address:
        return
    host, _, port = address.rpartition(":")
    span.set_attribute(n.NETWORK_PEER_ADDRESS, host.strip("[]"))
    if port.isdigit():
        span.set_attribute(n.NETWORK_PEER_PORT, int(port))
