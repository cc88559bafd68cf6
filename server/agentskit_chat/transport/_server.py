"""A grpc.aio server hosting ChatService, health and reflection, with a draining stop."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from agentskit.chat.v1 import chat_pb2, chat_pb2_grpc
from agentskit_chat.service import ChatService

from ._auth import Authenticator
from ._guard import Guard
from ._health import HealthService
from ._lifetime import ConnectionLifetime
from ._reflection import enable_reflection
from ._servicer import ChatServicer
from ._tls import ServerTls

if TYPE_CHECKING:
    from connectrpc.interceptor import Interceptor

    from .web import HttpListener, HttpSettings, RequestTelemetry

log = logging.getLogger(__name__)

SERVICE_NAME: Final = chat_pb2.DESCRIPTOR.services_by_name["ChatService"].full_name
DEFAULT_MAX_REQUEST_BYTES: Final = 4 * 1024 * 1024
CLEANUP_SECONDS: Final = 5.0
CALLS_AFTER_TURNS_SECONDS: Final = 2.0
"""How long a drain lets other calls finish once no turn is in flight."""
HANDSHAKE_SECONDS: Final = 5.0
"""How long a new connection has to finish its handshake (TLS, then the HTTP/2 preface and
settings; on the HTTP listener, up to the first request's headers) before it is closed."""


@dataclass
class RunningServer:
    """A started server; `port` is the bound port (useful with port 0)."""

    server: grpc.aio.Server
    service: ChatService
    health: HealthService
    port: int
    http: HttpListener | None = None
    """The HTTP listener for browsers, when `serve --http-listen` asked for one."""

    async def drain(self, grace: float, delay: float = 0.0) -> None:
        """Stop taking turns, let turns in flight finish within `grace` seconds, then stop.

        Health reports NOT_SERVING first, so balancers move traffic away. For `delay`
        seconds new turns are still served, since balancers and meshes take a moment to
        stop sending to an endpoint; then new turns are refused with UNAVAILABLE while
        in-flight turns finish.
        """
        loop = asyncio.get_running_loop()
        for name in ("", SERVICE_NAME):
            await self.health.set(name, health_pb2.HealthCheckResponse.NOT_SERVING)
        if delay > 0:
            await asyncio.sleep(delay)
        until = loop.time() + grace
        self.service.begin_drain()
        stop_within = 0.0  # The grace is over when waiting for turns times out.
        try:
            await asyncio.wait_for(self.service.turns.wait_idle(), grace)
            # Without turns, what is left are short calls, and streams nobody reads (a
            # health watch, a turn stream whose client stopped reading): no need to wait
            # the whole grace for those.
            stop_within = min(until - loop.time(), CALLS_AFTER_TURNS_SECONDS)
        except TimeoutError:
            log.warning("grace period over with %d turns in flight", self.service.turns.in_flight)
        stop_within = max(0.0, stop_within)
        if self.http is None:
            await self.server.stop(stop_within)
        else:
            await asyncio.gather(self.server.stop(stop_within), self.http.stop(stop_within))
        try:  # Turns cut off at the end of the grace release their leases first.
            await asyncio.wait_for(_released(self.service), CLEANUP_SECONDS)
        except TimeoutError:
            log.warning("leases of cancelled turns were not all released; they will lapse")
        await self.service.close()


async def _released(service: ChatService) -> None:
    """Wait for the closing writes of turns, including releases the store refused at first."""
    await service.turns.wait_idle()
    await service.turns.releases.wait()


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    """What one client can hold open; past a limit gRPC itself refuses or closes."""

    max_connections: int = 1024
    """Open connections; one more is closed during its handshake (clients see UNAVAILABLE)."""
    max_streams_per_connection: int = 100
    """Calls in flight on one connection; further calls wait until one ends."""
    max_idle_seconds: float = 300.0
    """A connection without calls for this long is closed (GOAWAY; clients reconnect)."""
    handshake_seconds: float = HANDSHAKE_SECONDS
    """A connection that has not finished its handshake this long after it was accepted is
    closed, so sockets that never speak do not hold places under `max_connections`."""

    def __post_init__(self) -> None:
        if min(self.max_connections, self.max_streams_per_connection) < 1:
            raise ValueError("connection and stream limits must be at least 1")
        if self.max_idle_seconds <= 0:
            raise ValueError("the idle connection limit must be positive")
        if self.handshake_seconds <= 0:
            raise ValueError("the handshake timeout must be positive")

    def options(self) -> list[tuple[str, int]]:
        """The grpc core channel arguments."""
        return [
            ("grpc.max_allowed_incoming_connections", self.max_connections),
            ("grpc.max_concurrent_streams", self.max_streams_per_connection),
            ("grpc.http.overload_protection", 0),  # count open streams as clients do
            ("grpc.max_connection_idle_ms", int(self.max_idle_seconds * 1000)),
            ("grpc.server_handshake_timeout_ms", max(1, int(self.handshake_seconds * 1000))),
        ]


async def start_server(
    service: ChatService,
    listen: str,
    *,
    max_request_bytes: int = DEFAULT_MAX_REQUEST_BYTES,
    interceptors: Sequence[grpc.aio.ServerInterceptor] = (),
    authenticator: Authenticator | None = None,
    tls: ServerTls | None = None,
    connections: ConnectionLimits | None = None,
    lifetime: ConnectionLifetime | None = None,
    reflection_enabled: bool = True,
    reuse_port: bool = False,
    http: HttpSettings | None = None,
    http_interceptors: Sequence[Interceptor] = (),
    http_telemetry: RequestTelemetry | None = None,
) -> RunningServer:
    """Bind `listen` (host:port; port 0 picks a free one) and start serving.

    Every call passes the Guard first: with an `authenticator`, every method but health
    needs a bearer token. With `tls` the port speaks TLS (mTLS when it names a client CA).
    `lifetime` sets keepalive and the maximum connection age (defaults when None).
    `reuse_port` lets several processes listen on one port (SO_REUSEPORT), as the workers
    of `serve --workers` do; without it a second server on a taken port fails to start.
    With `http`, an HTTP listener for browsers (Connect and gRPC-Web) serves the same
    service beside it, with the same tokens, limits and TLS files; `http_interceptors`
    (telemetry) wrap its calls as `interceptors` wrap gRPC ones, and `http_telemetry` its
    framework fronts' requests.
    """
    limits = connections or ConnectionLimits()
    server = grpc.aio.server(
        interceptors=(Guard(authenticator), *interceptors),
        options=[
            ("grpc.max_receive_message_length", max_request_bytes),
            ("grpc.so_reuseport", 1 if reuse_port else 0),
            *limits.options(),
            *(lifetime or ConnectionLifetime()).options(),
        ],
    )
    servicer = ChatServicer(service)
    chat_pb2_grpc.add_ChatServiceServicer_to_server(servicer, server)
    health_servicer = HealthService()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
    if reflection_enabled:
        enable_reflection(server, (SERVICE_NAME, health.SERVICE_NAME))
    try:  # grpcio raises RuntimeError for an address it cannot bind (one in use, say)
        if tls is None:
            port = server.add_insecure_port(listen)
        else:
            port = server.add_secure_port(listen, tls.credentials())
    except RuntimeError:
        port = 0
    if port == 0:
        raise OSError(f"cannot listen on {listen}: the address is in use or not available")
    listener = None
    if http is not None:
        from .web import StaticFiles, start_http, web_app

        app = web_app(
            servicer.rpcs,
            health_servicer,
            authenticator=authenticator,
            interceptors=http_interceptors,
            telemetry=http_telemetry,
            max_request_bytes=max_request_bytes,
            cors_origins=http.cors_origins,
            static=None if http.web_root is None else StaticFiles(Path(http.web_root)),
            drain_seconds=http.drain_seconds,
        )
        listener = await start_http(
            app,
            http.listen,
            limits=limits,
            tls=None if tls is None else tls.files,
            reuse_port=reuse_port,
        )
    await server.start()
    for name in ("", SERVICE_NAME):
        await health_servicer.set(name, health_pb2.HealthCheckResponse.SERVING)
    return RunningServer(server, service, health_servicer, port, listener)
