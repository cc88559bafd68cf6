"""One JSON line per turn with trace ids; stdlib records share the format; nothing else leaks."""

from __future__ import annotations

import dataclasses
import io
import json
import logging
from typing import Any

import pytest
from opentelemetry import trace

from agentskit_chat.service import ModelCallReport, TurnReport
from agentskit_chat.telemetry import OtelObserver, configure_logging

from .conftest import InMemory
from .reports import REPORTS

TURN_KEYS = {
    "definition_id",
    "revision",
    "session_id",
    "turn_id",
    "operation",
    "kind",
    "route_id",
    "from_state",
    "to_state",
    "replayed",
    "outcome",
    "error_code",
    "duration_ms",
    "time_to_first_chunk_ms",
    "model_provider",
    "model",
    "model_duration_ms",
    "input_tokens",
    "output_tokens",
    "model_error_code",
}
LINE_KEYS = {"event", "level", "logger", "timestamp", "trace_id", "span_id"} | TURN_KEYS
TURN_SPAN_KEYS = {
    "agentskit.chat.definition.id",
    "agentskit.chat.definition.revision",
    "agentskit.chat.session.id",
    "agentskit.chat.turn.id",
    "agentskit.chat.operation",
    "agentskit.chat.kind",
    "agentskit.chat.route.id",
    "agentskit.chat.from_state",
    "agentskit.chat.to_state",
    "agentskit.chat.replayed",
    "agentskit.chat.outcome",
    "agentskit.chat.error.code",
}
MODEL_SPAN_KEYS = {
    "gen_ai.operation.name",
    "gen_ai.provider.name",
    "gen_ai.request.model",
    "gen_ai.request.temperature",
    "gen_ai.request.max_tokens",
    "gen_ai.response.model",
    "gen_ai.response.id",
    "server.address",
    "server.port",
    "gen_ai.conversation.id",
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.output_tokens",
    "gen_ai.response.finish_reasons",
    "error.type",
    "agentskit.chat.model.adapter",
}


def lines(stream: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in stream.getvalue().splitlines() if line.strip()]


def test_turn_line_is_json_with_the_turn_span_ids(in_memory: InMemory) -> None:
    stream = io.StringIO()
    configure_logging(logging.INFO, stream=stream, json=True)
    observer = OtelObserver(in_memory.tracer_provider, in_memory.meter_provider)
    observer.turn_finished(REPORTS["agentic"])
    (line,) = lines(stream)
    turn_span = next(s for s in in_memory.spans.get_finished_spans() if s.name.startswith("chat."))
    assert line["trace_id"] == trace.format_trace_id(turn_span.context.trace_id)
    assert line["span_id"] == trace.format_span_id(turn_span.context.span_id)
    assert len(line["trace_id"]) == 32
    assert len(line["span_id"]) == 16
    assert line["timestamp"].endswith("Z")
    assert {key: line[key] for key in ("event", "level", "logger")} == {
        "event": "turn",
        "level": "info",
        "logger": "agentskit_chat.turns",
    }
    assert line["duration_ms"] == 905.0
    assert line["time_to_first_chunk_ms"] == 301.0
    assert (line["input_tokens"], line["output_tokens"]) == (120, 45)
    assert (line["model_provider"], line["model"]) == ("openai", "gpt-4o-mini")
    assert line["model_duration_ms"] == 898.0
    assert line["session_id"] == "s-0001"
    assert line["kind"] == "agentic"


def test_turn_line_without_tracing_has_no_ids() -> None:
    stream = io.StringIO()
    configure_logging("INFO", stream=stream, json=True)
    OtelObserver().turn_finished(REPORTS["deterministic"])
    (line,) = lines(stream)
    assert "trace_id" not in line
    assert "span_id" not in line
    assert line["route_id"] == "greeting"
    assert line["replayed"] is False


