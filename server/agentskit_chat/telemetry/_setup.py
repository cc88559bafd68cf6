"""Providers, exporters and their bounded shutdown, held by one Telemetry object."""

from __future__ import annotations

import atexit
import logging
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Protocol

import grpc
from opentelemetry import metrics, trace
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import (
    ConsoleMetricExporter,
    MetricExporter,
    MetricReader,
    PeriodicExportingMetricReader,
)
from opentelemetry.sdk.resources import SERVICE_NAME, SERVICE_VERSION, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, ConsoleSpanExporter, SpanExporter

from agentskit_chat import __version__
from agentskit_chat.mcp import ToolObserver

from ._connect import ConnectTelemetry
from ._grpc import server_interceptors
from ._http import HttpTelemetry
from ._observer import TurnRecorder, turn_observer
from ._once import LogOnce, otel_loggers
from ._prometheus import PrometheusEndpoint
from ._settings import TelemetrySettings
from ._tools import tool_observer

log = logging.getLogger("agentskit_chat.telemetry")

DEFAULT_SHUTDOWN_SECONDS = 5.0
ABORT_SECONDS = 1.0
"""How long stopped exporters get to let the flushing threads finish."""


class _Stoppable(Protocol):
    def shutdown(self) -> None: ...


class Telemetry:
    """The process's tracer and meter providers, its turn observer and gRPC interceptors.

    Built by `configure_telemetry`; the providers are private to this object until
    `install_global` makes them the process's own. When `enabled` is false, `observer`
    only writes the turn log line.
    """

    def __init__(
        self,
        tracer_provider: TracerProvider | None = None,
        meter_provider: MeterProvider | None = None,
        *,
        exporters: Sequence[_Stoppable] = (),
        log_filter: LogOnce | None = None,
        prometheus: PrometheusEndpoint | None = None,
        rpc_spans: bool = True,
    ) -> None:
        self.tracer_provider = tracer_provider
        self.meter_provider = meter_provider
        self.prometheus = prometheus
        """The scrape endpoint, when `--metrics-listen` asked for one."""
        self.rpc_spans = rpc_spans
        """Whether each RPC gets a SERVER span (off: a mesh proxy makes it; the turn span
        continues the caller's trace directly and carries the RPC method)."""
        self.observer: TurnRecorder = turn_observer(tracer_provider, meter_provider)
        self._exporters = tuple(exporters)
        self._log_filter = log_filter
        self._lock = threading.Lock()
        self._stopped = False
        if self.enabled:
            atexit.register(self.shutdown)

    @property
    def enabled(self) -> bool:
        """Whether spans or metrics are recorded."""
        return self.tracer_provider is not None or self.meter_provider is not None

    def install_global(self) -> None:
        """Make these providers the process's global ones; the API allows that once.

        Application code (route handlers, response callables) can then record spans
        and metrics through `opentelemetry.trace.get_tracer` and
        `opentelemetry.metrics.get_meter`, exported with the service's own. A provider
        that is off stays unset, so such code keeps the API's no-op default.
        """
        if self.tracer_provider is not None:
            trace.set_tracer_provider(self.tracer_provider)
            if trace.get_tracer_provider() is not self.tracer_provider:
                log.warning("another tracer provider is global; route code's spans go there")
        if self.meter_provider is not None:
            metrics.set_meter_provider(self.meter_provider)
            if metrics.get_meter_provider() is not self.meter_provider:
                log.warning("another meter provider is global; route code's metrics go there")

    def server_interceptors(self) -> list[grpc.aio.ServerInterceptor]:
        """The gRPC interceptor: SERVER spans and `rpc.server.call.duration` when those are
        on, and always the caller's trace context, which the turn log line carries."""
        return server_interceptors(
            self.tracer_provider, self.meter_provider, rpc_spans=self.rpc_spans
        )

    def connect_interceptor(self) -> ConnectTelemetry:
        """The same for the HTTP listener's Connect and gRPC-Web calls."""
        return ConnectTelemetry(self.tracer_provider, self.meter_provider, rpc_spans=self.rpc_spans)

    def tool_observer(self) -> ToolObserver:
        """The observer of server tool calls: `execute_tool` spans and their duration."""
        return tool_observer(self.tracer_provider, self.meter_provider)

    def http_telemetry(self) -> HttpTelemetry:
        """The same for the HTTP listener's framework fronts (AG-UI, AI SDK, OpenAI)."""
        return HttpTelemetry(self.tracer_provider, self.meter_provider)

    def force_flush(self, timeout: float = DEFAULT_SHUTDOWN_SECONDS) -> bool:
        """Export what is pending; False when that did not finish within `timeout` seconds."""
        millis = int(timeout * 1000)
        calls: list[Callable[[], object]] = []
        tracer_provider, meter_provider = self.tracer_provider, self.meter_provider
        if tracer_provider is not None:
            calls.append(lambda: tracer_provider.force_flush(millis))
        if meter_provider is not None:
            calls.append(lambda: meter_provider.force_flush(millis))
        return not _within(calls, timeout)

    def shutdown(self, timeout: float = DEFAULT_SHUTDOWN_SECONDS) -> None:
        """Flush and stop within about `timeout` seconds, even when the collector is down.

        What is not exported by then is dropped. Safe to call more than once.
        """
        with self._lock:
            if self._stopped:
                return
            self._stopped = True
        atexit.unregister(self.shutdown)
        millis = int(timeout * 1000)
        calls: list[Callable[[], object]] = []
        tracer_provider, meter_provider = self.tracer_provider, self.meter_provider
        if tracer_provider is not None:
            calls.append(tracer_provider.shutdown)
        if meter_provider is not None:
            calls.append(lambda: meter_provider.shutdown(millis))
        running = _within(calls, timeout)
        if running:
            log.warning("telemetry was not flushed within %.1f s; the rest is dropped", timeout)
            for exporter in self._exporters:  # Aborts retries and exports in flight.
                _quietly(exporter.shutdown)
            _join(running, time.monotonic() + min(timeout, ABORT_SECONDS))
        if self.prometheus is not None:
            _quietly(self.prometheus.shutdown)
        if self._log_filter is not None:
            self._log_filter.detach()


