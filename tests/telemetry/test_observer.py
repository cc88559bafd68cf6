"""Each report becomes a turn span, a GenAI span for its model call, and metrics."""

from __future__ import annotations

import logging
from dataclasses import replace
from typing import Any

import pytest
from opentelemetry import trace
from opentelemetry.sdk.metrics.export import HistogramDataPoint, NumberDataPoint
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode

from agentskit_chat.telemetry import OtelObserver, Telemetry, turn_observer
from agentskit_chat.telemetry._metrics import TOOL_NAMES

from .conftest import InMemory
from .reports import MS, REPORTS, T0, turn


def finished(sinks: InMemory) -> dict[str, ReadableSpan]:
    return {span.name: span for span in sinks.spans.get_finished_spans()}


def points(sinks: InMemory) -> dict[str, list[Any]]:
    data = sinks.reader.get_metrics_data()
    found: dict[str, list[Any]] = {}
    if data is None:
        return found
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                found.setdefault(metric.name, []).extend(metric.data.data_points)
    return found


def test_deterministic_turn_is_one_internal_span_with_its_decision(in_memory: InMemory) -> None:
    in_memory.observer.turn_finished(REPORTS["deterministic"])
    (span,) = in_memory.spans.get_finished_spans()
    assert span.name == "chat.turn submit"
    assert span.kind == SpanKind.INTERNAL
    assert span.start_time == T0
    assert span.end_time == T0 + MS // 2
    assert span.status.status_code == StatusCode.UNSET
    assert dict(span.attributes or {}) == {
        "agentskit.chat.definition.id": "support",
        "agentskit.chat.definition.revision": 3,
        "agentskit.chat.session.id": "s-0001",
        "agentskit.chat.turn.id": "t-0001",
        "agentskit.chat.operation": "submit",
        "agentskit.chat.kind": "deterministic",
        "agentskit.chat.route.id": "greeting",
        "agentskit.chat.from_state": "start",
        "agentskit.chat.to_state": "start",
        "agentskit.chat.replayed": False,
        "agentskit.chat.outcome": "completed",
    }
    assert span.parent is None
    assert list(span.events) == []


def test_agentic_turn_has_a_genai_client_span_as_child(in_memory: InMemory) -> None:
    in_memory.observer.turn_finished(REPORTS["agentic"])
    spans = finished(in_memory)
    assert set(spans) == {"chat.turn submit", "chat gpt-4o-mini"}
    turn_span, model = spans["chat.turn submit"], spans["chat gpt-4o-mini"]
    assert turn_span.attributes is not None
    assert turn_span.attributes["agentskit.chat.kind"] == "agentic"
    assert "agentskit.chat.route.id" not in turn_span.attributes
    assert model.kind == SpanKind.CLIENT
    assert model.parent is not None
    assert model.parent.span_id == turn_span.context.span_id
    assert model.context.trace_id == turn_span.context.trace_id
    assert (model.start_time, model.end_time) == (T0 + 2 * MS, T0 + 900 * MS)
    assert model.status.status_code == StatusCode.UNSET
    assert dict(model.attributes or {}) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "gpt-4o-mini",
        "gen_ai.request.temperature": 0.2,
        "gen_ai.request.max_tokens": 256,
        "gen_ai.response.model": "gpt-4o-mini-2024-07-18",
        "gen_ai.response.id": "chatcmpl-123",
        "server.address": "models.example",
        "server.port": 443,
        "gen_ai.conversation.id": "s-0001",
        "gen_ai.usage.input_tokens": 120,
        "gen_ai.usage.output_tokens": 45,
        "gen_ai.response.finish_reasons": ("stop",),
        "agentskit.chat.model.adapter": "openai",
    }


@pytest.mark.parametrize(
    ("name", "kind", "route"),
    [("repaired", "repaired", "order-status"), ("fallback", "fallback", "fallback")],
)
def test_repaired_and_fallback_turns_carry_kind_and_route(
    in_memory: InMemory, name: str, kind: str, route: str
) -> None:
    in_memory.observer.turn_finished(REPORTS[name])
    (span,) = in_memory.spans.get_finished_spans()
    assert span.attributes is not None
    assert span.attributes["agentskit.chat.kind"] == kind
    assert span.attributes["agentskit.chat.route.id"] == route


