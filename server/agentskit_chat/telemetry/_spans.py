"""The turn span and the GenAI client span of its model call.

`LiveTurn` opens the turn span as the turn begins and keeps it current while the turn runs
(the model call's span while the model is called), so spans that route code or an
instrumented library opens meanwhile are its children, and the model request carries the
model span's trace context. The report at the end supplies the attributes, computed once
and only for spans the sampler kept. `trace_turn` records a finished turn after the fact,
for reports that arrive without a live turn.
"""

from __future__ import annotations

from contextvars import Token
from typing import Final

from opentelemetry import context, trace
from opentelemetry.trace import SpanKind, Status, StatusCode
from opentelemetry.util.types import AttributeValue

from agentskit_chat.service import ModelCallReport, Reason, TurnReport, TurnRequest, model_calls

from . import _names as n

FAILED_OUTCOMES: Final = frozenset({"failed", "rejected", "error"})
SERVER_FAULTS: Final = frozenset(
    {Reason.SHUTTING_DOWN, Reason.STORE_UNAVAILABLE, Reason.DEADLINE_EXCEEDED}
)
CALLER_MISTAKES: Final = frozenset(
    {reason.name for reason in Reason if reason not in SERVER_FAULTS} | {"conflict"}
)
"""Codes of turns refused or lost for the caller's reasons (a bad request, a busy session,
a lost compare-and-set): they are not server errors, so they leave the span status unset."""
_LIVE_TURN: Final = context.create_key("agentskit_chat.live_turn")
RPC_CALL: Final = context.create_key("agentskit_chat.rpc_call")
"""Context value `(rpc.system.name, rpc.method)` that a transport sets, in place of its
SERVER span, when RPC spans are left to a mesh proxy: the turn span then carries both."""


def rpc_call_context(
    system: str, method: str, parent: context.Context | None = None
) -> context.Context:
    """`parent` (the current context when None) naming the RPC call for the turn span."""
    return context.set_value(RPC_CALL, (system, method), parent)


def _rpc_attributes() -> dict[str, AttributeValue] | None:
    """The RPC attributes for a turn span with no SERVER span above it, if a transport
    named its call."""
    call = context.get_value(RPC_CALL)
    if not isinstance(call, tuple):
        return None
    system, method = call
    return {n.RPC_SYSTEM_NAME: system, n.RPC_METHOD: method}


def is_error(report: TurnReport) -> bool:
    """Whether the turn ended in a fault of the server's (or its route code's, or model's)."""
    return report.outcome in FAILED_OUTCOMES and report.error_code not in CALLER_MISTAKES


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
        n.ROUTE_TOOL: report.route_tool,
        n.FROM_STATE: report.from_state,
        n.TO_STATE: report.to_state,
        n.REPLAYED: report.replayed,
        n.OUTCOME: report.outcome,
        n.ERROR_CODE: report.error_code,
    }
    return {key: value for key, value in values.items() if value is not None}


def model_attributes(call: ModelCallReport, session_id: str) -> dict[str, AttributeValue]:
    """GenAI client span attributes by the GenAI conventions; never content."""
    values: dict[str, AttributeValue | None] = {
        n.GEN_AI_OPERATION_NAME: n.CHAT,
        n.GEN_AI_PROVIDER_NAME: call.provider,
        n.GEN_AI_REQUEST_MODEL: call.model,
        n.GEN_AI_REQUEST_TEMPERATURE: call.temperature,
        n.GEN_AI_REQUEST_MAX_TOKENS: call.max_tokens,
        n.GEN_AI_RESPONSE_MODEL: call.response_model,
        n.GEN_AI_RESPONSE_ID: call.response_id,
        n.SERVER_ADDRESS: call.server_address,
        n.SERVER_PORT: call.server_port,
        n.GEN_AI_CONVERSATION_ID: session_id,
        n.GEN_AI_USAGE_INPUT_TOKENS: call.input_tokens,
        n.GEN_AI_USAGE_OUTPUT_TOKENS: call.output_tokens,
        n.GEN_AI_RESPONSE_FINISH_REASONS: list(call.finish_reasons) or None,
        n.ERROR_TYPE: call.error_code,
        n.MODEL_ADAPTER: call.adapter,
    }
    return {key: value for key, value in values.items() if value is not None}


def model_span_name(model: str | None) -> str:
    """`chat {model}`, or `chat` when the definition names no model."""
    return f"{n.CHAT} {model}" if model else n.CHAT


