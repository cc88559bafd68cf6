"""How finished turns are recorded, and how a repeated turn id replays its record."""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Final

from agentskit_chat.conversation import FailureOutcome, TerminalTurn, TurnKind
from agentskit_chat.storage import HistoryMode

from ._records import Loaded, Records, now_ms
from ._types import Completed, Decided, Delta, Failed, Started, TurnEvent, TurnRequest

DEADLINE_EXCEEDED: Final = "deadline_exceeded"
CONFLICT: Final = "conflict"
MODEL_FAILED: Final = "model_failed"
OUTPUT_LIMIT: Final = "output_limit"
FAILURE_MESSAGES: Final = {
    "route_failed": "Deterministic route failed.",
    DEADLINE_EXCEEDED: "The turn did not finish before its deadline.",
    CONFLICT: "Another writer changed the session during the turn.",
    MODEL_FAILED: "The model call failed.",
    OUTPUT_LIMIT: "The answer was longer than the server allows.",
}
RETRYABLE: Final = frozenset({DEADLINE_EXCEEDED, CONFLICT})


def failure(code: str) -> Failed:
    """The failed event for a stable `code`, with its fixed, content-free message."""
    message = FAILURE_MESSAGES.get(code, FAILURE_MESSAGES[MODEL_FAILED])
    return Failed(code, message, code in RETRYABLE)


def completed_turn(
    request: TurnRequest, user_message_id: str | None, decided: Decided, answer_id: str
) -> TerminalTurn:
    """The record of a turn that committed."""
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
    )


def failed_turn(
    request: TurnRequest,
    user_message_id: str | None,
    code: str,
    outcome: FailureOutcome | None,
) -> TerminalTurn:
    """The record of a turn that failed and committed nothing else."""
    return TerminalTurn(
        turn_id=request.turn_id,
        operation=request.operation_name,
        outcome="failed",
        finished_at_ms=now_ms(),
        kind=None if outcome is None else str(outcome.trace.kind),
        route_id=None if outcome is None else outcome.route_id,
        user_message_id=user_message_id,
        error_code=code,
    )


async def repeat(
    records: Records, loaded: Loaded, turn: TerminalTurn
) -> AsyncGenerator[TurnEvent, None]:
    """The recorded outcome of a finished turn, without running anything."""
    yield Started(turn.operation, turn.user_message_id, duplicate=True)
    if turn.outcome == "failed":
        yield failure(turn.error_code or MODEL_FAILED)
        return
    yield Decided(
        turn.kind or str(TurnKind.AGENTIC),
        turn.route_id,
        turn.from_state or loaded.record.state,
        turn.to_state or loaded.record.state,
        turn.replayed,
    )
    content = ""
    if turn.assistant_message_id and loaded.history_mode == HistoryMode.SERVER:
        messages = await records.messages(loaded)
        content = next((m.content for m in messages if m.id == turn.assistant_message_id), "")
    if content:
        yield Delta(content)
    yield Completed(
        turn.assistant_message_id or "",
        content,
        loaded.definition.snapshot(loaded.record.state),
        loaded.cursor,
    )
