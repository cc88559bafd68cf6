"""Telemetry adapters: OpenTelemetry spans and metrics, and structlog lines, for each turn.

`configure_telemetry(settings_from_env())` builds the providers (exporting over OTLP/gRPC
only when an `OTEL_EXPORTER_OTLP_*ENDPOINT` is set, serving a Prometheus scrape endpoint
when the settings name one); its `observer` goes to the service and its
`server_interceptors()` (SERVER spans, `rpc.server.call.duration`, the caller's trace
context) to the gRPC server. `configure_logging` sets up stdout, never blocking on it.
"""

from ._grpc import server_interceptors
from ._http import HttpTelemetry
from ._logging import configure_logging
from ._observer import OtelObserver, TurnRecorder, log_fields, turn_observer
from ._once import LogOnce
from ._settings import DEFAULT_SERVICE_NAME, TelemetrySettings, settings_from_env
from ._setup import Telemetry, configure_telemetry
from ._tools import ToolTelemetry, tool_observer

__all__ = [
    "DEFAULT_SERVICE_NAME",
    "HttpTelemetry",
    "LogOnce",
    "OtelObserver",
    "Telemetry",
    "TelemetrySettings",
    "ToolTelemetry",
    "TurnRecorder",
    "configure_logging",
    "configure_telemetry",
    "log_fields",
    "server_interceptors",
    "settings_from_env",
    "tool_observer",
    "turn_observer",
]
