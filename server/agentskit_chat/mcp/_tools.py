"""ServerTools: the MCP servers of served definitions, their tools' specs, and calls."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Iterable, Mapping
from typing import Any, Final, TextIO, cast

import anyio
import httpx2
import mcp.types as types
from mcp import ClientSession, MCPError

from agentskit_chat.conversation import ChatDefinition, McpServerSpec, ServerToolSpec
from agentskit_chat.models import ToolSpec

from ._connection import Connection
from ._errors import ConnectError, ServerToolsError
from ._observer import NO_TOOL_OBSERVER, ToolCallReport, ToolObserver
from ._outcomes import (
    DEFAULT_MAX_RESULT_BYTES,
    INVALID_ARGUMENTS,
    RESULT_TOO_LARGE,
    SERVER_GONE,
    TIMEOUT,
    TOOL_ERROR,
    UNKNOWN_TOOL,
    ToolOutcome,
)

log = logging.getLogger("agentskit_chat.mcp")

DEFAULT_CONNECT_TIMEOUT: Final = 30.0
"""Seconds one connection attempt (start, initialize, list tools) may take."""
DEFAULT_RECONNECT_ATTEMPTS: Final = 3
"""Attempts to reach a server again, at a call after it went away."""
DEFAULT_RECONNECT_BACKOFF: Final = 0.25
"""Seconds before the second attempt; doubled before each later one."""
TURN_ID_META: Final = "agentskit.turn_id"
"""The `_meta` key of a call's turn id."""
CALL_ID_META: Final = "agentskit.call_id"
"""The `_meta` key of a call's id (unique in its turn): with the turn id, an idempotency key."""
_GONE: Final = (OSError, anyio.ClosedResourceError, anyio.BrokenResourceError, httpx2.HTTPError)
"""Exceptions of a call that mean the connection is gone (besides CONNECTION_CLOSED)."""
_CONNECTION_CLOSED: Final = types.CONNECTION_CLOSED


class _Server:
    """One server's connection, reopened at most once at a time."""

    def __init__(self, spec: McpServerSpec, stderr: TextIO | None) -> None:
        self.connection = Connection(spec, stderr=stderr)
        self.lock = asyncio.Lock()
        self.tools: dict[str, types.Tool] = {}


