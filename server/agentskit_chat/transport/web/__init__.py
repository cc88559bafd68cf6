"""The HTTP listener for browsers: Connect (JSON and binary) and gRPC-Web over HTTP/1.1 and
HTTP/2, CORS for configured origins, `/healthz`, and optionally a renderer's static files,
all over the same service as the gRPC listener."""

from ._app import HEALTH_PATH, web_app
from ._listener import HttpListener, HttpSettings, start_http
from .boundary.cors import OriginError, checked_origins
from .boundary.fronts import RequestTelemetry
from .boundary.static import StaticFiles

__all__ = [
    "HEALTH_PATH",
    "HttpListener",
    "HttpSettings",
    "OriginError",
    "RequestTelemetry",
    "StaticFiles",
    "checked_origins",
    "start_http",
    "web_app",
]