def test_replayed_dispatch(in_memory: InMemory) -> None:
    in_memory.observer.turn_finished(REPORTS["replayed"])
    (span,) = in_memory.spans.get_finished_spans()
    assert span.name == "chat.turn dispatch"
    assert span.attributes is not None
    assert span.attributes["agentskit.chat.replayed"] is True


def test_failed_turn_and_model_call_are_errors_named_by_code_only(in_memory: InMemory) -> None:
    in_memory.observer.turn_finished(REPORTS["failed"])
    spans = finished(in_memory)
    assert set(spans) == {"chat.turn submit", "chat"}
    turn_span, model = spans["chat.turn submit"], spans["chat"]
    assert turn_span.status.status_code == StatusCode.ERROR
    assert turn_span.status.description == "model_server_error"
    assert turn_span.attributes is not None
    assert turn_span.attributes["agentskit.chat.error.code"] == "model_server_error"
    assert turn_span.attributes["agentskit.chat.outcome"] == "failed"
    assert model.status.status_code == StatusCode.ERROR
    assert dict(model.attributes or {}) == {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.temperature": 0.2,
        "gen_ai.request.max_tokens": 256,
        "server.address": "models.example",
        "server.port": 443,
        "gen_ai.conversation.id": "s-0001",
        "error.type": "model_server_error",
        "agentskit.chat.model.adapter": "openai",
    }


def test_cancelled_turn_is_not_an_error(in_memory: InMemory) -> None:
    in_memory.observer.turn_finished(REPORTS["cancelled"])
    spans = finished(in_memory)
    turn_span, model = spans["chat.turn submit"], spans["chat gpt-4o-mini"]
    assert turn_span.status.status_code == StatusCode.UNSET
    assert turn_span.attributes is not None
    assert turn_span.attributes["agentskit.chat.outcome"] == "cancelled"
    assert model.status.status_code == StatusCode.UNSET
    assert model.attributes is not None
    assert model.attributes["error.type"] == "cancelled"


def test_rejected_turn_has_only_what_is_known(in_memory: InMemory) -> None:
    in_memory.observer.turn_finished(REPORTS["rejected"])
    (span,) = in_memory.spans.get_finished_spans()
    assert span.name == "chat.turn retry"
    assert span.status.status_code == StatusCode.UNSET  # a busy session is the caller's lot
    assert span.events == ()
    assert dict(span.attributes or {}) == {
        "agentskit.chat.session.id": "s-0002",
        "agentskit.chat.turn.id": "t-0009",
        "agentskit.chat.operation": "retry",
        "agentskit.chat.replayed": False,
        "agentskit.chat.outcome": "rejected",
        "agentskit.chat.error.code": "SESSION_BUSY",
    }


def test_turn_span_is_a_child_of_the_current_span(in_memory: InMemory) -> None:
    tracer = in_memory.tracer_provider.get_tracer("test")
    with tracer.start_as_current_span("/agentskit.chat.v1.ChatService/StreamTurn") as server:
        in_memory.observer.turn_finished(REPORTS["deterministic"])
    spans = finished(in_memory)
    turn_span = spans["chat.turn submit"]
    assert turn_span.parent is not None
    assert turn_span.parent.span_id == server.get_span_context().span_id
    assert turn_span.context.trace_id == server.get_span_context().trace_id