class ServerTools:
    """The server tools of one or more definitions, over one connection per MCP server.

    `start` connects every server and checks it offers each declared tool; `call` never
    raises for a tool's or server's failure, which becomes an error ToolOutcome the model
    sees. A server that went away is connected again at the next call (a bounded number of
    attempts); until that succeeds, calls end as `server_gone`. Arguments and results
    appear only in what is sent to the server and in the outcome: never in errors, logs or
    what the observer is told.
    """

    def __init__(
        self,
        definitions: Iterable[ChatDefinition],
        *,
        observer: ToolObserver = NO_TOOL_OBSERVER,
        max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES,
        connect_timeout: float = DEFAULT_CONNECT_TIMEOUT,
        reconnect_attempts: int = DEFAULT_RECONNECT_ATTEMPTS,
        reconnect_backoff: float = DEFAULT_RECONNECT_BACKOFF,
        server_stderr: TextIO | None = None,
    ) -> None:
        """`server_stderr` receives the stderr of stdio servers (default: this process's)."""
        if max_result_bytes < 1 or connect_timeout <= 0 or reconnect_attempts < 1:
            raise ValueError("server tools: max result bytes, connect timeout, attempts >= 1")
        specs, tools = _declarations(definitions)
        self._tools: Mapping[str, ServerToolSpec] = tools
        self._servers = {name: _Server(spec, server_stderr) for name, spec in specs.items()}
        self._observer = observer
        self._max_result_bytes = max_result_bytes
        self._connect_timeout = connect_timeout
        self._attempts = reconnect_attempts
        self._backoff = reconnect_backoff
        self._settings = (max_result_bytes, connect_timeout, reconnect_attempts, reconnect_backoff)
        self._stderr = server_stderr
        self._attached: dict[tuple[str, int], ServerTools] = {}
        """Server tools of definitions these declarations do not cover (`attach`)."""

    @property
    def declarations(self) -> tuple[Mapping[str, McpServerSpec], Mapping[str, ServerToolSpec]]:
        """The servers and server tools declared, by name (equal declarations connect the
        same way)."""
        servers = {name: server.connection.spec for name, server in self._servers.items()}
        return servers, self._tools

    @property
    def names(self) -> frozenset[str]:
        """The names of the declared server tools."""
        return frozenset(self._tools)

    async def start(self) -> None:
        """Connect every server and check its tools; raises ServerToolsError naming the
        first server (and tool) that fails, after closing whatever was opened."""
        names = sorted(self._servers)
        results = await asyncio.gather(
            *(self._open(name) for name in names), return_exceptions=True
        )
        for result in results:
            if isinstance(result, BaseException):
                await self.close()
                raise result
        for tool in sorted(self._tools.values(), key=lambda t: (t.server, t.name)):
            offered = self._servers[tool.server].tools
            if tool.name not in offered:
                await self.close()
                listed = ", ".join(sorted(offered)) or "none"
                raise ServerToolsError(
                    f"MCP server {tool.server!r} has no tool {tool.name!r} (it offers: {listed})"
                )

    async def close(self) -> None:
        """Close every connection (ending stdio servers' processes), attached ones too."""
        attached, self._attached = list(self._attached.values()), {}
        await asyncio.gather(
            *(server.connection.close() for server in self._servers.values()),
            *(tools.close() for tools in attached),
        )

    def covers(self, definition: ChatDefinition) -> bool:
        """Whether these declarations include `definition`'s servers and tools as it
        declares them."""
        servers = {name: server.connection.spec for name, server in self._servers.items()}
        return all(
            servers.get(name) == spec for name, spec in definition.mcp_servers.items()
        ) and all(self._tools.get(name) == tool for name, tool in definition.server_tools.items())

    async def attach(self, definition: ChatDefinition) -> None:
        """Make the server tools of `definition`, a definition these were not started with
        (a revision another process published), callable: its servers are connected
        beside these, once per revision and declaration. A server that cannot be reached
        is logged by name, and its tools end as `server_gone` until it can be. Never
        raises for the servers' failures."""
        if not definition.server_tools or self.covers(definition):
            return
        key = (definition.id, definition.revision)
        known = self._attached.get(key)
        if known is not None and known.covers(definition):
            return
        max_bytes, timeout, attempts, backoff = self._settings
        tools = ServerTools(
            [definition],
            observer=self._observer,
            max_result_bytes=max_bytes,
            connect_timeout=timeout,
            reconnect_attempts=attempts,
            reconnect_backoff=backoff,
            server_stderr=self._stderr,
        )
        self._attached[key] = tools
        if known is not None:
            await known.close()
        try:
            await tools.start()
        except ServerToolsError as exc:
            log.warning("server tools of %s revision %d: %s", *key, exc)

    def _serving(self, definition: ChatDefinition | None) -> ServerTools:
        """The server tools that run `definition`'s (these, or the attached ones)."""
        if definition is None:
            return self
        return self._attached.get((definition.id, definition.revision), self)

    def specs(self, definition: ChatDefinition | None = None) -> tuple[ToolSpec, ...]:
        """The model-facing specs of the server tools (of `definition` only, when given),
        as their servers describe them; after `start`."""
        serving = self._serving(definition)
        if serving is not self:
            return serving.specs(definition)
        if definition is not None and not self.covers(definition):
            return ()  # not attached
        names = self._tools if definition is None else definition.server_tools
        found = []
        for name in sorted(names):
            tool = self._servers[self._tools[name].server].tools.get(name)
            if tool is not None:
                found.append(ToolSpec(name, tool.description or "", dict(tool.input_schema)))
        return tuple(found)

    async def call(
        self,
        name: str,
        arguments_json: str,
        *,
        turn_id: str,
        call_id: str,
        definition: ChatDefinition | None = None,
    ) -> ToolOutcome:
        """Run the server tool `name` (as `definition` declares it, when given) with the
        model's arguments (a JSON object) within its timeout; `turn_id` and `call_id` go
        in the request's `_meta` as `agentskit.turn_id` and `agentskit.call_id`, for the
        tool to use as an idempotency key. Never raises for a failure of the tool or its
        server."""
        serving = self._serving(definition)
        if serving is not self:
            return await serving.call(name, arguments_json, turn_id=turn_id, call_id=call_id)
        tool = self._tools.get(name)
        if definition is not None and definition.server_tools.get(name) != tool:
            tool = None  # declared otherwise by `definition`, which is not attached
        server = "" if tool is None else tool.server
        scope = self._observer.tool_started(name, call_id)
        started = time.monotonic()
        outcome = ToolOutcome.failure(UNKNOWN_TOOL, f"no server tool is named {name!r}")
        try:
            if tool is not None:
                outcome = await self._call(tool, arguments_json, turn_id, call_id)
        finally:
            seconds = time.monotonic() - started
            scope.finish(ToolCallReport(name, call_id, server, seconds, outcome.error_type))
        return outcome

    async def _call(
        self, tool: ServerToolSpec, arguments_json: str, turn_id: str, call_id: str
    ) -> ToolOutcome:
        arguments = _arguments(arguments_json)
        if arguments is None:
            return ToolOutcome.failure(INVALID_ARGUMENTS, "the arguments are not a JSON object")
        server = self._servers[tool.server]
        session = await self._session(server)
        if session is None:
            return ToolOutcome.failure(
                SERVER_GONE, f"the tool's server {tool.server} is unavailable"
            )
        # An open map (extra items allowed), which mypy does not model yet.
        meta = cast(types.RequestParamsMeta, {TURN_ID_META: turn_id, CALL_ID_META: call_id})
        try:
            async with asyncio.timeout(tool.timeout):
                result = await session.call_tool(tool.name, arguments, meta=meta)
        except TimeoutError:
            return ToolOutcome.failure(
                TIMEOUT, f"the tool did not answer within {tool.timeout:g} s"
            )
        except MCPError as exc:
            if exc.error.code != _CONNECTION_CLOSED:
                return ToolOutcome.failure(
                    TOOL_ERROR, f"the server refused the call: {exc.error.message}"
                )
            server.connection.broken()
            return ToolOutcome.failure(SERVER_GONE, "the tool's server went away during the call")
        except _GONE:
            server.connection.broken()
            return ToolOutcome.failure(SERVER_GONE, "the tool's server went away during the call")
        except Exception as exc:  # A malformed answer, say: an outcome, never a raise.
            log.warning(
                "server tool %r of MCP server %r: %s", tool.name, tool.server, type(exc).__name__
            )
            return ToolOutcome.failure(TOOL_ERROR, "the server's answer could not be used")
        return self._outcome(result)

    def _outcome(self, result: types.CallToolResult) -> ToolOutcome:
        text = _text(result)
        if len(text.encode("utf-8")) > self._max_result_bytes:
            return ToolOutcome.failure(
                RESULT_TOO_LARGE, f"the result is larger than {self._max_result_bytes} bytes"
            )
        if result.is_error:
            return ToolOutcome.failure(TOOL_ERROR, text or "the tool failed")
        return ToolOutcome(text)

    async def _session(self, server: _Server) -> ClientSession | None:
        """The server's open session, reconnecting a broken one; None when unreachable."""
        async with server.lock:
            if server.connection.session is not None:
                return server.connection.session
            for attempt in range(self._attempts):
                if attempt:
                    await asyncio.sleep(self._backoff * 2 ** (attempt - 1))
                try:
                    server.tools = _by_name(await server.connection.open(self._connect_timeout))
                except ConnectError:
                    continue
                return server.connection.session
            return None

    async def _open(self, name: str) -> None:
        server = self._servers[name]
        try:
            server.tools = _by_name(await server.connection.open(self._connect_timeout))
        except ConnectError as exc:
            raise ServerToolsError(f"MCP server {name!r} cannot be reached: {exc}") from None


