"""A TCP proxy on loopback whose connections a test can cut, as a network would.

It runs its own event loop in a thread, so synchronous tests (pexpect) and asynchronous
ones use it alike. `cut()` resets every connection open through it (both sides get a TCP
RST: SO_LINGER 0), and new connections are accepted again at once, the way a phone that
changed networks reconnects.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import threading
from collections.abc import Coroutine, Iterator
from types import TracebackType
from typing import Any, Self, TypeVar

T = TypeVar("T")


class TcpProxy:
    """Forwards `127.0.0.1:port` to `upstream` (`host:port`)."""

    def __init__(self, upstream: str) -> None:
        host, _, port = upstream.rpartition(":")
        self._upstream = (host, int(port))
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._links: set[tuple[asyncio.StreamWriter, asyncio.StreamWriter]] = set()
        self._server: asyncio.Server | None = None
        self.port = 0
        self.accepted = 0
        """Connections accepted so far."""
        self.cuts = 0
        self.refusing = False
        """While True, every new connection is reset at once (the server is out of reach)."""
        self.refused = 0
        """Connections reset because `refusing` was set."""

    @property
    def target(self) -> str:
        return f"127.0.0.1:{self.port}"

    def __enter__(self) -> Self:
        self._thread.start()
        self._server = self._run(asyncio.start_server(self._accept, "127.0.0.1", 0))
        self.port = self._server.sockets[0].getsockname()[1]
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._run(self._stop())
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)
        self._loop.close()

    def cut(self) -> int:
        """Reset every open connection; the number cut."""
        cut: int = self._run(self._cut())
        self.cuts += 1
        return cut

    def _run(self, coroutine: Coroutine[Any, Any, T]) -> T:
        return asyncio.run_coroutine_threadsafe(coroutine, self._loop).result(10)

    async def _stop(self) -> None:
        if self._server is not None:
            self._server.close()
        await self._cut()

    async def _cut(self) -> int:
        links = list(self._links)
        self._links.clear()
        for pair in links:
            for writer in pair:
                _reset(writer)
        return len(links)

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.accepted += 1
        if self.refusing:
            self.refused += 1
            _reset(writer)
            return
        try:
            up_reader, up_writer = await asyncio.open_connection(*self._upstream)
        except OSError:
            _reset(writer)
            return
        link = (writer, up_writer)
        self._links.add(link)
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        self._links.discard(link)
        for side in link:
            with contextlib.suppress(Exception):
                side.close()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    with contextlib.suppress(Exception):
        while chunk := await reader.read(65536):
            writer.write(chunk)
            await writer.drain()
    with contextlib.suppress(Exception):
        writer.close()


def _reset(writer: asyncio.StreamWriter) -> None:
    """Close with a TCP RST instead of a FIN."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


@contextlib.contextmanager
def proxied(upstream: str) -> Iterator[TcpProxy]:
    """A running proxy to `upstream`, stopped on exit."""
    with TcpProxy(upstream) as proxy:
        yield proxy
