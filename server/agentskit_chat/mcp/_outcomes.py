"""What a server tool's call ends with, as the model will see it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

DEFAULT_MAX_RESULT_BYTES: Final = 64 * 1024
"""The largest result (UTF-8 bytes of its text) a call may return by default."""

TIMEOUT: Final = "timeout"
"""The call took longer than the tool's `timeout`."""
SERVER_GONE: Final = "server_gone"
"""The server went away during the call, or cannot be reached again."""
TOOL_ERROR: Final = "tool_error"
"""The tool ran and reported an error, or the server refused the call."""
RESULT_TOO_LARGE: Final = "result_too_large"
"""The result exceeded the size limit; it is not returned."""
INVALID_ARGUMENTS: Final = "invalid_arguments"
"""The model's arguments are not a JSON object."""
UNKNOWN_TOOL: Final = "unknown_tool"
"""No declared server tool has this name."""
ERROR_TYPES: Final = frozenset(
    {TIMEOUT, SERVER_GONE, TOOL_ERROR, RESULT_TOO_LARGE, INVALID_ARGUMENTS, UNKNOWN_TOOL}
)


@dataclass(frozen=True, slots=True)
class ToolOutcome:
    """The result of one server tool call: its text for the model, or an error outcome."""

    text: str = field(repr=False)
    """The tool's result, or for an error a short explanation for the model; left out of
    the repr, like any other content."""
    is_error: bool = False
    error_type: str | None = None
    """One of ERROR_TYPES when `is_error`; None otherwise."""

    @classmethod
    def failure(cls, error_type: str, text: str) -> ToolOutcome:
        """An error outcome of `error_type` (one of ERROR_TYPES)."""
        return cls(text, is_error=True, error_type=error_type)