def test_failed_turn_is_a_warning() -> None:
    stream = io.StringIO()
    configure_logging(logging.INFO, stream=stream, json=True)
    OtelObserver().turn_finished(REPORTS["failed"])
    (line,) = lines(stream)
    assert line["level"] == "warning"
    assert line["error_code"] == "model_server_error"
    assert line["model_error_code"] == "model_server_error"


def test_stdlib_records_are_rendered_the_same_way() -> None:
    stream = io.StringIO()
    configure_logging(logging.INFO, stream=stream, json=True)
    logging.getLogger("opentelemetry.sdk.test").warning("export to %s failed", "collector")
    logging.getLogger("agentskit_chat.serve").debug("below the level")
    try:
        raise ValueError("boom")
    except ValueError:
        logging.getLogger("agentskit_chat.serve").exception("it broke")
    first, second = lines(stream)
    assert first["event"] == "export to collector failed"
    assert first["level"] == "warning"
    assert first["logger"] == "opentelemetry.sdk.test"
    assert "timestamp" in first
    assert second["level"] == "error"
    assert second["exception"][0]["exc_type"] == "ValueError"


def test_configuring_again_replaces_the_handler() -> None:
    first, second = io.StringIO(), io.StringIO()
    configure_logging(logging.INFO, stream=first, json=True)
    configure_logging(logging.INFO, stream=second, json=True)
    logging.getLogger("agentskit_chat.serve").info("once")
    assert first.getvalue() == ""
    assert [line["event"] for line in lines(second)] == ["once"]


def test_console_format_when_not_json() -> None:
    stream = io.StringIO()
    configure_logging(logging.INFO, stream=stream, json=False)
    OtelObserver().turn_finished(REPORTS["deterministic"])
    text = stream.getvalue()
    assert "turn" in text
    assert "session_id=s-0001" in text
    with pytest.raises(json.JSONDecodeError):
        json.loads(text.splitlines()[0])


def test_reports_have_no_field_for_content() -> None:
    """A canary: a new report field must be reviewed here before it can reach telemetry."""
    assert {f.name for f in dataclasses.fields(TurnReport)} == {
        "session_id",
        "turn_id",
        "operation",
        "outcome",
        "started_ns",
        "ended_ns",
        "definition_id",
        "revision",
        "kind",
        "route_id",
        "from_state",
        "to_state",
        "replayed",
        "error_code",
        "first_chunk_ns",
        "model_call",
    }
    assert {f.name for f in dataclasses.fields(ModelCallReport)} == {
        "adapter",
        "provider",
        "model",
        "started_ns",
        "ended_ns",
        "first_chunk_ns",
        "input_tokens",
        "output_tokens",
        "finish_reasons",
        "error_code",
        "remote",
        "server_address",
        "server_port",
        "temperature",
        "max_tokens",
        "response_model",
        "response_id",
    }


def test_lines_and_spans_hold_only_the_expected_keys(in_memory: InMemory) -> None:
    stream = io.StringIO()
    configure_logging(logging.INFO, stream=stream, json=True)
    observer = OtelObserver(in_memory.tracer_provider, in_memory.meter_provider)
    for report in REPORTS.values():
        observer.turn_finished(report)
    written = lines(stream)
    assert len(written) == len(REPORTS)
    for line in written:
        assert set(line) <= LINE_KEYS
    for span in in_memory.spans.get_finished_spans():
        expected = MODEL_SPAN_KEYS if span.kind == trace.SpanKind.CLIENT else TURN_SPAN_KEYS
        assert set(span.attributes or {}) <= expected, span.name
        assert list(span.events) == []
        assert list(span.links) == []


def test_tracebacks_never_show_local_variables() -> None:
    stream = io.StringIO()
    configure_logging(logging.INFO, stream=stream, json=True)
    secret = "canary-local-3f9a"

    def fail(text: str) -> None:
        raise ValueError("failed")

    try:
        fail(secret)
    except ValueError:
        logging.getLogger("agentskit_chat.serve").exception("it broke")
    (line,) = lines(stream)
    assert line["exception"]
    assert secret not in stream.getvalue()
