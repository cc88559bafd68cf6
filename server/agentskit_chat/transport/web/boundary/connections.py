"""The HTTP listener's connections: counted, and given a deadline to start a request.

Hypercorn 0.18 has no connection cap, and nothing short bounds how long a new connection
may take before its first request: its idle timer (`keep_alive_timeout`, the listener's
`--max-connection-idle`, minutes) runs from accept to the first request's headers, and its
`read_timeout` would also cut streams whose client has nothing more to send. So instead of
`hypercorn.asyncio.serve`, the listener accepts connections itself and runs, for each,
what that function runs: Hypercorn's own connection server, `TCPServer`, which speaks
HTTP/1.1, h2c and HTTP/2 and honours Hypercorn's graceful shutdown. Around it,
`serve_connections`:

- closes a connection at once when `max_connections` are already open (as gRPC closes one
  past `grpc.max_allowed_incoming_connections` during its handshake);
- counts a connection from the moment it is accepted, through its TLS handshake, which is
  done here (`start_tls`) rather than before the connection is handed over;
- closes a connection whose first request's headers have not all arrived
  `handshake_seconds` after it was accepted: TLS, the HTTP/2 preface and the headers
  together. The TLS handshake is ended by its own timeout (the same `handshake_seconds`),
  never by closing its transport under it, which leaves asyncio's `start_tls` without a
  transport to return; the request head then has what is left of the time. Later
  requests on the connection start while it is idle, and an idle connection is closed
  after `max_idle_seconds`, as Hypercorn does;
- keeps a connection's failure its own: an exception that ends one is logged as one
  bounded line (`refused`), never as asyncio's traceback of its connection callback;
- ends a connection as soon as its client has closed it (Hypercorn 0.18 keeps an HTTP/1.1
  connection closed while idle until its idle timer runs out, which would hold a place).

Header sizes are Hypercorn's: 16 KiB for an incomplete HTTP/1.1 request head
(`h11_max_incomplete_size`), 64 KiB of HTTP/2 header list (`h2_max_header_list_size`).
"""

from __future__ import annotations

import asyncio
import socket
import ssl
from typing import Any

from hypercorn.asyncio.tcp_server import TCPServer
from hypercorn.asyncio.worker_context import WorkerContext
from hypercorn.config import Config

from agentskit_chat.transport._server import ConnectionLimits

from .asgi import App
from .logbound import connection_failed


class _Requests:
    """The application as Hypercorn calls it (what its `ASGIWrapper` does), noting that a
    request's head has arrived whole: Hypercorn calls the application only then."""

    def __init__(self, app: App, started: asyncio.Event) -> None:
        self.app = app
        self.started = started

    async def __call__(
        self, scope: Any, receive: Any, send: Any, sync_spawn: Any, call_soon: Any
    ) -> None:
        self.started.set()
        await self.app(scope, receive, send)


class _Connection(TCPServer):
    """Hypercorn's server of one connection."""

    async def _read_data(self) -> None:
        """Hypercorn's reading, then, once the client has closed its side, no idle wait: an
        HTTP/1.1 connection closed while idle would otherwise stay open, and counted, until
        its idle timer ran out."""
        await super()._read_data()
        await self.idle_task.stop()


async def serve_connections(
    app: App,
    config: Config,
    sockets: list[socket.socket],
    limits: ConnectionLimits,
    stopping: asyncio.Event,
) -> None:
    """Serve `app` on the listening `sockets` until `stopping` is set, then stop gracefully
    (requests in flight get `config.graceful_timeout` seconds)."""
    loop = asyncio.get_running_loop()
    context = WorkerContext(None)
    tls = config.create_ssl_context()
    connections: set[asyncio.Task[None]] = set()

    async def accepted(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        opened = loop.time()
        raw = writer.transport
        if len(connections) >= limits.max_connections:
            raw.abort()
            return
        task = asyncio.current_task()
        assert task is not None
        connections.add(task)
        task.add_done_callback(connections.discard)
        started = asyncio.Event()
        deadline: asyncio.TimerHandle | None = None
        try:
            if tls is not None:
                # The handshake's own timeout ends it; nothing else may close the transport
                # meanwhile (asyncio's start_tls then returns no transport at all).
                await writer.start_tls(tls, ssl_handshake_timeout=limits.handshake_seconds)
            # What is left of `handshake_seconds` is for the first request's head.
            deadline = loop.call_at(opened + limits.handshake_seconds, _expire, writer, started)
            requests = _Requests(app, started)
            state: dict[str, Any] = {}  # No lifespan state: the application keeps none.
            await _Connection(requests, loop, config, context, state, reader, writer)
        except (OSError, ssl.SSLError):
            _close(writer, raw)  # A failed or expired handshake, a reset.
        except Exception as exc:  # A connection's failure stays its own.
            _close(writer, raw)
            connection_failed(exc)
        finally:
            if deadline is not None:
                deadline.cancel()

    servers = [
        await asyncio.start_server(accepted, sock=sock, backlog=config.backlog) for sock in sockets
    ]
    try:
        await stopping.wait()
    finally:
        await context.terminated.set()  # Idle connections close; busy ones once answered.
        for server in servers:
            server.close()
        try:
            if connections:
                await asyncio.wait(set(connections), timeout=config.graceful_timeout)
        finally:
            for task in set(connections):
                task.cancel()  # Past the grace; the connection closes as the task ends.


def _close(writer: asyncio.StreamWriter, raw: asyncio.WriteTransport) -> None:
    """Abort a connection that failed, whatever state its TLS upgrade left the writer in."""
    if writer.transport is None:
        # A TLS upgrade whose connection closed during the handshake leaves the writer with
        # no transport, and its finaliser would then fail: give it back the closed one.
        setattr(writer, "_transport", raw)  # noqa: B010
    writer.transport.abort()
    raw.abort()


def _expire(writer: asyncio.StreamWriter, started: asyncio.Event) -> None:
    """Close a connection that has not sent a whole request in time."""
    if not started.is_set():
        writer.transport.abort()
