"""How finished turns are recorded, and how a repeated turn id replays its record."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Final

from agentskit_chat.conversation import (
    ROUTE_FAILED,
    FailureOutcome,
    Message,
    PendingCall,
    RecordedRounds,
    SessionRecord,
    TerminalTurn,
    ToolCall,
    TurnKind,
)
from agentskit_chat.storage import HistoryMode

from ._records import Loaded, now_ms
from ._types import (
    Completed,
    Decided,
    Delta,
    Failed,
    Started,
    ToolDelta,
    ToolEnded,
    ToolStarted,
    TurnEvent,
    TurnRequest,
    Usage,
)

DEADLINE_EXCEEDED: Final = "deadline_exceeded"
CONFLICT: Final = "conflict"
MODEL_FAILED: Final = "model_failed"
OUTPUT_LIMIT: Final = "output_limit"
TOOL_LIMIT: Final = "tool_limit"
"""The model called more tools, or wrote longer arguments, than the server allows."""
TOOL_ROUNDS: Final = "tool_rounds"
"""The model kept calling server tools past the rounds one turn may run."""
STORE_UNAVAILABLE: Final = "store_unavailable"
"""The turn's closing write failed: nothing was committed and the same turn id may run again."""
CANCELLED: Final = "cancelled"
"""CancelTurn (or the close of a cancelling stream) stopped the turn; nothing was recorded."""
INTERRUPTED: Final = "interrupted"
"""The process running the turn stopped before it ended; nothing was recorded."""
FAILURE_MESSAGES: Final = {
    ROUTE_FAILED: "Deterministic route failed.",
    DEADLINE_EXCEEDED: "The turn did not finish before its deadline.",
    CONFLICT: "Another writer changed the session during the turn.",
    MODEL_FAILED: "The model call failed.",
    OUTPUT_LIMIT: "The answer was longer than the server allows.",
    TOOL_LIMIT: "The answer called more tools, or longer ones, than the server allows.",
    TOOL_ROUNDS: "The model kept calling server tools past the rounds a turn may run.",
    STORE_UNAVAILABLE: "The session store failed; nothing was committed.",
    CANCELLED: "the turn was cancelled before it ended; nothing was committed",
    INTERRUPTED: "the server running the turn stopped before it ended; nothing was committed",
}
RETRYABLE: Final = frozenset(
    {DEADLINE_EXCEEDED, CONFLICT, STORE_UNAVAILABLE, CANCELLED, INTERRUPTED}
)


def failure(code: str, route_id: str | None = None) -> Failed:
    """The failed event for a stable `code`, with its fixed, content-free message."""
    message = FAILURE_MESSAGES.get(code, FAILURE_MESSAGES[MODEL_FAILED])
    return Failed(code, message, code in RETRYABLE, route_id)


def completed_turn(
    request: TurnRequest,
    user_message_id: str | None,
    decided: Decided,
    answer_id: str,
    *,
    started_at_ms: int | None,
    usage: Usage | None = None,
    pending: tuple[PendingCall, ...] = (),
) -> TerminalTurn:
    """The record of a turn that committed; `pending`, the tool calls its answer waits on."""
    return TerminalTurn(
        turn_id=request.turn_id,
        operation=request.operation_name,
        outcome="completed",
        finished_at_ms=now_ms(),
        kind=decided.kind,
        route_id=decided.route_id,
        user_message_id=user_message_id,
        assistant_message_id=answer_id,
        from_state=decided.from_state,
        to_state=decided.to_state,
        replayed=decided.replayed,
        started_at_ms=started_at_ms,
        input_tokens=None if usage is None else usage.input_tokens,
        output_tokens=None if usage is None else usage.output_tokens,
        decided=True,
        pending=pending,
    )


def failed_turn(
    request: TurnRequest,
    user_message_id: str | None,
    failed: Failed,
    outcome: FailureOutcome | None,
    *,
    started_at_ms: int | None,
    decided: Decided | None = None,
    rounds: RecordedRounds | None = None,
    unknown: tuple[PendingCall, ...] = (),
) -> TerminalTurn:
    """The record of a turn that failed and committed nothing else: the decision its stream
    sent before failing (if any) and the failed event exactly as its stream ended, so a
    repeated turn id repeats both; `rounds`, the server tool rounds it completed; `unknown`,
    the server tool calls it stopped while they ran."""
    kind: str | None = None
    route_id: str | None = None
    if decided is not None:
        kind, route_id = decided.kind, decided.route_id
    elif outcome is not None:  # a route's code failed: no decision went out
        kind, route_id = str(outcome.trace.kind), outcome.route_id
    return TerminalTurn(
        turn_id=request.turn_id,
        operation=request.operation_name,
        outcome="failed",
        finished_at_ms=now_ms(),
        kind=kind,
        route_id=route_id,
        user_message_id=user_message_id,
        error_code=failed.code,
        from_state=None if decided is None else decided.from_state,
        to_state=None if decided is None else decided.to_state,
        replayed=False if decided is None else decided.replayed,
        error_message=failed.message,
        retryable=failed.retryable,
        started_at_ms=started_at_ms,
        decided=decided is not None,
        rounds=rounds if rounds is not None and (rounds.messages or unknown) else None,
        unknown=unknown,
    )