class LiveTurn:
    """A running turn's span, current from `turn_started` until `leave` (a TurnScope).

    Every method swallows its own failures: telemetry never fails a turn.
    """

    __slots__ = ("_model_token", "_token", "model_span", "model_spans", "span", "tracer")

    def __init__(self, tracer: trace.Tracer, request: TurnRequest) -> None:
        self.tracer = tracer
        self.span = tracer.start_span(
            f"{n.TURN_SPAN} {request.operation_name}",
            kind=SpanKind.INTERNAL,
            attributes=_rpc_attributes(),
        )
        self.model_span: trace.Span | None = None
        """The span of the model call in progress."""
        self.model_spans: list[trace.Span] = []
        """The span of each remote model call the turn made, oldest first."""
        self._model_token: Token[context.Context] | None = None
        current = context.set_value(_LIVE_TURN, self, trace.set_span_in_context(self.span))
        self._token: Token[context.Context] | None = context.attach(current)

    @staticmethod
    def current() -> LiveTurn | None:
        """The live turn of the running task, if any."""
        live = context.get_value(_LIVE_TURN)
        return live if isinstance(live, LiveTurn) else None

    def model_call_started(self, provider: str, model: str | None, remote: bool) -> None:
        """A model that is really called gets a CLIENT span, current during the call."""
        if not remote or self.model_span is not None:
            return
        try:
            parent = trace.set_span_in_context(self.span)
            span = self.tracer.start_span(model_span_name(model), parent, kind=SpanKind.CLIENT)
            self.model_span = span
            self.model_spans.append(span)
            self._model_token = context.attach(trace.set_span_in_context(span, parent))
        except Exception:  # pragma: no cover - the SDK does not raise here
            self.model_span = None

    def model_call_ended(self) -> None:
        """The turn span is current again (its next model call gets a span of its own)."""
        self.model_span = None
        token, self._model_token = self._model_token, None
        if token is not None:
            context.detach(token)

    def leave(self) -> None:
        """What was current before the turn is current again."""
        token, self._token = self._token, None
        self._model_token = None  # Restoring the outer token undoes the inner one too.
        if token is not None:
            context.detach(token)

    def finish(self, report: TurnReport) -> trace.SpanContext:
        """End the spans with the report's attributes; the turn span's context."""
        span = self.span
        if span.is_recording():
            span.set_attributes(turn_attributes(report))
            _tool_call_events(span, report)
            if is_error(report):
                span.set_status(Status(StatusCode.ERROR, report.error_code))
        remote = [call for call in model_calls(report) if call.remote]
        for index, call in enumerate(remote):
            if index < len(self.model_spans):
                _finish_model_span(self.model_spans[index], call, report.session_id)
            else:  # Started without the scope: record it after the fact.
                _trace_model_call(self.tracer, span, call, report.session_id)
        span.end(end_time=max(report.ended_ns, report.started_ns))
        return span.get_span_context()


def _tool_call_events(span: trace.Span, report: TurnReport) -> None:
    """One span event per tool call of the answer, by tool name and call id only."""
    for call_id, name in report.tool_calls:
        span.add_event(
            n.TOOL_CALL_EVENT, {n.GEN_AI_TOOL_NAME: name, n.GEN_AI_TOOL_CALL_ID: call_id}
        )


def trace_turn(tracer: trace.Tracer, report: TurnReport) -> trace.SpanContext:
    """Record a finished turn, and its model call, as spans under the current context.

    The spans take the report's start and end times. Returns the turn span's context.
    """
    span = tracer.start_span(
        f"{n.TURN_SPAN} {report.operation}",
        kind=SpanKind.INTERNAL,
        attributes=_rpc_attributes(),
        start_time=report.started_ns,
    )
    try:
        if span.is_recording():
            span.set_attributes(turn_attributes(report))
            _tool_call_events(span, report)
            if is_error(report):
                span.set_status(Status(StatusCode.ERROR, report.error_code))
        for call in model_calls(report):
            if call.remote:
                _trace_model_call(tracer, span, call, report.session_id)
    finally:
        span.end(end_time=max(report.ended_ns, report.started_ns))
    return span.get_span_context()


def _trace_model_call(
    tracer: trace.Tracer, parent: trace.Span, call: ModelCallReport, session_id: str
) -> None:
    span = tracer.start_span(
        model_span_name(call.model),
        context=trace.set_span_in_context(parent),
        kind=SpanKind.CLIENT,
        start_time=call.started_ns,
    )
    _finish_model_span(span, call, session_id)


def _finish_model_span(span: trace.Span, call: ModelCallReport, session_id: str) -> None:
    if span.is_recording():
        span.set_attributes(model_attributes(call, session_id))
        if call.error_code is not None and call.error_code != "cancelled":
            span.set_status(Status(StatusCode.ERROR, call.error_code))
    span.end(end_time=max(call.ended_ns, call.started_ns))
