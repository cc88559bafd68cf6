"""Resuming an agentic turn after the server tool rounds a failed attempt recorded.

An agentic turn that fails after running server tools records the rounds it completed with
its failure (`TerminalTurn.rounds`, sealed). A later turn whose model would be asked with
the same messages (the message sent again, a retry of the same user message) is a retry of
that request: it resumes after the recorded rounds, so their calls do not run again.

The last recorded answer's calls that have no result were either running when the turn
stopped (their outcome is unknown: the model gets an `unknown_outcome` result saying so,
and they are not run again) or had not started (they run first).
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, Callable, Iterator
from contextlib import aclosing
from typing import Final

from agentskit_chat.conversation import (
    Message,
    RecordedRounds,
    Role,
    SessionRecord,
    TerminalTurn,
    ToolCall,
)

from ._tool_calls import SERVER
from ._turn_writes import Turn
from ._types import Delta, Failed, ToolDelta, ToolEnded, ToolRan, ToolStarted, TurnEvent

RunCalls = Callable[[tuple[ToolCall, ...], str, list[Message]], AsyncGenerator[TurnEvent, None]]
"""Runs server tool calls in order (see `Agentic._run_calls`): the calls, a label for
their results' ids, and the list the results go to."""

UNKNOWN_OUTCOME: Final = "unknown_outcome"
"""The error type of the result a call of unknown outcome gets when its turn resumes."""
UNKNOWN_TEXT: Final = (
    "The outcome of this call is unknown: the turn running it stopped while it ran, so it"
    " may or may not have had its effect. It was not run again."
)


def resumable(record: SessionRecord, of: str) -> TerminalTurn | None:
    """The failed attempt at the request `of` (see `rounds_digest`) whose rounds a retry
    resumes after: the newest finished turn, when it is that failure."""
    if not record.recent_turns:
        return None
    last = record.recent_turns[-1]
    rounds = last.rounds
    if last.outcome != "failed" or rounds is None or rounds.of != of:
        return None
    return last


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


def not_run(
    failed: TerminalTurn, first: tuple[ToolCall, ...] = ()
) -> tuple[tuple[ToolCall, ...], tuple[ToolCall, ...]]:
    """The calls of the failed turn's last recorded answer (or, before any, the approved
    calls `first` it ran first) without a recorded result: those whose outcome is unknown
    (running when it stopped), and those that never started."""
    assert failed.rounds is not None
    answered: set[str] = set()
    unknown = {call.call_id for call in failed.unknown}
    calls = first
    for message in reversed(failed.rounds.messages):
        if message.role == Role.ASSISTANT:
            calls = message.tool_calls
            break
        if message.tool_call_id is not None:
            answered.add(message.tool_call_id)
    left = [c for c in calls if c.id not in answered]
    return tuple(c for c in left if c.id in unknown), tuple(c for c in left if c.id not in unknown)


def unknown_result(call: ToolCall, message_id: str) -> tuple[Message, ToolRan]:
    """The result, and its event, of a call whose outcome is unknown."""
    message = Message(message_id, Role.TOOL, UNKNOWN_TEXT, tool_call_id=call.id)
    return message, ToolRan(call.id, UNKNOWN_TEXT, UNKNOWN_OUTCOME, message_id)


def recorded(
    of: str, messages: tuple[Message, ...], errors: tuple[tuple[str, str], ...]
) -> RecordedRounds:
    """The rounds a turn keeps so far, for the request `of`."""
    return RecordedRounds(of, messages, errors)


async def resume(
    turn: Turn,
    failed: TerminalTurn,
    of: str,
    rounds: list[Message],
    errors: list[tuple[str, str]],
    run_calls: RunCalls,
    first: tuple[ToolCall, ...] = (),
) -> AsyncGenerator[TurnEvent, None]:
    """Take up the rounds the `failed` attempt recorded (into `rounds` and `errors`): their
    events again, then the last answer's calls without a result: an `unknown_outcome`
    result for each call that was running when it stopped (never run again), and a run of
    each call that had not started (`first`: the approved calls a turn runs before asking
    the model). Ends early with a Failed event (recorded)."""
    kept = failed.rounds
    assert kept is not None
    for event in replayed(kept):
        yield event
    rounds += kept.messages
    errors += kept.errors
    unknown, unstarted = not_run(failed, first)
    for index, call in enumerate(unknown):
        message, ran = unknown_result(call, f"{turn.answer_id}.u.{index}")
        rounds.append(message)
        errors += error_of(ran)
        yield ran
    turn.rounds = recorded(of, tuple(rounds), tuple(errors))
    results: list[Message] = []
    async with aclosing(run_calls(unstarted, "r", results)) as calls:
        async for event in calls:
            yield event
            if isinstance(event, Failed):
                return
            if isinstance(event, ToolRan):
                errors += error_of(event)
                turn.rounds = recorded(of, (*rounds, *results), tuple(errors))
    rounds += results


def error_of(ran: ToolRan) -> list[tuple[str, str]]:
    """`[(call id, error type)]` of an error result; [] otherwise."""
    return [] if ran.error_type is None else [(ran.call_id, ran.error_type)]
