"""A call's response on the wire: sends wait for the client, and a stream that cannot end
by itself is ended by the listener.

Hypercorn 0.18 gives an application no back-pressure on HTTP/2: its per-stream buffer is
meant to pause a send past 32 KiB, but an attempt to send while the client's window is
shut empties nothing and still resumes the paused send, so a stream whose client stops
reading buffers everything the application writes (a whole turn, up to the output limit)
and the turn's `StallWatch` never fires. `Flows` restores it: a response body sent while
more than `BUFFERED_BYTES` of the stream wait for the client returns only once they have
left. Over HTTP/1.1 Hypercorn's writes wait for the socket, whose send buffer the kernel
lets grow to megabytes: each connection's socket is kept to `UNSENT_BYTES` not yet sent
(`TCP_NOTSENT_LOWAT`), so writes wait for the client instead.

An ASGI application cannot send a status past data the client has not read, nor reset a
stream. So a call that must end is given `END_SECONDS` to end on its own (its status
written after its unread events, for a client that reads again), and is then ended on the
wire: its HTTP/2 stream reset (`RST_STREAM`, CANCEL), or its HTTP/1.1 connection, which
carries no other call meanwhile, closed. A call must end when its turn stream stalls (the
status is then DEADLINE_EXCEEDED, as on the gRPC port) and when the client's own deadline
(`connect-timeout-ms`, `grpc-timeout`) has passed (the Connect application sends
DEADLINE_EXCEEDED then, but only behind the unread data).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import socket
import struct
from typing import Any, Final

import h2.errors
import h2.exceptions
from connectrpc.code import Code
from connectrpc.errors import ConnectError
from connectrpc.request import RequestContext
from hypercorn.asyncio.tcp_server import TCPServer
from hypercorn.protocol.h2 import BUFFER_HIGH_WATER, H2Protocol
from hypercorn.protocol.h11 import H11Protocol
from hypercorn.protocol.http_stream import HTTPStream
from priority.priority import MissingStreamError

from agentskit_chat.transport._servicer import STALLED
from agentskit_chat.transport._stall import TERMINAL_SEND_SECONDS

from .asgi import App, Message, Receive, Scope, Send
from .errors import connect_error

log = logging.getLogger("agentskit_chat.transport")

BUFFERED_BYTES: Final = BUFFER_HIGH_WATER
"""How much of one HTTP/2 stream may wait for its client before a send waits (32 KiB)."""
UNSENT_BYTES: Final = 16 * 1024
"""How much of a connection's output its socket may hold before it can send it."""
END_SECONDS: Final = TERMINAL_SEND_SECONDS
"""How long a call that must end may take to end on its own before it is ended on the wire."""

_flow: contextvars.ContextVar[Flow | None] = contextvars.ContextVar("flow", default=None)


def current_flow() -> Flow | None:
    """The flow of the call this task answers, when the listener runs under `Flows`."""
    return _flow.get()


class Flow:
    """One call's response: its sends, and how to end it on the wire."""

    def __init__(self, send: Send) -> None:
        self._send = send
        self._loop = asyncio.get_running_loop()
        self._wire = _wire(send)
        self._end: asyncio.TimerHandle | None = None
        self._ending: asyncio.Task[None] | None = None
        self.stalled = False
        """Whether the call's turn stream stalled."""

    async def send(self, message: Message) -> None:
        """Send `message`; a response body waits while the client has too much unread."""
        await self._send(message)
        if message["type"] == "http.response.body":
            await self._wire.wait(BUFFERED_BYTES)

    def stall(self) -> None:
        """The call's turn stream stalled: end the call (DEADLINE_EXCEEDED, see `Ends`)."""
        self.stalled = True
        self.end_within(END_SECONDS)

    def end_within(self, seconds: float) -> None:
        """End the call on the wire unless it has ended `seconds` from now."""
        at = self._loop.time() + seconds
        if self._end is not None and self._end.when() <= at:
            return
        if self._end is not None:
            self._end.cancel()
        self._end = self._loop.call_at(at, self._ended)

    def close(self) -> None:
        """The call has ended."""
        if self._end is not None:
            self._end.cancel()

    def _ended(self) -> None:
        log.warning("a call did not end in time: its client is not reading; ending it")
        self._ending = asyncio.ensure_future(self._end_wire())

    async def _end_wire(self) -> None:
        try:
            await self._wire.end()
        except Exception as exc:  # The connection is going anyway: nothing left to end.
            log.debug("ending a call on the wire failed: %s", type(exc).__name__)


