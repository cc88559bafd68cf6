"""A real OTLP/gRPC receiver for the tests and the benchmarks' collector: collects what
exporters send, or fails, or stalls.

    with OtlpReceiver() as receiver:
        env = receiver.env()            # OTEL_EXPORTER_OTLP_ENDPOINT and friends
        ...                             # run something that exports to it
        spans = receiver.wait_for_spans(lambda span: span.name.startswith("chat.turn"))

It runs a synchronous `grpc.server` on a thread pool, bound to 127.0.0.1 on a free port,
so it works from plain tests, from tests running an asyncio loop, and for a server in
another process. `fail()` answers every export with an error (UNAVAILABLE by default),
`hold()` keeps exports waiting until `release()`, `slow(seconds)` delays each one.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from concurrent import futures
from dataclasses import dataclass, field
from typing import Any, Literal, Self

import grpc
from google.protobuf.message import Message
from opentelemetry.proto.collector.metrics.v1 import metrics_service_pb2, metrics_service_pb2_grpc
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc
from opentelemetry.proto.common.v1.common_pb2 import AnyValue, KeyValue
from opentelemetry.proto.metrics.v1 import metrics_pb2
from opentelemetry.proto.trace.v1 import trace_pb2

Signal = Literal["traces", "metrics"]
MAX_HOLD_SECONDS = 60.0
"""A held export is let go after this long even without `release()`."""


@dataclass(frozen=True)
class ReceivedSpan:
    """One span as the receiver got it; ids are lowercase hex, `parent_span_id` None at a root."""

    name: str
    trace_id: str
    span_id: str
    parent_span_id: str | None
    kind: str
    """`SERVER`, `CLIENT`, `INTERNAL`, `PRODUCER`, `CONSUMER` or `UNSPECIFIED`."""
    attributes: dict[str, Any]
    events: list[tuple[str, dict[str, Any]]]
    status: str
    """`UNSET`, `OK` or `ERROR`."""
    status_message: str
    start_ns: int
    end_ns: int
    resource: dict[str, Any] = field(repr=False)
    scope: str = ""


@dataclass(frozen=True)
class ReceivedPoint:
    """One metric data point; `value` is the number, or a histogram's sum."""

    metric: str
    unit: str
    kind: str
    """`sum`, `gauge`, `histogram`, `exponential_histogram` or `summary`."""
    monotonic: bool
    attributes: dict[str, Any]
    value: float
    count: int | None = None
    bounds: tuple[float, ...] = ()
    bucket_counts: tuple[int, ...] = ()
    resource: dict[str, Any] = field(default_factory=dict, repr=False)


def value_of(value: AnyValue) -> Any:
    """A Python value from an OTLP AnyValue (arrays become lists, kvlists dicts)."""
    which = value.WhichOneof("value")
    if which is None:
        return None
    if which == "array_value":
        return [value_of(item) for item in value.array_value.values]
    if which == "kvlist_value":
        return attributes_of(value.kvlist_value.values)
    return getattr(value, which)


def attributes_of(pairs: Iterator[KeyValue] | Any) -> dict[str, Any]:
    """A dict from repeated OTLP KeyValue."""
    return {pair.key: value_of(pair.value) for pair in pairs}


