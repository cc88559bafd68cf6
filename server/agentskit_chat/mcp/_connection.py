"""One MCP server's connection, owned by a task of its own.

The SDK's transports are context managers whose task groups must be left by the task
that entered them; a dedicated owner task enters them, keeps the session open until
`close`, and leaves them, so calls may come from any task.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import AsyncIterator, Generator
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any, Final, TextIO

import anyio
import httpx2
import mcp.types as types
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from opentelemetry import propagate

from agentskit_chat.conversation import HttpServerSpec, McpServerSpec, StdioServerSpec

from ._errors import ConnectError

HTTP_TIMEOUT: Final = httpx2.Timeout(30.0, read=300.0)
"""Connect, write and pool timeouts of HTTP requests, and the read timeout of a
server's response stream (a call's own bound is its tool's timeout)."""
MAX_TOOL_PAGES: Final = 100
"""Pages of `tools/list` read at most (a server that keeps paging is refused)."""


class Connection:
    """An open session to one server, or the means to open one again."""

    def __init__(self, spec: McpServerSpec, *, stderr: TextIO | None = None) -> None:
        self.spec = spec
        self._stderr = stderr
        self._session: ClientSession | None = None
        self._owner: asyncio.Task[None] | None = None
        self._closing = asyncio.Event()
        self.ended = asyncio.Event()
        """Set when the server's messages end (a stdio server's process exited, say)."""

    @property
    def session(self) -> ClientSession | None:
        """The open session; None before `open`, after `close`, once broken, or once the
        server's messages ended."""
        return None if self.ended.is_set() else self._session

    async def open(self, timeout: float) -> list[types.Tool]:
        """Connect, initialize and list the server's tools; raises ConnectError."""
        await self.close()
        self._closing = asyncio.Event()
        self.ended = asyncio.Event()
        ready: asyncio.Future[list[types.Tool]] = asyncio.get_running_loop().create_future()
        self._owner = asyncio.create_task(self._own(ready), name=f"mcp {self.spec.name}")
        try:
            async with asyncio.timeout(timeout):
                return await asyncio.shield(ready)
        except TimeoutError:
            await self.close()
            raise ConnectError(f"no answer within {timeout:g} s") from None
        except ConnectError:
            await self.close()
            raise

    async def close(self) -> None:
        """End the session and its transport (the child process of a stdio server)."""
        self._session = None
        owner, self._owner = self._owner, None
        if owner is None:
            return
        self._closing.set()
        try:
            await asyncio.wait_for(asyncio.shield(owner), 10)
        except TimeoutError:
            owner.cancel()
            await asyncio.gather(owner, return_exceptions=True)

    def broken(self) -> None:
        """Mark the session as gone; the next `open` starts afresh."""
        self._session = None

    async def _own(self, ready: asyncio.Future[list[types.Tool]]) -> None:
        try:
            async with AsyncExitStack() as stack:
                read, write = await stack.enter_async_context(self._transport())
                watched = _Watched(read, self.ended)
                session = await stack.enter_async_context(ClientSession(watched, write))
                await session.initialize()
                tools = await _list_tools(session)
                self._session = session
                ready.set_result(tools)
                await self._closing.wait()
        except ConnectError as exc:
            _fail(ready, exc)
        except Exception as exc:
            _fail(ready, ConnectError(_reason(exc)))
        except BaseExceptionGroup as group:  # A transport's task group, cancelled inside.
            _fail(ready, ConnectError(_reason(group)))
        finally:
            self._session = None
            _fail(ready, ConnectError("the connection ended"))

    def _transport(self) -> AbstractAsyncContextManager[Any]:
        spec = self.spec
        if isinstance(spec, StdioServerSpec):
            parameters = StdioServerParameters(
                command=spec.command, args=list(spec.args), env=dict(spec.env)
            )
            return stdio_client(parameters, errlog=self._stderr or sys.stderr)
        return _http(spec)


@asynccontextmanager
async def _http(spec: HttpServerSpec) -> AsyncIterator[Any]:
    """The streamable HTTP transport, over a client of its own that sends the headers."""
    headers = _RequestHeaders(_token(spec))
    async with (
        httpx2.AsyncClient(auth=headers, timeout=HTTP_TIMEOUT) as client,
        streamable_http_client(spec.url, http_client=client) as streams,
    ):
        yield streams


class _RequestHeaders(httpx2.Auth):
    """The bearer token, and the current trace context (W3C `traceparent`), on each request."""

    def __init__(self, token: str | None) -> None:
        self._token = token

    def auth_flow(
        self, request: httpx2.Request
    ) -> Generator[httpx2.Request, httpx2.Response, None]:
        if self._token is not None:
            request.headers["Authorization"] = f"Bearer {self._token}"
        propagate.inject(request.headers)
        yield request


def _token(spec: HttpServerSpec) -> str | None:
    """The server's bearer token, read now from its file or environment variable."""
    if spec.token_file is not None:
        try:
            token = Path(spec.token_file).read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) else "not UTF-8 text"
            raise ConnectError(f"cannot read its token file {spec.token_file}: {reason}") from None
        if not token:
            raise ConnectError(f"its token file {spec.token_file} is empty")
        return token
    if spec.token_env is not None:
        token = os.environ.get(spec.token_env, "").strip()
        if not token:
            raise ConnectError(f"the environment variable {spec.token_env} is not set")
        return token
    return None


async def _list_tools(session: ClientSession) -> list[types.Tool]:
    tools: list[types.Tool] = []
    cursor: str | None = None
    for _ in range(MAX_TOOL_PAGES):
        params = None if cursor is None else types.PaginatedRequestParams(cursor=cursor)
        page = await session.list_tools(params=params)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            return tools
    raise ConnectError(f"its tool list has more than {MAX_TOOL_PAGES} pages")


class _Watched:
    """A transport's read stream that sets `ended` when its messages end."""

    def __init__(self, inner: Any, ended: asyncio.Event) -> None:
        self._inner = inner
        self._ended = ended

    @property
    def last_context(self) -> Any:
        return getattr(self._inner, "last_context", None)

    async def receive(self) -> Any:
        try:
            return await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            self._ended.set()
            raise

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> _Watched:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            raise StopAsyncIteration from None

    async def __aenter__(self) -> _Watched:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._inner.aclose()


def _fail(ready: asyncio.Future[list[types.Tool]], exc: ConnectError) -> None:
    if not ready.done():
        ready.set_exception(exc)


def _reason(exc: BaseException) -> str:
    """A one-line reason from the innermost exception (a group's first one)."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    if isinstance(exc, httpx2.HTTPStatusError):
        return f"HTTP status {exc.response.status_code}"
    text = " ".join(str(exc).split())[:200]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
