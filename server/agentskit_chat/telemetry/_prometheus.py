"""A Prometheus scrape endpoint over the service's metrics (the OpenTelemetry Prometheus
exporter), for clusters that scrape rather than receive OTLP.

The endpoint serves its own registry, so it shows the service's metrics (and `target_info`
with the resource) and nothing else a library may have registered globally.
"""

from __future__ import annotations

import threading
from wsgiref.simple_server import WSGIServer

from opentelemetry.exporter.prometheus import PrometheusMetricReader
from prometheus_client import CollectorRegistry, start_http_server


def split_listen(listen: str) -> tuple[str, int]:
    """`HOST:PORT` (IPv6 hosts in brackets) as a host and a port; ValueError when malformed."""
    host, sep, port = listen.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"--metrics-listen wants HOST:PORT, such as 127.0.0.1:9464: {listen!r}")
    return host, int(port)


class PrometheusEndpoint:
    """The metric reader and the HTTP server that answers scrapes with what it reads."""

    def __init__(self, listen: str) -> None:
        host, port = split_listen(listen)
        self.registry = CollectorRegistry()
        self.reader = PrometheusMetricReader(registry=self.registry)
        self._server: WSGIServer
        self._thread: threading.Thread
        self._server, self._thread = start_http_server(port, addr=host, registry=self.registry)
        self.host = host
        self.port: int = self._server.server_port

    @property
    def address(self) -> str:
        """`host:port` the endpoint listens on (the port chosen when 0 was asked for)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"

    def shutdown(self) -> None:
        """Stop answering scrapes."""
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
