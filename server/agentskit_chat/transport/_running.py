"""Both listeners of one server, started and drained together: gRPC (`_server`) and, when
asked for, HTTP for browsers (`web`)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

import grpc
from grpc_health.v1 import health_pb2

from agentskit_chat.service import ChatService

from ._auth import Authenticator
from ._health import HealthService
from ._lifetime import ConnectionLifetime
from ._server import DEFAULT_MAX_REQUEST_BYTES, SERVICE_NAME, grpc_listener, serving
from ._settings import ConnectionLimits
from ._tls import ServerTls

if TYPE_CHECKING:  # The HTTP listener is imported only when a server asks for one.
    from connectrpc.interceptor import Interceptor

    from .web import HttpListener, HttpSettings, RequestTelemetry

log = logging.getLogger("agentskit_chat.transport._server")  # The name its lines always had.

CLEANUP_SECONDS: Final = 5.0
CALLS_AFTER_TURNS_SECONDS: Final = 2.0
"""How long a drain lets other calls finish once no turn is in flight."""


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
    grpc_side = grpc_listener(
        service,
        listen,
        max_request_bytes=max_request_bytes,
        interceptors=interceptors,
        authenticator=authenticator,
        tls=tls,
        connections=limits,
        lifetime=lifetime,
        reflection_enabled=reflection_enabled,
        reuse_port=reuse_port,
    )
    listener = None
    if http is not None:
        from .web import StaticFiles, start_http, web_app

        app = web_app(
            grpc_side.servicer.rpcs,
            grpc_side.health,
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
    await serving(grpc_side)
    return RunningServer(grpc_side.server, service, grpc_side.health, grpc_side.port, listener)
