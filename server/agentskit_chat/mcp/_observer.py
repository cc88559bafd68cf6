"""The port through which server tool calls are observed (spans, metrics), kept free of
any telemetry library: `agentskit_chat.telemetry` provides the implementation.

An observer sees a tool's name, the call's id, its server, its duration and its error
type: never its arguments or its result.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Protocol


@dataclass(frozen=True, slots=True)
class ToolCallReport:
    """How one server tool call went."""

    tool: str
    call_id: str
    server: str
    seconds: float
    error_type: str | None = None
    """The outcome's error type; None for a call that succeeded."""


class ToolCallScope(Protocol):
    """One call in progress; `finish` is called once, in the task that started it."""

    def finish(self, report: ToolCallReport) -> None: ...


class ToolObserver(Protocol):
    """Told when a call starts (in the calling task, before any request is sent, so it may
    make a span current for the request to carry) and, through its scope, when it ends."""

    def tool_started(self, tool: str, call_id: str) -> ToolCallScope: ...


class _Unobserved:
    def tool_started(self, tool: str, call_id: str) -> ToolCallScope:
        return self

    def finish(self, report: ToolCallReport) -> None:
        return None


NO_TOOL_OBSERVER: Final[ToolObserver] = _Unobserved()
"""An observer that records nothing."""