def recorded_failure(turn: TerminalTurn) -> Failed:
    """The failed event a failed turn's stream ended with.

    Records written before the message and `retryable` were kept fall back to the fixed
    message and retryability of the code.
    """
    code = turn.error_code or MODEL_FAILED
    fixed = failure(code, turn.route_id if code == ROUTE_FAILED else None)
    return Failed(
        code,
        turn.error_message or fixed.message,
        fixed.retryable if turn.retryable is None else turn.retryable,
        fixed.route_id,
    )


async def repeat(
    loaded: Loaded, history: tuple[Message, ...], turn: TerminalTurn
) -> AsyncGenerator[TurnEvent, None]:
    """The recorded outcome of a finished turn, without running anything: the events its
    stream sent, except the deltas of a failed turn (their text was never committed).

    `history` is the server-held history read with `loaded`: the answer is looked up before
    the first event goes out, so turns that commit while the consumer sends the events
    change nothing of what is repeated.
    """
    content = ""
    calls: tuple[ToolCall, ...] = ()
    if turn.assistant_message_id and loaded.history_mode == HistoryMode.SERVER:
        answer = next((m for m in history if m.id == turn.assistant_message_id), None)
        if answer is not None:
            content, calls = answer.content, answer.tool_calls
    yield Started(turn.operation, turn.user_message_id, True, turn.assistant_message_id)
    if turn.outcome == "failed":
        if turn.decided:
            yield recorded_decision(turn, loaded.record.state)
        yield recorded_failure(turn)
        return
    yield recorded_decision(turn, loaded.record.state)
    if content:
        yield Delta(content)
    waits = {p.call_id: p.wait for p in turn.pending}
    if turn.pending and not calls:  # Client-held: ids and names only, no arguments.
        calls = tuple(ToolCall(p.call_id, p.name, "") for p in turn.pending)
    for call in calls:
        yield ToolStarted(call.id, call.name)
        if call.arguments:
            yield ToolDelta(call.id, call.arguments)
        yield ToolEnded(call.id, call.arguments, waits.get(call.id, "result"))
    yield Completed(
        turn.assistant_message_id or "",
        content,
        loaded.definition.snapshot(loaded.record.state),
        loaded.cursor,
        recorded_usage(turn),
        finish_reason_of(turn.pending),
        calls,
        turn.pending,
    )


def finish_reason_of(pending: tuple[PendingCall, ...]) -> str:
    """`tool_approval` when a call waits for approval, `tool_calls` when calls wait for
    results, else empty (a repeated turn does not know the model's reason)."""
    if any(p.wait == "approval" for p in pending):
        return "tool_approval"
    return "tool_calls" if pending else ""


def recorded_decision(turn: TerminalTurn, state: str) -> Decided:
    """The decision event a finished turn streamed; `state` stands in for states that
    records of version 1 may lack."""
    return Decided(
        turn.kind or str(TurnKind.AGENTIC),
        turn.route_id,
        turn.from_state or state,
        turn.to_state or state,
        turn.replayed,
    )


def recorded_usage(turn: TerminalTurn) -> Usage | None:
    """The model token usage a completed turn recorded, if any."""
    if turn.input_tokens is None or turn.output_tokens is None:
        return None
    return Usage(turn.input_tokens, turn.output_tokens)


def interrupted_folded(record: SessionRecord, at: int) -> SessionRecord:
    """`record` with its lapsed lease, when that names server tool calls in flight, recorded
    as an interrupted turn whose calls' outcome is unknown (the lease itself stays: the
    caller replaces it)."""
    lease = record.lease
    if lease is None or not lease.running or lease.expires_at_ms > at:
        return record
    if record.find_turn(lease.turn_id) is not None:
        return record
    interrupted = TerminalTurn(
        turn_id=lease.turn_id,
        operation=lease.operation or "submit",
        outcome="failed",
        finished_at_ms=at,
        user_message_id=lease.user_message_id,
        error_code=INTERRUPTED,
        started_at_ms=lease.started_at_ms,
        error_message=FAILURE_MESSAGES[INTERRUPTED],
        retryable=True,
        unknown=lease.running,
        rounds=lease.rounds,
    )
    return record.with_turn(interrupted)