def test_metrics_count_turns_and_record_timings(in_memory: InMemory) -> None:
    for report in REPORTS.values():
        in_memory.observer.turn_finished(report)
    found = points(in_memory)
    turns: list[NumberDataPoint] = found["agentskit.chat.turns"]
    counted = {
        (p.attributes.get("agentskit.chat.kind"), p.attributes["agentskit.chat.outcome"]): p.value
        for p in turns
        if p.attributes is not None
    }
    assert counted == {
        ("deterministic", "completed"): 2,  # the plain and the replayed one
        ("agentic", "completed"): 1,
        ("repaired", "completed"): 1,
        ("fallback", "completed"): 1,
        ("agentic", "failed"): 1,
        ("agentic", "cancelled"): 1,
        (None, "rejected"): 1,
        ("deterministic", "duplicate"): 1,
    }
    revisions = {
        p.attributes.get("agentskit.chat.definition.revision")
        for p in turns
        if p.attributes and "agentskit.chat.definition.id" in p.attributes
    }
    assert revisions == {3}
    durations: list[HistogramDataPoint] = found["agentskit.chat.turn.duration"]
    assert sum(p.count for p in durations) == len(REPORTS)
    first_chunks: list[HistogramDataPoint] = found["agentskit.chat.turn.time_to_first_chunk"]
    with_chunk = [r for r in REPORTS.values() if r.first_chunk_ns is not None]
    assert sum(p.count for p in first_chunks) == len(with_chunk)
    agentic = next(
        p
        for p in first_chunks
        if p.attributes
        == {
            "agentskit.chat.kind": "agentic",
            "agentskit.chat.definition.id": "support",
            "agentskit.chat.definition.revision": 3,
            "agentskit.chat.outcome": "completed",
        }
    )
    assert agentic.sum == pytest.approx(0.301)
    assert agentic.explicit_bounds[0] == 0.0005


def test_turns_of_two_revisions_are_counted_apart(in_memory: InMemory) -> None:
    for revision in (1, 2, 2):
        in_memory.observer.turn_finished(replace(REPORTS["deterministic"], revision=revision))
    found = points(in_memory)
    counted = {
        p.attributes.get("agentskit.chat.definition.revision"): p.value
        for p in found["agentskit.chat.turns"]
        if p.attributes is not None
    }
    assert counted == {1: 1, 2: 2}
    durations = {
        (p.attributes or {}).get("agentskit.chat.definition.revision"): p.count
        for p in found["agentskit.chat.turn.duration"]
    }
    assert durations == {1: 1, 2: 2}


def test_genai_metrics_follow_the_conventions(in_memory: InMemory) -> None:
    for name in ("agentic", "failed", "cancelled"):
        in_memory.observer.turn_finished(REPORTS[name])
    found = points(in_memory)
    durations = {
        tuple(sorted((p.attributes or {}).items())): p.count
        for p in found["gen_ai.client.operation.duration"]
    }
    base = {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "server.address": "models.example",
        "server.port": 443,
        "agentskit.chat.definition.id": "support",
    }
    requested = {**base, "gen_ai.request.model": "gpt-4o-mini"}
    model = {**requested, "gen_ai.response.model": "gpt-4o-mini-2024-07-18"}
    assert durations == {
        tuple(sorted(model.items())): 1,
        tuple(sorted({**base, "error.type": "model_server_error"}.items())): 1,
        tuple(sorted({**model, "error.type": "cancelled"}.items())): 1,
    }
    tokens = {
        (p.attributes or {})["gen_ai.token.type"]: (p.sum, dict(p.attributes or {}))
        for p in found["gen_ai.client.token.usage"]
    }
    assert tokens == {
        "input": (120, {**model, "gen_ai.token.type": "input"}),
        "output": (45, {**model, "gen_ai.token.type": "output"}),
    }


def test_metric_attributes_stay_low_cardinality(in_memory: InMemory) -> None:
    for index in range(20):
        in_memory.observer.turn_finished(turn(session_id=f"s-{index}", turn_id=f"t-{index}"))
    for name, found in points(in_memory).items():
        assert len(found) == 1, name
        keys = set(found[0].attributes or {})
        assert not keys & {"agentskit.chat.session.id", "agentskit.chat.turn.id"}


def test_without_providers_only_the_log_line_is_written() -> None:
    OtelObserver().turn_finished(REPORTS["agentic"])  # nothing to assert but no error


class Broken(trace.TracerProvider):
    def get_tracer(self, *args: Any, **kwargs: Any) -> trace.Tracer:
        return BrokenTracer()


