"""Turn records as clients read them: one turn, pages of turns, and answer origins.

Everything here is derived from the stored session record (its lease and recent terminal
turns) and the server-held history; nothing is stored for it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Final

from agentskit_chat.conversation import Lease, Message, Role, SessionRecord, TerminalTurn, TurnKind

from ._errors import Reason, ServiceError, invalid
from ._page_tokens import PageScope
from ._terminal import interrupted_folded, recorded_failure, recorded_usage
from ._types import AnswerOrigin, TurnPage, TurnView

DEFAULT_PAGE_SIZE: Final = 20
MAX_PAGE_SIZE: Final = 100


def find_turn(record: SessionRecord, turn_id: str, at_ms: int) -> TurnView:
    """The retained turn `turn_id`: running (its lease is live) or finished; else NOT_FOUND.
    A lapsed lease that names server tool calls in flight is an interrupted turn already
    (it is written so at the session's next write)."""
    record = interrupted_folded(record, at_ms)
    lease = _live_lease(record, at_ms)
    if lease is not None and lease.turn_id == turn_id:
        return running_view(lease)
    finished = record.find_turn(turn_id)
    if finished is None:
        raise ServiceError(Reason.TURN_NOT_FOUND, "the session retains no turn with this id")
    return finished_view(finished)


def list_turns(
    record: SessionRecord,
    page_size: int,
    page_token: str | None,
    at_ms: int,
    tokens: PageScope,
) -> TurnPage:
    """A page of the retained turns, newest first: the running turn, then finished ones
    from the most recently finished. Tokens (issued and verified by `tokens`, the scope of
    this stored session) name the last turn of the previous page."""
    size = _page_size(page_size)
    record = interrupted_folded(record, at_ms)
    lease = _live_lease(record, at_ms)
    finished = record.recent_turns[::-1]
    running: tuple[TurnView, ...] = () if lease is None else (running_view(lease),)
    if page_token is None:
        ordered = [*running, *map(finished_view, finished)]
    else:
        anchor = tokens.read(page_token)
        at = next((i for i, turn in enumerate(finished) if anchor.names(turn.turn_id)), None)
        # A running anchor not finished yet starts the finished turns; any other is gone.
        rest = finished if anchor.running else ()
        if at is not None:
            rest = finished[at + 1 :]
        ordered = list(map(finished_view, rest))
    page = tuple(ordered[:size])
    more = len(ordered) > size
    token = tokens.issue(page[-1].turn_id, page[-1].outcome == "running") if more else None
    return TurnPage(page, token)


def running_view(lease: Lease) -> TurnView:
    """The record of the turn that holds `lease`."""
    return TurnView(
        turn_id=lease.turn_id,
        operation=lease.operation,
        outcome="running",
        user_message_id=lease.user_message_id,
        started_at_ms=lease.started_at_ms,
    )


def finished_view(turn: TerminalTurn) -> TurnView:
    """The record of a finished turn; failures as their stream ended."""
    failed = turn.outcome == "failed"
    return TurnView(
        turn_id=turn.turn_id,
        operation=turn.operation,
        outcome=turn.outcome,
        user_message_id=turn.user_message_id,
        assistant_message_id=turn.assistant_message_id,
        kind=turn.kind,
        route_id=turn.route_id,
        from_state=turn.from_state,
        to_state=turn.to_state,
        replayed=turn.replayed,
        failure=recorded_failure(turn) if failed else None,
        started_at_ms=turn.started_at_ms,
        finished_at_ms=turn.finished_at_ms,
        usage=None if failed else recorded_usage(turn),
        pending=turn.pending,
        unknown=turn.unknown,
    )


def answer_origins(
    record: SessionRecord, initial_state: str, messages: Sequence[Message]
) -> Mapping[str, AnswerOrigin]:
    """How each assistant message of a server-held history was produced.

    An answer following a user message with a recorded decision came from that decision's
    route; so did one whose retained turn record names a route (its decision was dropped by
    a migration: the record keeps the revision's names of the time); any other answer is
    agentic, at the state the earlier decisions reached. The turn id and `replayed` are
    known while the producing turn is retained.
    """
    decisions = record.conversation.decisions
    turns = {t.assistant_message_id: t for t in record.recent_turns if t.assistant_message_id}
    origins: dict[str, AnswerOrigin] = {}
    state = initial_state
    pending = None
    for message in messages:
        if message.role == Role.USER:
            if pending is not None:  # a decision whose answer is gone still moved the state
                state = pending.to_state
            pending = decisions.get(message.id)
        elif message.role == Role.ASSISTANT:
            turn = turns.get(message.id)
            turn_id, replayed = (None, False) if turn is None else (turn.turn_id, turn.replayed)
            if pending is None and turn is not None and turn.route_id:
                # A route's answer whose decision a migration dropped: as it was recorded.
                origin = AnswerOrigin(
                    turn.kind or str(TurnKind.DETERMINISTIC),
                    turn.route_id,
                    turn.from_state or state,
                    turn.to_state or state,
                    replayed,
                    turn_id,
                )
            elif pending is None:
                origin = AnswerOrigin(str(TurnKind.AGENTIC), None, state, state, replayed, turn_id)
            else:
                origin = AnswerOrigin(
                    str(pending.kind),
                    pending.route_id,
                    pending.from_state,
                    pending.to_state,
                    replayed,
                    turn_id,
                )
                state = pending.to_state
            origins[message.id] = origin
            pending = None
    return origins


def _live_lease(record: SessionRecord, at_ms: int) -> Lease | None:
    lease = record.lease
    return lease if lease is not None and lease.expires_at_ms > at_ms else None


def _page_size(requested: int) -> int:
    if requested < 0:
        raise invalid("page_size", "page_size must not be negative")
    return min(requested or DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)
