"""Server tool calls in telemetry: the execute_tool span and duration, and no content."""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind, StatusCode

from agentskit_chat.mcp import ServerTools, ToolOutcome
from agentskit_chat.telemetry import ToolTelemetry
from tests.mcp.conftest import BOUND, definition, stdio_server

CANARY = "canary-5be1f0"


class Sinks:
    def __init__(self) -> None:
        self.spans = InMemorySpanExporter()
        self.reader = InMemoryMetricReader()
        self.tracer_provider = TracerProvider(shutdown_on_exit=False)
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.meter_provider = MeterProvider(metric_readers=[self.reader], shutdown_on_exit=False)
        self.observer = ToolTelemetry(self.tracer_provider, self.meter_provider)

    def points(self) -> list[tuple[dict[str, Any], int]]:
        data = self.reader.get_metrics_data()
        assert data is not None
        return [
            (dict(point.attributes or {}), point.count)  # type: ignore[union-attr]
            for resource in data.resource_metrics
            for scope in resource.scope_metrics
            for metric in scope.metrics
            if metric.name == "agentskit.chat.tool.duration"
            for point in metric.data.data_points
        ]


@pytest.fixture
def sinks() -> Iterator[Sinks]:
    found = Sinks()
    yield found
    found.tracer_provider.shutdown()
    found.meter_provider.shutdown()


def calls(
    tmp_path: Path, sinks: Sinks, *arguments: tuple[str, dict[str, Any]]
) -> list[ToolOutcome]:
    chat = definition(stdio_server(tmp_path / "record.jsonl"))
    outcomes: list[ToolOutcome] = []

    async def scenario() -> None:
        with (tmp_path / "stderr.txt").open("w", encoding="utf-8") as stderr:
            tools = ServerTools([chat], observer=sinks.observer, server_stderr=stderr)
            async with asyncio.timeout(BOUND):
                await tools.start()
                try:
                    for n, (name, args) in enumerate(arguments):
                        text = json.dumps(args)
                        outcomes.append(
                            await tools.call(name, text, turn_id="turn-1", call_id=f"call-{n}")
                        )
                finally:
                    await tools.close()

    asyncio.run(scenario())
    return outcomes


def tool_spans(sinks: Sinks) -> list[ReadableSpan]:
    return [s for s in sinks.spans.get_finished_spans() if s.name.startswith("execute_tool ")]


def test_each_call_has_an_execute_tool_span_and_a_duration(tmp_path: Path, sinks: Sinks) -> None:
    calls(tmp_path, sinks, ("lookup_order", {"order_id": "A"}), ("fail", {"reason": "r"}))
    ok, failed = tool_spans(sinks)
    assert ok.name == "execute_tool lookup_order"
    assert ok.kind is SpanKind.INTERNAL
    assert dict(ok.attributes or {}) == {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "lookup_order",
        "gen_ai.tool.call.id": "call-0",
        "gen_ai.tool.type": "extension",
        "agentskit.chat.mcp.server": "orders",
    }
    assert ok.status.status_code is StatusCode.UNSET
    assert failed.name == "execute_tool fail"
    assert (failed.attributes or {})["error.type"] == "tool_error"
    assert failed.status.status_code is StatusCode.ERROR
    assert sorted(sinks.points(), key=str) == sorted(
        [
            ({"gen_ai.tool.name": "lookup_order"}, 1),
            ({"gen_ai.tool.name": "fail", "error.type": "tool_error"}, 1),
        ],
        key=str,
    )


def test_arguments_and_results_never_reach_spans_metrics_or_logs(
    tmp_path: Path, sinks: Sinks, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    outcomes = calls(
        tmp_path,
        sinks,
        ("lookup_order", {"order_id": CANARY}),
        ("count", {"key": CANARY}),
        ("fail", {"reason": CANARY}),
        ("big", {"size": 10**6, "note": CANARY}),
        ("lookup_order", {"wrong": CANARY}),
    )
    assert CANARY in outcomes[0].text  # the canary did go through the calls
    assert len(tool_spans(sinks)) == 5
    for span in sinks.spans.get_finished_spans():
        seen = [
            span.name,
            str(span.status.description),
            *map(str, (span.attributes or {}).values()),
        ]
        for event in span.events:
            seen.extend([event.name, *map(str, (event.attributes or {}).values())])
        assert not [text for text in seen if CANARY in text], span.name
    assert CANARY not in repr(sinks.points())
    assert CANARY not in caplog.text
    assert not [r for r in caplog.records if CANARY in r.getMessage()]
