"""Fixtures: a live OTLP receiver, in-memory providers, and log state restored after each test."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import pytest
import structlog
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_ON, ParentBased, Sampler, SamplingResult

from agentskit_chat.telemetry import OtelObserver

from .receiver import OtlpReceiver


@pytest.fixture
def otlp_receiver() -> Iterator[OtlpReceiver]:
    """A started OTLP/gRPC receiver on 127.0.0.1; stopped (held exports released) after."""
    with OtlpReceiver() as receiver:
        yield receiver


class InMemory:
    """An observer wired to in-memory span and metric sinks."""

    def __init__(self) -> None:
        self.spans = InMemorySpanExporter()
        self.reader = InMemoryMetricReader()
        self.tracer_provider = TracerProvider(shutdown_on_exit=False)
        self.tracer_provider.add_span_processor(SimpleSpanProcessor(self.spans))
        self.meter_provider = MeterProvider(metric_readers=[self.reader], shutdown_on_exit=False)
        self.observer = OtelObserver(self.tracer_provider, self.meter_provider)

    def close(self) -> None:
        self.tracer_provider.shutdown()
        self.meter_provider.shutdown()


class CountingSampler(ParentBased):
    """The default parent-based sampler, counting the decisions it is asked for."""

    def __init__(self, **delegates: Sampler) -> None:
        super().__init__(ALWAYS_ON, **delegates)
        self.decisions = 0

    def should_sample(self, *args: Any, **kwargs: Any) -> SamplingResult:
        self.decisions += 1
        return super().should_sample(*args, **kwargs)


def sampled_by(sinks: InMemory, sampler: Sampler) -> None:
    """Spans of `sinks` from here on go through `sampler`."""
    sinks.tracer_provider.shutdown()  # which stops its exporter too
    sinks.spans = InMemorySpanExporter()
    sinks.tracer_provider = TracerProvider(sampler=sampler, shutdown_on_exit=False)
    sinks.tracer_provider.add_span_processor(SimpleSpanProcessor(sinks.spans))
    sinks.observer = OtelObserver(sinks.tracer_provider, sinks.meter_provider)


@pytest.fixture
def in_memory() -> Iterator[InMemory]:
    sinks = InMemory()
    yield sinks
    sinks.close()


@pytest.fixture(autouse=True)
def _restore_logging() -> Iterator[None]:
    """configure_logging and configure_telemetry change process-wide logging; undo that."""
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    yield
    for handler in list(root.handlers):
        if handler not in handlers:
            root.removeHandler(handler)
    root.setLevel(level)
    structlog.reset_defaults()
