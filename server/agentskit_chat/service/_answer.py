"""One model answer as an agentic turn gathers it, and small helpers of the agent loop."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from agentskit_chat.conversation import ToolCall

from ._tool_calls import ToolCalls
from ._types import Failed, ToolDelta, ToolEnded, ToolStarted, TurnEvent, Usage


@dataclass(slots=True)
class Answer:
    """What one model call answered."""

    calls: ToolCalls
    parts: list[str] = field(default_factory=list)
    made: tuple[ToolCall, ...] = ()
    usage: Usage | None = None
    finish: str = ""
    failed: Failed | None = None

    @property
    def text(self) -> str:
        return "".join(self.parts)


def handed_back(calls: tuple[ToolCall, ...]) -> Iterator[TurnEvent]:
    """The events of approved calls going back to the client to run."""
    for call in calls:
        yield ToolStarted(call.id, call.name)
        if call.arguments:
            yield ToolDelta(call.id, call.arguments)
        yield ToolEnded(call.id, call.arguments, "result")


def sum_usage(total: Usage | None, more: Usage | None) -> Usage | None:
    """The usage of two model calls together; None when neither reported any."""
    if total is None or more is None:
        return more if total is None else total
    return Usage(total.input_tokens + more.input_tokens, total.output_tokens + more.output_tokens)
