"""The HTTP listener: Hypercorn serving the web application in the server's own event loop.

HTTP/1.1 and HTTP/2 (cleartext h2c with prior knowledge or upgrade; over TLS by ALPN) on
one port. The socket is bound here, so port 0 is resolved before serving and
`--workers` can share the port (SO_REUSEPORT) as they share the gRPC one. Connections are
accepted by `serve_connections`, which caps them and bounds their handshake (see there).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import ssl
from dataclasses import dataclass
from typing import Final

from hypercorn.config import Config

from agentskit_chat.transport._settings import ConnectionLimits
from agentskit_chat.transport._tls import TlsFiles

from .boundary.asgi import App
from .boundary.connections import serve_connections
from .boundary.logbound import bounded_errorlog
from .boundary.screen import DRAIN_SECONDS

log = logging.getLogger("agentskit_chat.transport")

BACKLOG: Final = 1024
STOP_SECONDS: Final = 5.0
"""How long a stop waits for Hypercorn beyond the graceful period."""


@dataclass(frozen=True, slots=True)
class HttpSettings:
    """What `serve --http-listen` configures."""

    listen: str
    cors_origins: frozenset[str] = frozenset()
    web_root: str | None = None
    drain_seconds: float = DRAIN_SECONDS
    """How long a refused call's answer waits for the rest of its body (see `WebApp`)."""


def bind(listen: str, *, reuse_port: bool = False) -> socket.socket:
    """A TCP socket bound to `listen` (host:port, port 0 picks one); OSError when it cannot."""
    host, _, port = listen.rpartition(":")
    host = host.strip("[]")
    if not host or not port.isdigit():
        raise OSError(f"cannot listen on {listen}: expected HOST:PORT")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if reuse_port:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind((host, int(port)))
        sock.listen(BACKLOG)  # Connections queue from now on, before Hypercorn accepts.
    except OSError as exc:
        sock.close()
        raise OSError(f"cannot listen on {listen}: {exc.strerror or exc}") from None
    return sock


class HttpListener:
    """A started listener; `port` is the bound port. `stop()` ends it gracefully."""

    def __init__(
        self, task: asyncio.Task[None], stopping: asyncio.Event, config: Config, port: int
    ) -> None:
        self._task = task
        self._stopping = stopping
        self._config = config
        self.port = port

    async def stop(self, grace: float) -> None:
        """Stop taking connections; requests in flight get `grace` seconds, then are cut."""
        self._config.graceful_timeout = max(grace, 0.0)
        self._stopping.set()
        try:
            await asyncio.wait_for(asyncio.shield(self._task), grace + STOP_SECONDS)
        except TimeoutError:
            log.warning("the HTTP listener did not stop in time; cancelling it")
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task


def _config(sock: socket.socket, limits: ConnectionLimits, tls: TlsFiles | None) -> Config:
    config = Config()
    config.bind = [f"fd://{sock.detach()}"]
    config.accesslog = None
    config.errorlog = bounded_errorlog()
    config.include_server_header = False
    config.keep_alive_timeout = limits.max_idle_seconds
    config.h2_max_concurrent_streams = limits.max_streams_per_connection
    config.backlog = BACKLOG
    if tls is not None:
        config.certfile = str(tls.cert)
        config.keyfile = str(tls.key)
        if tls.client_ca is not None:
            config.ca_certs = str(tls.client_ca)
            config.verify_mode = ssl.CERT_REQUIRED
    return config


async def start_http(
    app: App,
    listen: str,
    *,
    limits: ConnectionLimits | None = None,
    tls: TlsFiles | None = None,
    reuse_port: bool = False,
) -> HttpListener:
    """Bind `listen` and serve `app` on it in this event loop until `stop()`."""
    sock = bind(listen, reuse_port=reuse_port)
    port = int(sock.getsockname()[1])
    limits = limits or ConnectionLimits()
    config = _config(sock, limits, tls)
    sockets = config.create_sockets()
    listening = [*sockets.secure_sockets, *sockets.insecure_sockets]
    stopping = asyncio.Event()
    task = asyncio.create_task(
        serve_connections(app, config, listening, limits, stopping),
        name="agentskit-chat-http",
    )
    return HttpListener(task, stopping, config, port)
