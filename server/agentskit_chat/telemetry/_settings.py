"""Which telemetry to produce, read from the standard OpenTelemetry environment variables."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final
from urllib.parse import unquote

DEFAULT_SERVICE_NAME: Final = "agentskit-chat"


@dataclass(frozen=True, slots=True)
class TelemetrySettings:
    """What `configure_telemetry` sets up; the default exports nothing."""

    service_name: str = DEFAULT_SERVICE_NAME
    traces_endpoint: str | None = None
    """OTLP/gRPC endpoint for spans; None sends no spans over OTLP."""
    metrics_endpoint: str | None = None
    """OTLP/gRPC endpoint for metrics; None sends no metrics over OTLP."""
    console_traces: bool = False
    """Also write finished spans to stderr, for local debugging."""
    console_metrics: bool = False
    """Also write metrics to stderr every export interval."""
    disabled: bool = False
    """`OTEL_SDK_DISABLED=true`: no spans and no metrics whatever else is set."""
    prometheus_listen: str | None = None
    """`HOST:PORT` of a Prometheus scrape endpoint over the metrics; None serves none."""
    rpc_spans: bool = True
    """A SERVER span per RPC (`serve --rpc-spans`); off leaves it to a mesh proxy, and the
    turn span continues the caller's trace directly."""

    @property
    def traces(self) -> bool:
        """Whether spans are recorded (some exporter takes them)."""
        return not self.disabled and (self.traces_endpoint is not None or self.console_traces)

    @property
    def metrics(self) -> bool:
        """Whether metrics are recorded (some exporter takes them)."""
        return not self.disabled and (
            self.metrics_endpoint is not None
            or self.console_metrics
            or self.prometheus_listen is not None
        )

    @property
    def enabled(self) -> bool:
        """Whether any span or metric leaves the process."""
        return self.traces or self.metrics


def settings_from_env(
    environ: Mapping[str, str] | None = None,
    *,
    console: bool = False,
    prometheus_listen: str | None = None,
    rpc_spans: bool = True,
) -> TelemetrySettings:
    """Settings from `OTEL_*` variables (the process environment by default).

    OTLP is used for a signal only when `OTEL_EXPORTER_OTLP_ENDPOINT` or the signal's own
    `OTEL_EXPORTER_OTLP_{TRACES,METRICS}_ENDPOINT` is set and `OTEL_{TRACES,METRICS}_EXPORTER`
    (default `otlp`) names `otlp`; `console` there, or `console=True` (the
    `--telemetry-console` flag), adds a stderr exporter; `none` turns the signal's exporters
    off. The exporters and processors read the other standard variables (headers, insecure,
    timeouts, batch sizes, export interval) themselves.
    """
    env = os.environ if environ is None else environ
    disabled = _get(env, "OTEL_SDK_DISABLED", "").lower() == "true"
    traces = _exporters(env, "OTEL_TRACES_EXPORTER")
    metrics = _exporters(env, "OTEL_METRICS_EXPORTER")
    default_endpoint = _get(env, "OTEL_EXPORTER_OTLP_ENDPOINT", "") or None
    traces_endpoint = _get(env, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "") or default_endpoint
    metrics_endpoint = _get(env, "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT", "") or default_endpoint
    return TelemetrySettings(
        service_name=_service_name(env),
        traces_endpoint=traces_endpoint if "otlp" in traces else None,
        metrics_endpoint=metrics_endpoint if "otlp" in metrics else None,
        console_traces=console or "console" in traces,
        console_metrics=console or "console" in metrics,
        disabled=disabled,
        prometheus_listen=prometheus_listen,
        rpc_spans=rpc_spans,
    )


def _get(env: Mapping[str, str], name: str, default: str) -> str:
    return env.get(name, default).strip()


def _exporters(env: Mapping[str, str], name: str) -> frozenset[str]:
    names = {part.strip().lower() for part in _get(env, name, "otlp").split(",")}
    names.discard("")
    return frozenset() if "none" in names else frozenset(names or {"otlp"})


def _service_name(env: Mapping[str, str]) -> str:
    """`OTEL_SERVICE_NAME`, else `service.name` in `OTEL_RESOURCE_ATTRIBUTES`, else ours."""
    named = _get(env, "OTEL_SERVICE_NAME", "")
    if named:
        return named
    for pair in _get(env, "OTEL_RESOURCE_ATTRIBUTES", "").split(","):
        key, sep, value = pair.partition("=")
        if sep and key.strip() == "service.name" and value.strip():
            return unquote(value.strip())
    return DEFAULT_SERVICE_NAME
