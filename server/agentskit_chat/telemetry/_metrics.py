"""Turn and GenAI metrics; attributes stay low-cardinality (no session or turn ids)."""

from __future__ import annotations

from opentelemetry import metrics
from opentelemetry.util.types import AttributeValue

from agentskit_chat import __version__
from agentskit_chat.service import ModelCallReport, TurnReport

from . import _names as n

Attributes = dict[str, AttributeValue]


class TurnMetrics:
    """The instruments, created once per meter provider."""

    def __init__(self, provider: metrics.MeterProvider) -> None:
        meter = provider.get_meter(n.SCOPE, __version__)
        self.turns = meter.create_counter(n.TURNS, unit="{turn}", description="Turns by outcome.")
        self.duration = meter.create_histogram(
            n.TURN_DURATION,
            unit="s",
            description="From the request reaching the service to the turn's last event.",
            explicit_bucket_boundaries_advisory=n.TURN_SECONDS_BUCKETS,
        )
        self.first_chunk = meter.create_histogram(
            n.TURN_TIME_TO_FIRST_CHUNK,
            unit="s",
            description="From the request reaching the service to the first piece of answer.",
            explicit_bucket_boundaries_advisory=n.TURN_SECONDS_BUCKETS,
        )
        self.model_duration = meter.create_histogram(
            n.GEN_AI_OPERATION_DURATION,
            unit="s",
            description="GenAI operation duration.",
            explicit_bucket_boundaries_advisory=n.GEN_AI_SECONDS_BUCKETS,
        )
        self.tokens = meter.create_histogram(
            n.GEN_AI_TOKEN_USAGE,
            unit="{token}",
            description="Number of input and output tokens used.",
            explicit_bucket_boundaries_advisory=n.GEN_AI_TOKEN_BUCKETS,
        )

    def record(self, report: TurnReport) -> None:
        """Count the turn and record its timings and its model call."""
        attributes = turn_metric_attributes(report)
        self.turns.add(1, attributes)
        self.duration.record(_seconds(report.ended_ns - report.started_ns), attributes)
        if report.first_chunk_ns is not None:
            ttfc = _seconds(report.first_chunk_ns - report.started_ns)
            self.first_chunk.record(ttfc, attributes)
        call = report.model_call
        if call is not None and call.remote:  # A local stand-in is no GenAI operation.
            self._record_model_call(call, report.definition_id)

    def _record_model_call(self, call: ModelCallReport, definition_id: str | None) -> None:
        attributes = gen_ai_metric_attributes(call, definition_id)
        failed = dict(attributes)
        if call.error_code is not None:
            failed[n.ERROR_TYPE] = call.error_code
        self.model_duration.record(_seconds(call.ended_ns - call.started_ns), failed)
        for token_type, count in (("input", call.input_tokens), ("output", call.output_tokens)):
            if count is not None:
                self.tokens.record(count, {**attributes, n.GEN_AI_TOKEN_TYPE: token_type})


def turn_metric_attributes(report: TurnReport) -> Attributes:
    """Kind, definition, outcome and error code: bounded by the definitions a server hosts
    and the service's own codes (a lease conflict is `SESSION_BUSY`)."""
    values: dict[str, AttributeValue | None] = {
        n.KIND: report.kind,
        n.DEFINITION_ID: report.definition_id,
        n.OUTCOME: report.outcome,
        n.ERROR_CODE: report.error_code,
    }
    return {key: value for key, value in values.items() if value is not None}


def gen_ai_metric_attributes(call: ModelCallReport, definition_id: str | None = None) -> Attributes:
    """The GenAI conventions' operation, provider, models and endpoint, and the definition."""
    values: dict[str, AttributeValue | None] = {
        n.GEN_AI_OPERATION_NAME: n.CHAT,
        n.GEN_AI_PROVIDER_NAME: call.provider,
        n.GEN_AI_REQUEST_MODEL: call.model or None,
        n.GEN_AI_RESPONSE_MODEL: call.response_model,
        n.SERVER_ADDRESS: call.server_address,
        n.SERVER_PORT: call.server_port,
        n.DEFINITION_ID: definition_id,
    }
    return {key: value for key, value in values.items() if value is not None}


def _seconds(nanoseconds: int) -> float:
    return max(nanoseconds, 0) / 1e9