class OtlpReceiver:
    """An OTLP/gRPC trace and metrics collector on 127.0.0.1 that keeps every request."""

    def __init__(self, host: str = "127.0.0.1", *, workers: int = 8) -> None:
        self._host = host
        self._workers = workers
        self._server: grpc.Server | None = None
        self._port = 0
        self._lock = threading.Condition()
        self._requests: dict[Signal, list[Message]] = {"traces": [], "metrics": []}
        self._attempts: dict[Signal, int] = {"traces": 0, "metrics": 0}
        self._failure: tuple[grpc.StatusCode, float | None] | None = None
        self._delay = 0.0
        self._gate = threading.Event()
        self._gate.set()
        self._held = 0
        self._stopping = threading.Event()

    # Lifecycle

    def start(self) -> Self:
        """Bind a free port and serve."""
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=self._workers))
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(  # type: ignore[no-untyped-call]
            _TraceService(self), server
        )
        metrics_service_pb2_grpc.add_MetricsServiceServicer_to_server(  # type: ignore[no-untyped-call]
            _MetricsService(self), server
        )
        self._port = server.add_insecure_port(f"{self._host}:0")
        server.start()
        self._server = server
        return self

    def stop(self) -> None:
        """Let held exports go and stop serving."""
        self._stopping.set()
        self._gate.set()
        if self._server is not None:
            self._server.stop(grace=None).wait()
            self._server = None

    def __enter__(self) -> Self:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        return self._port

    @property
    def endpoint(self) -> str:
        """`http://127.0.0.1:PORT`, the form `OTEL_EXPORTER_OTLP_ENDPOINT` takes."""
        return f"http://{self._host}:{self._port}"

    def env(self, **extra: str) -> dict[str, str]:
        """Environment variables that point a process's OTLP exporters here, quickly."""
        return {
            "OTEL_EXPORTER_OTLP_ENDPOINT": self.endpoint,
            "OTEL_EXPORTER_OTLP_INSECURE": "true",
            "OTEL_BSP_SCHEDULE_DELAY": "100",
            "OTEL_METRIC_EXPORT_INTERVAL": "500",
            **extra,
        }

    # Behaviour

    def fail(
        self,
        code: grpc.StatusCode = grpc.StatusCode.UNAVAILABLE,
        *,
        retry_delay: float | None = None,
    ) -> None:
        """Answer every export with `code`; `retry_delay` adds a RetryInfo the exporter obeys."""
        with self._lock:
            self._failure = (code, retry_delay)

    def hold(self) -> None:
        """Keep exports waiting (up to MAX_HOLD_SECONDS) until `release()`."""
        self._gate.clear()

    def release(self) -> None:
        """Let held exports (and later ones) through."""
        self._gate.set()

    def slow(self, seconds: float) -> None:
        """Delay each export by `seconds` before answering."""
        with self._lock:
            self._delay = seconds

    def recover(self) -> None:
        """Accept exports again promptly: no failure, no delay, nothing held."""
        with self._lock:
            self._failure = None
            self._delay = 0.0
        self._gate.set()

    @property
    def held(self) -> int:
        """Exports waiting right now because of `hold()`."""
        with self._lock:
            return self._held

    def attempts(self, signal: Signal) -> int:
        """Export calls received for `signal`, failed and held ones included."""
        with self._lock:
            return self._attempts[signal]

    # What arrived

    def trace_requests(self) -> list[trace_service_pb2.ExportTraceServiceRequest]:
        with self._lock:
            return list(self._requests["traces"])  # type: ignore[arg-type]

    def metric_requests(self) -> list[metrics_service_pb2.ExportMetricsServiceRequest]:
        with self._lock:
            return list(self._requests["metrics"])  # type: ignore[arg-type]

    def clear(self) -> None:
        """Forget what arrived so far (attempt counts included)."""
        with self._lock:
            for signal in ("traces", "metrics"):
                self._requests[signal].clear()
                self._attempts[signal] = 0

    def spans(self) -> list[ReceivedSpan]:
        """Every span received, flattened, in arrival order."""
        return [
            _span(span, resource, scope.scope.name)
            for request in self.trace_requests()
            for resource_spans in request.resource_spans
            for resource in (attributes_of(resource_spans.resource.attributes),)
            for scope in resource_spans.scope_spans
            for span in scope.spans
        ]

    def metric_points(self, name: str | None = None) -> list[ReceivedPoint]:
        """Every data point received (of metric `name`), flattened, in arrival order."""
        return [
            point
            for request in self.metric_requests()
            for resource_metrics in request.resource_metrics
            for resource in (attributes_of(resource_metrics.resource.attributes),)
            for scope in resource_metrics.scope_metrics
            for metric in scope.metrics
            if name is None or metric.name == name
            for point in _points(metric, resource)
        ]

    def metric_names(self) -> set[str]:
        return {point.metric for point in self.metric_points()}

    def wait_for_spans(
        self,
        predicate: Callable[[ReceivedSpan], bool] = lambda span: True,
        *,
        count: int = 1,
        timeout: float = 10.0,
    ) -> list[ReceivedSpan]:
        """The matching spans once at least `count` arrived; AssertionError after `timeout`."""
        return self._wait(lambda: [s for s in self.spans() if predicate(s)], count, timeout)

    def wait_for_metric(
        self,
        name: str,
        predicate: Callable[[ReceivedPoint], bool] = lambda point: True,
        *,
        timeout: float = 10.0,
    ) -> list[ReceivedPoint]:
        """The points of metric `name` matching `predicate` once one arrived."""
        return self._wait(lambda: [p for p in self.metric_points(name) if predicate(p)], 1, timeout)

    def wait_for_attempts(self, signal: Signal, count: int, *, timeout: float = 10.0) -> int:
        """The number of export calls for `signal` once it reached `count`."""
        self._wait(lambda: [None] * self.attempts(signal), count, timeout)
        return self.attempts(signal)

    def wait_for_held(self, count: int = 1, *, timeout: float = 10.0) -> None:
        """Return once `count` exports are being held."""
        self._wait(lambda: [None] * self.held, count, timeout)

    def _wait(self, found: Callable[[], list[Any]], count: int, timeout: float) -> list[Any]:
        deadline = time.monotonic() + timeout
        with self._lock:
            while True:
                items = found()
                if len(items) >= count:
                    return items
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError(f"wanted {count}, got {len(items)} within {timeout} s")
                self._lock.wait(min(remaining, 0.1))

    # Serving

    def _export(self, signal: Signal, request: Message, context: grpc.ServicerContext) -> None:
        with self._lock:
            self._attempts[signal] += 1
            failure, delay = self._failure, self._delay
            self._lock.notify_all()
        if not self._gate.is_set():
            with self._lock:
                self._held += 1
                self._lock.notify_all()
            try:
                self._gate.wait(MAX_HOLD_SECONDS)
            finally:
                with self._lock:
                    self._held -= 1
        if delay:
            self._stopping.wait(delay)
        if failure is not None:
            code, retry_delay = failure
            if retry_delay is not None:
                context.set_trailing_metadata(
                    (("google.rpc.retryinfo-bin", _retry_info(retry_delay)),)
                )
            context.abort(code, "the test receiver refuses exports")
        with self._lock:
            self._requests[signal].append(request)
            self._lock.notify_all()


