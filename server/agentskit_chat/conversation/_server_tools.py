"""Server tools: the MCP servers a definition declares and the tools the service runs.

A definition's `mcp_servers` section names each server with how to reach it: a `command`
(with `args` and `env`) started as a child process speaking MCP over stdio, or a `url`
(streamable HTTP) with its bearer token read at connect time from `token_file` or from the
environment variable `token_env`, never written in the file. A tool of the `tools`
section with `server: NAME` is a server tool: the service calls that server's tool of the
same name, within `timeout` seconds.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType
from typing import Any, Final, Protocol

from ._errors import ErrorCode

DEFAULT_TOOL_TIMEOUT: Final = 30.0
"""Seconds a server tool's call may take when its definition declares no `timeout`."""
SERVER_NAME: Final = re.compile(r"[A-Za-z0-9_-]{1,64}")
"""What an MCP server's name may be."""
SECRET_KEYS: Final = frozenset({"token", "headers", "authorization", "bearer", "password"})
"""Keys that would put a credential in the definition itself; refused."""
_STDIO_KEYS: Final = frozenset({"command", "args", "env"})
_HTTP_KEYS: Final = frozenset({"url", "token_file", "token_env"})
_URL: Final = re.compile(r"https?://[^\s/?#]+[^\s]*")
_ENV_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class Reader(Protocol):
    """What these checks use of the definition reader (see `_reader.Reader`)."""

    file: str
    failed: set[str]

    def report(self, code: ErrorCode, path: str, message: str, *, suppress: bool = True) -> None:
        """Record a diagnostic."""

    def mapping(
        self, value: Any, path: str, allowed: frozenset[str] | None, required: tuple[str, ...] = ()
    ) -> dict[str, Any] | None:
        """The mapping at `path`, unknown keys reported; None when it is not a mapping."""

    def string(self, value: Any, path: str, default: str = "") -> str:
        """The string at `path`, or `default` (reported) when it is not one."""

    def strings(self, value: Any, path: str) -> tuple[str, ...] | None:
        """The list of strings at `path`; None (reported) when it is not a list."""


@dataclass(frozen=True, slots=True)
class StdioServerSpec:
    """An MCP server started as a child process and spoken to over its stdin and stdout."""

    name: str
    command: str
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}), repr=False)
    """Variables set for the process, over a minimal inherited environment; left out of
    the repr, as they may hold settings an operator would rather not see in a log."""


@dataclass(frozen=True, slots=True)
class HttpServerSpec:
    """An MCP server reached over streamable HTTP with an optional bearer token."""

    name: str
    url: str
    token_file: str | None = None
    """File whose content (stripped) is the bearer token, read at each connect."""
    token_env: str | None = None
    """Environment variable holding the bearer token, read at each connect."""


McpServerSpec = StdioServerSpec | HttpServerSpec


@dataclass(frozen=True, slots=True)
class ServerToolSpec:
    """A tool the service runs itself, by calling the MCP tool of the same name."""

    name: str
    server: str
    """The name of the `mcp_servers` entry that provides the tool."""
    timeout: float = DEFAULT_TOOL_TIMEOUT
    """Seconds a call may take before it ends as a `timeout` outcome."""
    approval: bool = False


def read_servers(reader: Reader, value: Any) -> dict[str, McpServerSpec]:
    """The `mcp_servers` section: each server by name (problems reported on `reader`)."""
    body = reader.mapping(value, "mcp_servers", None) or {}
    found: dict[str, McpServerSpec] = {}
    for name, settings in body.items():
        path = f"mcp_servers.{name}"
        if not SERVER_NAME.fullmatch(name):
            reader.report(
                ErrorCode.INVALID_MCP_SERVER, path, "a server name is 1-64 letters, digits, _ or -"
            )
            continue
        server = _server(reader, name, settings, path)
        if server is not None:
            found[name] = server
    return found


def _server(reader: Reader, name: str, value: Any, path: str) -> McpServerSpec | None:
    if not isinstance(value, Mapping):
        reader.report(ErrorCode.INVALID_TYPE, path, "expected a mapping")
        return None
    secrets = sorted(str(key) for key in value if str(key).lower() in SECRET_KEYS)
    for key in secrets:
        reader.report(
            ErrorCode.LITERAL_SECRET,
            f"{path}.{key}",
            "credentials are never written in a definition: name a token_file or a token_env",
        )
    rest = {key: item for key, item in value.items() if str(key).lower() not in SECRET_KEYS}
    transports = [key for key in ("command", "url") if key in rest]
    if len(transports) != 1:
        found = " and ".join(transports) or "neither"
        reader.report(
            ErrorCode.INVALID_MCP_SERVER,
            path,
            f"a server needs exactly one of command (stdio) or url (HTTP) (found: {found})",
        )
        return None
    if secrets:
        return None
    if transports[0] == "command":
        return _stdio(reader, name, rest, path)
    return _http(reader, name, rest, path)