class BrokenTracer(trace.NoOpTracer):
    def start_span(self, *args: Any, **kwargs: Any) -> trace.Span:
        raise RuntimeError("tracer out of order")


def test_observer_never_raises_and_logs_a_failure_once(
    in_memory: InMemory, caplog: pytest.LogCaptureFixture
) -> None:
    observer = OtelObserver(Broken(), in_memory.meter_provider)
    with caplog.at_level(logging.ERROR, logger="agentskit_chat.telemetry"):
        for _ in range(3):
            observer.turn_finished(REPORTS["agentic"])
    failures = [r for r in caplog.records if r.name == "agentskit_chat.telemetry"]
    assert len(failures) == 1
    assert "spans" in failures[0].getMessage()
    turns = points(in_memory)["agentskit.chat.turns"]
    assert sum(p.value for p in turns) == 3  # metrics still recorded


def test_without_spans_nothing_is_called_as_a_turn_starts(in_memory: InMemory) -> None:
    """The turn runner calls `turn_started` only on observers that have it."""
    metrics_only = turn_observer(None, in_memory.meter_provider)
    assert not hasattr(metrics_only, "turn_started")
    assert not hasattr(Telemetry().observer, "turn_started")  # telemetry off
    assert hasattr(turn_observer(in_memory.tracer_provider, None), "turn_started")
    metrics_only.turn_finished(REPORTS["deterministic"])
    assert "agentskit.chat.turns" in points(in_memory)
    assert in_memory.spans.get_finished_spans() == ()


def test_observers_over_one_meter_provider_count_each_turn_once(in_memory: InMemory) -> None:
    """The turn count is kept per provider: a second observer adds to the same counter."""
    second = OtelObserver(None, in_memory.meter_provider)
    in_memory.observer.turn_finished(REPORTS["deterministic"])
    second.turn_finished(REPORTS["deterministic"])
    (point,) = points(in_memory)["agentskit.chat.turns"]
    assert point.value == 2
    assert dict(point.attributes or {})["agentskit.chat.kind"] == "deterministic"
    (duration,) = points(in_memory)["agentskit.chat.turn.duration"]
    assert duration.count == 2


def test_a_turn_span_names_each_tool_call_by_name_and_id_only(in_memory: InMemory) -> None:
    report = turn(
        kind="agentic",
        route_id=None,
        tool_calls=(("call-1", "weather"), ("call-2", "refund")),
    )
    in_memory.observer.turn_finished(report)
    (span,) = in_memory.spans.get_finished_spans()
    assert [(e.name, dict(e.attributes or {})) for e in span.events] == [
        (
            "agentskit.chat.tool_call",
            {"gen_ai.tool.name": "weather", "gen_ai.tool.call.id": "call-1"},
        ),
        (
            "agentskit.chat.tool_call",
            {"gen_ai.tool.name": "refund", "gen_ai.tool.call.id": "call-2"},
        ),
    ]


def test_tool_calls_are_counted_by_tool_name_never_by_call_id(in_memory: InMemory) -> None:
    report = turn(
        kind="agentic",
        route_id=None,
        tool_calls=(("call-1", "weather"), ("call-2", "weather"), ("call-3", "refund")),
    )
    in_memory.observer.turn_finished(report)
    counted = {
        dict(p.attributes or {})["gen_ai.tool.name"]: (p.value, dict(p.attributes or {}))
        for p in points(in_memory)["agentskit.chat.tool_calls"]
    }
    assert {name: value for name, (value, _) in counted.items()} == {"weather": 2, "refund": 1}
    assert all("gen_ai.tool.call.id" not in attributes for _, attributes in counted.values())


def test_the_tool_names_counted_are_bounded(in_memory: InMemory) -> None:
    calls = tuple((f"c{i}", f"tool{i}") for i in range(TOOL_NAMES + 5))
    in_memory.observer.turn_finished(turn(kind="agentic", route_id=None, tool_calls=calls))
    names = [
        dict(p.attributes or {})["gen_ai.tool.name"]
        for p in points(in_memory)["agentskit.chat.tool_calls"]
    ]
    assert len(names) == TOOL_NAMES + 1
    assert "_other" in names
