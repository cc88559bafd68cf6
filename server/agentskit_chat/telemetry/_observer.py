"""The TurnObserver that turns each report into spans, metrics and one log line."""

from __future__ import annotations

import logging
from typing import Any

import structlog
from opentelemetry import metrics, trace

from agentskit_chat import __version__
from agentskit_chat.service import NO_SCOPE, TurnReport, TurnRequest, TurnScope

from . import _names as n
from ._logging import log_direct
from ._metrics import TurnMetrics
from ._spans import LiveTurn, trace_turn

log = logging.getLogger("agentskit_chat.telemetry")

TURN_LOGGER = "agentskit_chat.turns"
TURN_EVENT = "turn"


class TurnRecorder:
    """Metrics for every turn (when given a meter provider) and one `turn` log event; no
    spans, and nothing called as a turn starts (it has no `turn_started`), so a turn pays
    only for what is on. It never raises: a part that fails is logged once and skipped.
    """

    def __init__(self, meter_provider: metrics.MeterProvider | None = None) -> None:
        self._metrics = None if meter_provider is None else TurnMetrics(meter_provider)
        self._log: Any = structlog.get_logger(TURN_LOGGER)
        self._stdlib = logging.getLogger(TURN_LOGGER)
        self._failed: set[str] = set()

    def turn_finished(self, report: TurnReport) -> None:
        """Record the turn; returns quickly (exports happen on other threads)."""
        self._finish(report, None)

    def _finish(self, report: TurnReport, span: trace.SpanContext | None) -> None:
        if self._metrics is not None:
            try:
                self._metrics.record(report)
            except Exception:
                self._failure("metrics")
        level = logging.WARNING if report.outcome in ("failed", "error") else logging.INFO
        if not self._stdlib.isEnabledFor(level):
            return  # Building the line costs more than the spans' attributes.
        try:
            fields = log_fields(report, span)
            if not log_direct(self._stdlib, level, TURN_EVENT, fields):
                self._log.log(level, TURN_EVENT, **fields)  # Not as configure_logging set up.
        except Exception:
            self._failure("log line")

    def _failure(self, part: str) -> None:
        if part not in self._failed:
            self._failed.add(part)
            log.exception("recording the turn's %s failed; further failures are not logged", part)


class OtelObserver(TurnRecorder):
    """Spans and metrics for every turn (when given providers), and one `turn` log event.

    Called in the turn's own context (a copy of the call's: see LiveTurns), inside the gRPC
    server span, so the turn span is that span's child; `turn_started` keeps the turn span
    current while the turn runs (see LiveTurn). A turn whose trace the sampler dropped gets
    no turn span: only its metrics and log line are recorded.
    """

    def __init__(
        self,
        tracer_provider: trace.TracerProvider | None = None,
        meter_provider: metrics.MeterProvider | None = None,
    ) -> None:
        super().__init__(meter_provider)
        self._tracer = (
            None if tracer_provider is None else tracer_provider.get_tracer(n.SCOPE, __version__)
        )

    def turn_started(self, request: TurnRequest) -> TurnScope:
        """Open the turn span and make it current; nothing to do when spans are off, or when
        the call's span was not sampled (its children would not be either)."""
        if self._tracer is None or _unsampled():
            return NO_SCOPE
        try:
            return LiveTurn(self._tracer, request)
        except Exception:
            self._failure("spans")
            return NO_SCOPE

    def turn_finished(self, report: TurnReport) -> None:
        """Record the turn; returns quickly (exports happen on other threads)."""
        span: trace.SpanContext | None = None
        if self._tracer is not None:
            try:
                live = LiveTurn.current()
                if live is not None:
                    span = live.finish(report)
                elif not _unsampled():  # Reported without turn_started: record it now.
                    span = trace_turn(self._tracer, report)
            except Exception:
                self._failure("spans")
        self._finish(report, span)


def turn_observer(
    tracer_provider: trace.TracerProvider | None = None,
    meter_provider: metrics.MeterProvider | None = None,
) -> TurnRecorder:
    """The observer for these providers: without spans, one that the turn runner never
    calls as a turn starts."""
    if tracer_provider is None:
        return TurnRecorder(meter_provider)
    return OtelObserver(tracer_provider, meter_provider)


def _unsampled() -> bool:
    """Whether the current span belongs to a trace the sampler dropped."""
    current = trace.get_current_span().get_span_context()
    return current.is_valid and not current.trace_flags.sampled


def log_fields(report: TurnReport, span: trace.SpanContext | None = None) -> dict[str, Any]:
    """The `turn` event's fields: ids, decision, outcome, timings and token counts."""
    fields: dict[str, Any] = {}
    if span is not None and span.is_valid:
        fields["trace_id"] = trace.format_trace_id(span.trace_id)
        fields["span_id"] = trace.format_span_id(span.span_id)
    else:  # No span of ours: the caller's trace, when its traceparent came with the call.
        caller = trace.get_current_span().get_span_context()
        if caller.is_valid:
            fields["trace_id"] = trace.format_trace_id(caller.trace_id)
    fields.update(
        definition_id=report.definition_id,
        revision=report.revision,
        session_id=report.session_id,
        turn_id=report.turn_id,
        operation=report.operation,
        kind=report.kind,
        route_id=report.route_id,
        from_state=report.from_state,
        to_state=report.to_state,
        replayed=report.replayed,
        outcome=report.outcome,
        error_code=report.error_code,
        duration_ms=_ms(report.ended_ns - report.started_ns),
        time_to_first_chunk_ms=(
            None
            if report.first_chunk_ns is None
            else _ms(report.first_chunk_ns - report.started_ns)
        ),
    )
    call = report.model_call
    if call is not None:
        fields.update(
            model_provider=call.provider,
            model=call.model,
            model_duration_ms=_ms(call.ended_ns - call.started_ns),
            input_tokens=call.input_tokens,
            output_tokens=call.output_tokens,
            model_error_code=call.error_code,
        )
    return {key: value for key, value in fields.items() if value is not None}


def _ms(nanoseconds: int) -> float:
    return round(max(nanoseconds, 0) / 1e6, 3)