def configure_telemetry(
    settings: TelemetrySettings,
    *,
    span_exporters: Sequence[SpanExporter] = (),
    metric_readers: Sequence[MetricReader] = (),
) -> Telemetry:
    """Build the providers and exporters `settings` ask for (nothing by default).

    Spans go through a BatchSpanProcessor and metrics through a
    PeriodicExportingMetricReader, so exports run on their own threads and a full queue
    drops spans instead of blocking a turn. `span_exporters` and `metric_readers` add sinks
    of the caller's own (they too are off when the SDK is disabled).
    """
    if settings.disabled or not (settings.enabled or span_exporters or metric_readers):
        return Telemetry(rpc_spans=settings.rpc_spans)
    resource = Resource.create({SERVICE_NAME: settings.service_name, SERVICE_VERSION: __version__})
    spans = [*_span_exporters(settings), *span_exporters]
    metric_exporters = _metric_exporters(settings)
    readers = [*map(PeriodicExportingMetricReader, metric_exporters), *metric_readers]
    prometheus = None
    if settings.prometheus_listen is not None and not settings.disabled:
        prometheus = PrometheusEndpoint(settings.prometheus_listen)  # OSError when taken
        readers.append(prometheus.reader)
    tracer_provider = None
    if spans:
        tracer_provider = TracerProvider(resource=resource, shutdown_on_exit=False)
        for exporter in spans:
            tracer_provider.add_span_processor(BatchSpanProcessor(exporter))
    meter_provider = None
    if readers:
        meter_provider = MeterProvider(
            metric_readers=readers, resource=resource, shutdown_on_exit=False
        )
    exporters: list[_Stoppable] = [*spans, *metric_exporters]
    log_filter = LogOnce()
    log_filter.attach(otel_loggers())
    log.info(
        "telemetry: spans to %s%s; metrics to %s",
        _sinks(settings.traces_endpoint, settings.console_traces, span_exporters),
        "" if settings.rpc_spans else " (no RPC SERVER spans)",
        _sinks(settings.metrics_endpoint, settings.console_metrics, metric_readers, prometheus),
    )
    return Telemetry(
        tracer_provider,
        meter_provider,
        exporters=exporters,
        log_filter=log_filter,
        prometheus=prometheus,
        rpc_spans=settings.rpc_spans,
    )


def _span_exporters(settings: TelemetrySettings) -> list[SpanExporter]:
    exporters: list[SpanExporter] = []
    if settings.traces_endpoint is not None:
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter

        exporters.append(OTLPSpanExporter(endpoint=settings.traces_endpoint))
    if settings.console_traces:
        exporters.append(ConsoleSpanExporter(out=sys.stderr))
    return exporters


def _metric_exporters(settings: TelemetrySettings) -> list[MetricExporter]:
    exporters: list[MetricExporter] = []
    if settings.metrics_endpoint is not None:
        from opentelemetry.exporter.otlp.proto.grpc.metric_exporter import OTLPMetricExporter

        exporters.append(OTLPMetricExporter(endpoint=settings.metrics_endpoint))
    if settings.console_metrics:
        exporters.append(ConsoleMetricExporter(out=sys.stderr))
    return exporters


def _sinks(
    endpoint: str | None,
    console: bool,
    extra: Sequence[object],
    prometheus: PrometheusEndpoint | None = None,
) -> str:
    names = [f"OTLP {endpoint}"] if endpoint else []
    if prometheus is not None:
        names.append(f"Prometheus scrapes at http://{prometheus.address}/metrics")
    if console:
        names.append("stderr")
    if extra:
        names.append("in-process")
    return ", ".join(names) or "nowhere"


def _within(calls: Sequence[Callable[[], object]], timeout: float) -> list[threading.Thread]:
    """Run `calls` side by side on daemon threads; those still running after `timeout`.

    Threads still running are left behind; being daemons, they never hold up the
    process's exit. Where no thread can start any more (late in interpreter shutdown),
    the calls run in turn, bounded only by the exporters' own timeouts.
    """
    deadline = time.monotonic() + timeout
    threads: list[threading.Thread] = []
    for call in calls:
        thread = threading.Thread(
            target=_quietly, args=(call,), name="telemetry-flush", daemon=True
        )
        try:
            thread.start()
        except RuntimeError:
            _quietly(call)
        else:
            threads.append(thread)
    return _join(threads, deadline)


def _join(threads: Sequence[threading.Thread], deadline: float) -> list[threading.Thread]:
    for thread in threads:
        thread.join(max(0.0, deadline - time.monotonic()))
    return [thread for thread in threads if thread.is_alive()]


def _quietly(call: Callable[[], object]) -> None:
    try:
        call()
    except Exception:
        log.warning("flushing telemetry failed", exc_info=True)