class Flows:
    """The listener's outermost application: each HTTP request runs with its `Flow`."""

    def __init__(self, app: App) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer one request through its flow."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        flow = Flow(send)
        token = _flow.set(flow)
        try:
            await self.app(scope, receive, flow.send)
        finally:
            flow.close()
            _flow.reset(token)


class Ends:
    """A leading metadata interceptor: a call's deadline is kept on the wire, and a call
    whose turn stream stalled ends with DEADLINE_EXCEEDED rather than CANCELED."""

    async def on_start(self, ctx: RequestContext[Any, Any]) -> None:
        """End the call on the wire `END_SECONDS` after the client's deadline."""
        flow = current_flow()
        if flow is not None and ctx.timeout_ms is not None:
            flow.end_within(ctx.timeout_ms / 1000 + END_SECONDS)

    async def on_end(
        self, token: None, ctx: RequestContext[Any, Any], error: Exception | None, /
    ) -> None:
        """Report a stalled call's cancellation as the stall."""
        flow = current_flow()
        stalled = flow is not None and flow.stalled
        if stalled and isinstance(error, ConnectError) and error.code == Code.CANCELED:
            raise connect_error(STALLED)


class _Wire:
    """What the listener can do to a call on the wire: nothing, by default."""

    async def wait(self, buffered: int) -> None:
        """Return once at most `buffered` bytes of the response wait for the client."""

    async def end(self) -> None:
        """End the call on the wire."""


class _H2Stream(_Wire):
    """A call on an HTTP/2 stream of Hypercorn's."""

    def __init__(self, protocol: H2Protocol, stream_id: int) -> None:
        self.protocol = protocol
        self.stream_id = stream_id

    async def wait(self, buffered: int) -> None:
        buffer = self.protocol.stream_buffers.get(self.stream_id)
        if buffer is not None and len(buffer.buffer) > buffered:
            await buffer.drain()  # Until all has left, or the stream closed.

    async def end(self) -> None:
        """Reset the stream, as Hypercorn closes one that closed while it waited to send:
        its buffer is dropped and whatever waits on it resumes."""
        protocol = self.protocol
        try:
            protocol.connection.reset_stream(self.stream_id, h2.errors.ErrorCodes.CANCEL)
        except h2.exceptions.ProtocolError:
            return  # The stream has ended meanwhile.
        buffer = protocol.stream_buffers.get(self.stream_id)
        if buffer is not None:
            await buffer.close()
        with contextlib.suppress(MissingStreamError):
            protocol.priority.unblock(self.stream_id)  # Its sender then forgets it.
        await protocol.has_data.set()
        await protocol._flush()


class _H11Connection(_Wire):
    """A call on an HTTP/1.1 connection of Hypercorn's, which carries only that call."""

    def __init__(self, server: TCPServer) -> None:
        self.server = server

    async def end(self) -> None:
        """Reset the connection, dropping what it has not sent: closed the usual way, the
        socket would go on offering its unsent data to the client, which shows nothing of
        the close until it has read all of it."""
        sock = self.server.writer.get_extra_info("socket")
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.server.writer.transport.abort()


def _wire(send: Send) -> _Wire:
    """The Hypercorn stream or connection behind an application's `send`."""
    stream = getattr(send, "__self__", None)
    protocol = getattr(getattr(stream, "send", None), "__self__", None)
    server = getattr(getattr(protocol, "send", None), "__self__", None)
    if isinstance(server, TCPServer):
        _bound_unsent(server)
    if isinstance(stream, HTTPStream) and isinstance(protocol, H2Protocol):
        return _H2Stream(protocol, stream.stream_id)
    if isinstance(protocol, H11Protocol) and isinstance(server, TCPServer):
        return _H11Connection(server)
    return _Wire()


def _bound_unsent(server: TCPServer) -> None:
    """Let the connection's socket take no more than `UNSENT_BYTES` it cannot send yet:
    its writes then wait for the client rather than for the kernel's send buffer, which
    grows to megabytes."""
    sock = server.writer.get_extra_info("socket")
    option = getattr(socket, "TCP_NOTSENT_LOWAT", None)
    if sock is None or option is None:
        return
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.IPPROTO_TCP, option, UNSENT_BYTES)
