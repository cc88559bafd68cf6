"""Resuming an agentic turn after the server tool rounds a failed attempt recorded.

An agentic turn that fails after running server tools records the rounds it completed with
its failure (`TerminalTurn.rounds`, sealed). A later turn whose model would be asked with
the same messages (the message sent again, a retry of the same user message) is a retry of
that request: it resumes after the recorded rounds, so their calls do not run again. Calls
of the last recorded answer that had not run when it failed run first.
"""

from __future__ import annotations

from collections.abc import Iterator

from agentskit_chat.conversation import (
    Message,
    RecordedRounds,
    Role,
    SessionRecord,
    ToolCall,
)

from ._tool_calls import SERVER
from ._types import Delta, ToolDelta, ToolEnded, ToolRan, ToolStarted, TurnEvent


def resumable(record: SessionRecord, of: str) -> RecordedRounds | None:
    """The rounds a failed attempt at the request `of` (see `rounds_digest`) recorded, when
    the newest finished turn is that failure."""
    if not record.recent_turns:
        return None
    last = record.recent_turns[-1]
    rounds = last.rounds
    if last.outcome != "failed" or rounds is None or rounds.of != of:
        return None
    return rounds


def replayed(rounds: RecordedRounds) -> Iterator[TurnEvent]:
    """The events the recorded rounds streamed: each answer's text and server tool calls,
    and each call's result."""
    for message in rounds.messages:
        if message.role == Role.TOOL:
            call_id = message.tool_call_id or ""
            error = rounds.error_of(call_id)
            yield ToolRan(call_id, message.content, error, message.id)
            continue
        if message.content:
            yield Delta(message.content)
        for call in message.tool_calls:
            yield ToolStarted(call.id, call.name, SERVER)
            if call.arguments:
                yield ToolDelta(call.id, call.arguments)
            yield ToolEnded(call.id, call.arguments, SERVER)


def not_run(rounds: RecordedRounds) -> tuple[ToolCall, ...]:
    """The calls of the last recorded answer without a recorded result."""
    answered: set[str] = set()
    for message in reversed(rounds.messages):
        if message.role == Role.ASSISTANT:
            return tuple(c for c in message.tool_calls if c.id not in answered)
        if message.tool_call_id is not None:
            answered.add(message.tool_call_id)
    return ()


def recorded(
    of: str | None, messages: tuple[Message, ...], errors: tuple[tuple[str, str], ...]
) -> RecordedRounds | None:
    """The rounds a turn keeps so far (None without a request digest: nothing to resume)."""
    if of is None or not messages:
        return None
    return RecordedRounds(of, messages, errors)