def _declarations(
    definitions: Iterable[ChatDefinition],
) -> tuple[dict[str, McpServerSpec], dict[str, ServerToolSpec]]:
    """The servers and server tools of all `definitions`; one name declared differently
    by two of them is refused."""
    servers: dict[str, tuple[McpServerSpec, str]] = {}
    tools: dict[str, tuple[ServerToolSpec, str]] = {}
    for definition in definitions:
        where = f"{definition.id} revision {definition.revision}"
        for name, spec in definition.mcp_servers.items():
            seen = servers.setdefault(name, (spec, where))
            if seen[0] != spec:
                raise ServerToolsError(
                    f"MCP server {name!r} is declared differently by {seen[1]} and {where}"
                )
        for name, tool in definition.server_tools.items():
            known = tools.setdefault(name, (tool, where))
            if known[0] != tool:
                raise ServerToolsError(
                    f"server tool {name!r} is declared differently by {known[1]} and {where}"
                )
    return {k: v[0] for k, v in servers.items()}, {k: v[0] for k, v in tools.items()}


def _arguments(text: str) -> dict[str, Any] | None:
    if not text.strip():
        return {}
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def _text(result: types.CallToolResult) -> str:
    """The result's text content; its structured content (as JSON) when it has no text."""
    parts = [
        item.text if isinstance(item, types.TextContent) else f"[{item.type} content]"
        for item in result.content
    ]
    if not parts and result.structured_content is not None:
        return json.dumps(result.structured_content, ensure_ascii=False)
    return "\n".join(parts)


def _by_name(tools: list[types.Tool]) -> dict[str, types.Tool]:
    return {tool.name: tool for tool in tools}