def _stdio(reader: Reader, name: str, value: Mapping[str, Any], path: str) -> McpServerSpec | None:
    body = reader.mapping(value, path, _STDIO_KEYS)
    if body is None or len(body) != len(value):
        return None
    command = reader.string(body["command"], f"{path}.command")
    if isinstance(body["command"], str) and not command.strip():
        reader.report(ErrorCode.INVALID_MCP_SERVER, f"{path}.command", "the command is empty")
    args = reader.strings(body.get("args", []), f"{path}.args") or ()
    env: dict[str, str] = {}
    for key, item in (reader.mapping(body.get("env", {}), f"{path}.env", None) or {}).items():
        if not _ENV_NAME.fullmatch(key):
            reader.report(ErrorCode.INVALID_TYPE, f"{path}.env.{key}", "not a variable name")
        env[key] = reader.string(item, f"{path}.env.{key}")
    return StdioServerSpec(name, command, args, MappingProxyType(env))


def _http(reader: Reader, name: str, value: Mapping[str, Any], path: str) -> McpServerSpec | None:
    body = reader.mapping(value, path, _HTTP_KEYS)
    if body is None or len(body) != len(value):
        return None
    url = reader.string(body["url"], f"{path}.url")
    if not _URL.fullmatch(url):
        reader.report(
            ErrorCode.INVALID_MCP_SERVER, f"{path}.url", "expected an http:// or https:// URL"
        )
    if "token_file" in body and "token_env" in body:
        reader.report(
            ErrorCode.INVALID_MCP_SERVER, path, "give one of token_file or token_env, not both"
        )
        return None
    token_file = None
    if "token_file" in body:
        token_file = reader.string(body["token_file"], f"{path}.token_file")
        if not token_file:
            reader.report(ErrorCode.INVALID_MCP_SERVER, f"{path}.token_file", "the path is empty")
        elif not Path(token_file).is_absolute() and not reader.file.startswith("<"):
            token_file = str(Path(reader.file).parent / token_file)
    token_env = None
    if "token_env" in body:
        token_env = reader.string(body["token_env"], f"{path}.token_env")
        if not _ENV_NAME.fullmatch(token_env):
            reader.report(
                ErrorCode.INVALID_MCP_SERVER,
                f"{path}.token_env",
                "not an environment variable name",
            )
    return HttpServerSpec(name, url, token_file, token_env)


def read_server_tool(
    reader: Reader, name: str, settings: Mapping[str, Any], approval: bool
) -> ServerToolSpec | None:
    """The server tool `name` when its settings name a `server`; None for a tool of the
    caller's (checking that it has no `timeout`, which only server tools take)."""
    path = f"tools.{name}"
    timeout = DEFAULT_TOOL_TIMEOUT
    if "timeout" in settings:
        raw = settings["timeout"]
        if isinstance(raw, bool) or not isinstance(raw, int | float) or not raw > 0:
            reader.report(
                ErrorCode.INVALID_TOOL_TIMEOUT, f"{path}.timeout", "expected seconds, a number > 0"
            )
        elif "server" not in settings:
            reader.report(
                ErrorCode.INVALID_TOOL_TIMEOUT,
                f"{path}.timeout",
                "only a server tool takes a timeout (add server: NAME)",
            )
        else:
            timeout = float(raw)
    if "server" not in settings:
        return None
    server = reader.string(settings["server"], f"{path}.server")
    return ServerToolSpec(name, server, timeout, approval) if server else None


def check_references(
    reader: Reader, servers: Mapping[str, McpServerSpec], tools: Mapping[str, ServerToolSpec]
) -> None:
    """Report server tools naming an undeclared server, and servers no tool uses."""
    for tool in tools.values():
        if tool.server not in servers and not _failed(reader, tool.server):
            declared = ", ".join(sorted(servers)) or "none"
            reader.report(
                ErrorCode.UNKNOWN_MCP_SERVER,
                f"tools.{tool.name}.server",
                f"no MCP server named {tool.server!r} (declared: {declared})",
            )
    used = {tool.server for tool in tools.values()}
    for name in servers:
        if name not in used:
            reader.report(
                ErrorCode.UNUSED_MCP_SERVER,
                f"mcp_servers.{name}",
                "no tool uses this server: give a tool `server: " + name + "` or remove it",
            )


def _failed(reader: Reader, server: str) -> bool:
    """Whether the section, or the server's own entry, was already reported."""
    entry = f"mcp_servers.{server}"
    return "mcp_servers" in reader.failed or any(
        path == entry or path.startswith(f"{entry}.") for path in reader.failed
    )