class _TraceService(trace_service_pb2_grpc.TraceServiceServicer):
    def __init__(self, receiver: OtlpReceiver) -> None:
        self._receiver = receiver

    def Export(  # noqa: N802 - the gRPC method's name
        self,
        request: trace_service_pb2.ExportTraceServiceRequest,
        context: grpc.ServicerContext,
    ) -> trace_service_pb2.ExportTraceServiceResponse:
        self._receiver._export("traces", request, context)
        return trace_service_pb2.ExportTraceServiceResponse()


class _MetricsService(metrics_service_pb2_grpc.MetricsServiceServicer):
    def __init__(self, receiver: OtlpReceiver) -> None:
        self._receiver = receiver

    def Export(  # noqa: N802 - the gRPC method's name
        self,
        request: metrics_service_pb2.ExportMetricsServiceRequest,
        context: grpc.ServicerContext,
    ) -> metrics_service_pb2.ExportMetricsServiceResponse:
        self._receiver._export("metrics", request, context)
        return metrics_service_pb2.ExportMetricsServiceResponse()


def _retry_info(seconds: float) -> bytes:
    from google.rpc.error_details_pb2 import RetryInfo

    info = RetryInfo()
    info.retry_delay.FromNanoseconds(int(seconds * 1e9))
    data: bytes = info.SerializeToString()
    return data


_KINDS = {
    trace_pb2.Span.SPAN_KIND_UNSPECIFIED: "UNSPECIFIED",
    trace_pb2.Span.SPAN_KIND_INTERNAL: "INTERNAL",
    trace_pb2.Span.SPAN_KIND_SERVER: "SERVER",
    trace_pb2.Span.SPAN_KIND_CLIENT: "CLIENT",
    trace_pb2.Span.SPAN_KIND_PRODUCER: "PRODUCER",
    trace_pb2.Span.SPAN_KIND_CONSUMER: "CONSUMER",
}
_STATUSES = {
    trace_pb2.Status.STATUS_CODE_UNSET: "UNSET",
    trace_pb2.Status.STATUS_CODE_OK: "OK",
    trace_pb2.Status.STATUS_CODE_ERROR: "ERROR",
}


def _span(span: trace_pb2.Span, resource: dict[str, Any], scope: str) -> ReceivedSpan:
    return ReceivedSpan(
        name=span.name,
        trace_id=span.trace_id.hex(),
        span_id=span.span_id.hex(),
        parent_span_id=span.parent_span_id.hex() or None,
        kind=_KINDS[span.kind],
        attributes=attributes_of(span.attributes),
        events=[(event.name, attributes_of(event.attributes)) for event in span.events],
        status=_STATUSES[span.status.code],
        status_message=span.status.message,
        start_ns=span.start_time_unix_nano,
        end_ns=span.end_time_unix_nano,
        resource=resource,
        scope=scope,
    )


def _points(metric: metrics_pb2.Metric, resource: dict[str, Any]) -> list[ReceivedPoint]:
    kind = metric.WhichOneof("data") or ""

    def point(source: Any, value: float, **more: Any) -> ReceivedPoint:
        return ReceivedPoint(
            metric=metric.name,
            unit=metric.unit,
            kind=kind,
            monotonic=kind == "sum" and metric.sum.is_monotonic,
            attributes=attributes_of(source.attributes),
            value=value,
            resource=resource,
            **more,
        )

    if kind in ("sum", "gauge"):
        return [
            point(p, p.as_int if p.WhichOneof("value") == "as_int" else p.as_double)
            for p in getattr(metric, kind).data_points
        ]
    if kind == "histogram":
        return [
            point(
                p,
                p.sum,
                count=p.count,
                bounds=tuple(p.explicit_bounds),
                bucket_counts=tuple(p.bucket_counts),
            )
            for p in metric.histogram.data_points
        ]
    data = getattr(metric, kind).data_points if kind else []
    return [point(p, float(getattr(p, "sum", 0.0)), count=getattr(p, "count", None)) for p in data]
