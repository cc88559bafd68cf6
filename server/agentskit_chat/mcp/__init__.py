"""Server tools over the Model Context Protocol: the MCP servers a definition declares
(`mcp_servers`), the specs of their tools for the model, and calls to them.

Layering: this package uses the conversation and models layers only.

`ServerTools` and the names beside it load the MCP SDK, which takes most of a second to
import: they are loaded on first use, so a process whose definitions declare no server
never imports it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._errors import ServerToolsError
from ._observer import NO_TOOL_OBSERVER, ToolCallReport, ToolCallScope, ToolObserver
from ._outcomes import (
    DEFAULT_MAX_RESULT_BYTES,
    ERROR_TYPES,
    INVALID_ARGUMENTS,
    RESULT_TOO_LARGE,
    SERVER_GONE,
    TIMEOUT,
    TOOL_ERROR,
    UNKNOWN_TOOL,
    ToolOutcome,
)

if TYPE_CHECKING:
    from ._tools import (
        CALL_ID_META,
        DEFAULT_CONNECT_TIMEOUT,
        DEFAULT_RECONNECT_ATTEMPTS,
        DEFAULT_RECONNECT_BACKOFF,
        TURN_ID_META,
        ServerTools,
    )

_LOADED_ON_USE = frozenset(
    {
        "CALL_ID_META",
        "DEFAULT_CONNECT_TIMEOUT",
        "DEFAULT_RECONNECT_ATTEMPTS",
        "DEFAULT_RECONNECT_BACKOFF",
        "TURN_ID_META",
        "ServerTools",
    }
)

__all__ = [
    "CALL_ID_META",
    "DEFAULT_CONNECT_TIMEOUT",
    "DEFAULT_MAX_RESULT_BYTES",
    "DEFAULT_RECONNECT_ATTEMPTS",
    "DEFAULT_RECONNECT_BACKOFF",
    "ERROR_TYPES",
    "INVALID_ARGUMENTS",
    "NO_TOOL_OBSERVER",
    "RESULT_TOO_LARGE",
    "SERVER_GONE",
    "TIMEOUT",
    "TOOL_ERROR",
    "TURN_ID_META",
    "UNKNOWN_TOOL",
    "ServerTools",
    "ServerToolsError",
    "ToolCallReport",
    "ToolCallScope",
    "ToolObserver",
    "ToolOutcome",
]


def __getattr__(name: str) -> object:
    if name in _LOADED_ON_USE:
        from . import _tools

        return getattr(_tools, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
