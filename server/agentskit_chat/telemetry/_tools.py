"""The ToolObserver of server tool calls: an `execute_tool {tool}` span and a duration.

Following the GenAI conventions' execute-tool span (INTERNAL, `gen_ai.operation.name`
`execute_tool`, `gen_ai.tool.type` `extension`), without the opt-in arguments and result
attributes: a call's content is never recorded.
"""

from __future__ import annotations

import logging

from opentelemetry import context, metrics, trace
from opentelemetry.trace import SpanKind, Status, StatusCode

from agentskit_chat import __version__
from agentskit_chat.mcp import NO_TOOL_OBSERVER, ToolCallReport, ToolCallScope, ToolObserver

from . import _names as n

log = logging.getLogger("agentskit_chat.telemetry")


class ToolTelemetry:
    """Spans (with a tracer provider) and the `agentskit.chat.tool.duration` histogram
    (with a meter provider) of server tool calls; never raises into a call."""

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
                n.TOOL_DURATION,
                unit="s",
                description="Duration of a server tool's call, from its start to its outcome.",
                explicit_bucket_boundaries_advisory=n.GEN_AI_SECONDS_BUCKETS,
            )
        )

    def tool_started(self, tool: str, call_id: str) -> ToolCallScope:
        """Open the call's span and make it current, so the request carries its context."""
        span = None
        token = None
        if self._tracer is not None:
            try:
                span = self._tracer.start_span(
                    f"{n.EXECUTE_TOOL} {tool}",
                    kind=SpanKind.INTERNAL,
                    attributes={
                        n.GEN_AI_OPERATION_NAME: n.EXECUTE_TOOL,
                        n.GEN_AI_TOOL_NAME: tool,
                        n.GEN_AI_TOOL_CALL_ID: call_id,
                        n.GEN_AI_TOOL_TYPE: n.EXTENSION,
                    },
                )
                token = context.attach(trace.set_span_in_context(span))
            except Exception:
                log.exception("starting a tool call span failed")
        return _Call(self._duration, span, token)


class _Call:
    def __init__(
        self,
        duration: metrics.Histogram | None,
        span: trace.Span | None,
        token: object | None,
    ) -> None:
        self._duration = duration
        self._span = span
        self._token = token

    def finish(self, report: ToolCallReport) -> None:
        try:
            self._record(report)
        except Exception:
            log.exception("recording a tool call failed")

    def _record(self, report: ToolCallReport) -> None:
        if self._duration is not None:
            attributes = {n.GEN_AI_TOOL_NAME: report.tool}
            if report.error_type is not None:
                attributes[n.ERROR_TYPE] = report.error_type
            self._duration.record(report.seconds, attributes)
        span = self._span
        if span is None:
            return
        if self._token is not None:
            context.detach(self._token)  # type: ignore[arg-type]
        if report.server:
            span.set_attribute(n.MCP_SERVER, report.server)
        if report.error_type is not None:
            span.set_attribute(n.ERROR_TYPE, report.error_type)
            span.set_status(Status(StatusCode.ERROR))
        span.end()


def tool_observer(
    tracer_provider: trace.TracerProvider | None = None,
    meter_provider: metrics.MeterProvider | None = None,
) -> ToolObserver:
    """The observer of server tool calls for these providers (nothing when both are None)."""
    if tracer_provider is None and meter_provider is None:
        return NO_TOOL_OBSERVER
    return ToolTelemetry(tracer_provider, meter_provider)
