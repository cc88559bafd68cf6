"""A turn span under the gRPC server span, and a GenAI client span for its model call."""

from __future__ import annotations

from opentelemetry import trace
from opentelemetry.trace import SpanKind, Status, StatusCode
from opentelemetry.util.types import AttributeValue

from agentskit_chat.service import ModelCallReport, TurnReport

from . import _names as n

FAILED_OUTCOMES = frozenset({"failed", "rejected", "error"})


def turn_attributes(report: TurnReport) -> dict[str, AttributeValue]:
    """The `agentskit.chat.*` attributes of a turn span; unknown values are left out."""
    values: dict[str, AttributeValue | None] = {
        n.DEFINITION_ID: report.definition_id,
        n.DEFINITION_REVISION: report.revision,
        n.SESSION_ID: report.session_id,
        n.TURN_ID: report.turn_id,
        n.OPERATION: report.operation,
        n.KIND: report.kind,
        n.ROUTE_ID: report.route_id,
        n.FROM_STATE: report.from_state,
        n.TO_STATE: report.to_state,
        n.REPLAYED: report.replayed,
        n.OUTCOME: report.outcome,
        n.ERROR_CODE: report.error_code,
    }
    return {key: value for key, value in values.items() if value is not None}


def model_attributes(call: ModelCallReport, session_id: str) -> dict[str, AttributeValue]:
    """GenAI client span attributes: model, provider, usage and finish reasons; no content."""
    values: dict[str, AttributeValue | None] = {
        n.GEN_AI_OPERATION_NAME: n.CHAT,
        n.GEN_AI_PROVIDER_NAME: call.provider,
        n.GEN_AI_REQUEST_MODEL: call.model,
        n.GEN_AI_CONVERSATION_ID: session_id,
        n.GEN_AI_USAGE_INPUT_TOKENS: call.input_tokens,
        n.GEN_AI_USAGE_OUTPUT_TOKENS: call.output_tokens,
        n.GEN_AI_RESPONSE_FINISH_REASONS: list(call.finish_reasons) or None,
        n.ERROR_TYPE: call.error_code,
        n.MODEL_ADAPTER: call.adapter,
    }
    return {key: value for key, value in values.items() if value is not None}


def trace_turn(tracer: trace.Tracer, report: TurnReport) -> trace.SpanContext:
    """Record the turn, and its model call, as spans under the current context.

    The spans take the report's start and end times. Returns the turn span's context.
    """
    span = tracer.start_span(
        f"{n.TURN_SPAN} {report.operation}",
        kind=SpanKind.INTERNAL,
        attributes=turn_attributes(report),
        start_time=report.started_ns,
    )
    try:
        if report.outcome in FAILED_OUTCOMES:
            span.set_status(Status(StatusCode.ERROR, report.error_code))
        if report.model_call is not None:
            _trace_model_call(tracer, span, report.model_call, report.session_id)
    finally:
        span.end(end_time=max(report.ended_ns, report.started_ns))
    return span.get_span_context()


def _trace_model_call(
    tracer: trace.Tracer, parent: trace.Span, call: ModelCallReport, session_id: str
) -> None:
    span = tracer.start_span(
        f"{n.CHAT} {call.model}" if call.model else n.CHAT,
        context=trace.set_span_in_context(parent),
        kind=SpanKind.CLIENT,
        attributes=model_attributes(call, session_id),
        start_time=call.started_ns,
    )
    if call.error_code is not None and call.error_code != "cancelled":
        span.set_status(Status(StatusCode.ERROR, call.error_code))
    span.end(end_time=max(call.ended_ns, call.started_ns))
