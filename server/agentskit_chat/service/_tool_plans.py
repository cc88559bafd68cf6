"""Turns that continue an answer with tool results: what they must answer, and what they add.

The session's last answer (its newest completed turn) records the tool calls it waits on,
by id and name only. The next turn that carries tool results or approval decisions must
answer exactly those: each call waiting for a result gets one, each call waiting for
approval gets a decision. A denied call is answered for the client with a denied result;
an approved call without a result goes back to the client to run, and the turn completes
waiting for it without asking the model. Anything else is refused before anything is
stored.

Routes never see such a turn: it continues the model's answer (DESIGN 6c).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from agentskit_chat.conversation import Message, PendingCall, Role, SessionRecord, ToolCall

from ._errors import Reason, ServiceError, invalid
from ._held_results import held_call_ids
from ._limits import Limits
from ._types import Approval, Dispatch, ToolResult, ToolResults

DENIED: str = "The user denied this tool call."


@dataclass(frozen=True, slots=True)
class ToolContinuation:
    """How a turn answers the last answer's pending calls."""

    added: tuple[Message, ...] = field(repr=False)
    """Tool messages appended after the history: the results, in the order of the calls."""
    waiting: tuple[PendingCall, ...]
    """Approved calls without a result: the turn completes waiting for them."""
    calls: tuple[ToolCall, ...] = field(repr=False)
    """The waiting calls as the answer made them (arguments empty when not known)."""
    answer_id: str
    """The answer whose calls are answered."""


def continue_server_held(
    operation: ToolResults,
    history: Sequence[Message],
    record: SessionRecord,
    limits: Limits,
    new_id: Callable[[str], str],
) -> ToolContinuation:
    """The continuation of a server-held history by `operation`; ServiceError if it does not
    answer exactly the calls the last answer waits on."""
    pending, answer = _pending_answer(history, record)
    results = {}
    for index, result in enumerate(operation.results):
        where = f"tool_results.results[{index}]"
        limits.check_content(f"{where}.content", result.content)
        if result.message_id is not None:
            limits.check_id(f"{where}.message_id", result.message_id)
            if any(m.id == result.message_id for m in history):
                raise invalid(
                    f"{where}.message_id", f"{where}.message_id is already in the history"
                )
        results[index] = result
    return _answer(
        pending,
        answer,
        operation.approvals,
        [(f"tool_results.results[{i}]", r) for i, r in results.items()],
        "tool_results.approvals",
        new_id,
    )


def continue_client_held(
    operation: Dispatch,
    record: SessionRecord,
    new_id: Callable[[str], str],
    approvals: frozenset[str] = frozenset(),
) -> ToolContinuation | None:
    """The continuation a dispatch makes when its history ends with tool messages or it
    carries approvals; None for an ordinary dispatch (the last user message is resolved).

    The calls answered are those the session's last answer waits on when the dispatched
    answer makes them (or makes none: the client dropped them); an answer this session did
    not record (a stateless client sending its whole history to a new session, or a
    history that went on elsewhere) is taken as the client holds it, since the client is
    the keeper of a client-held history: each of its calls must be answered, and those of
    a tool the definition marks for approval need a decision."""
    messages = operation.messages
    start = len(messages)
    while start > 0 and messages[start - 1].role == Role.TOOL:
        start -= 1
    if start == len(messages) and not operation.approvals:
        return None
    if start == 0 or messages[start - 1].role != Role.ASSISTANT:
        raise _no_pending()
    answer = messages[start - 1]
    waits = _client_waits(answer, record, approvals)
    known = {call.id: call for call in answer.tool_calls}
    calls = tuple(known.get(p.call_id, ToolCall(p.call_id, p.name, "")) for p in waits)
    waited = {p.call_id for turn in record.recent_turns for p in turn.pending}
    answered_before = (set(known) & waited) - {p.call_id for p in waits}
    answered_before |= held_call_ids(record)  # the server's own calls of the answer
    results = [
        (f"dispatch.messages[{i}]", ToolResult(m.tool_call_id or "", m.content, m.id))
        for i, m in enumerate(messages[start:], start)
        if m.tool_call_id not in answered_before  # answered by an earlier turn, or the server
    ]
    pending = tuple(zip(waits, calls, strict=True))
    continuation = _answer(
        pending, answer.id, operation.approvals, results, "dispatch.approvals", new_id
    )
    # The client holds its results already: only denied results are added for the model.
    held = {m.id for m in messages}
    denied = tuple(m for m in continuation.added if m.id not in held)
    return ToolContinuation(denied, continuation.waiting, continuation.calls, answer.id)


def _client_waits(
    answer: Message, record: SessionRecord, approvals: frozenset[str]
) -> tuple[PendingCall, ...]:
    """What a dispatched answer's calls wait for (see `continue_client_held`)."""
    last = record.last_answer()
    recorded = () if last is None else last.pending
    made = {call.id for call in answer.tool_calls}
    if recorded and {p.call_id for p in recorded} <= (made or {p.call_id for p in recorded}):
        return recorded  # the calls it still waits on (others were answered before)
    if not made:
        raise _no_pending()
    return tuple(
        PendingCall(call.id, call.name, "approval" if call.name in approvals else "result")
        for call in answer.tool_calls
    )


def check_tool_fields(messages: Sequence[Message]) -> None:
    """Raise INVALID_ARGUMENT when a dispatched history's tool data is malformed: calls on
    a message that is not the assistant's, a tool message naming no call, a call id used
    twice, or arguments that are not JSON."""
    seen: set[str] = set()
    for index, message in enumerate(messages):
        where = f"dispatch.messages[{index}]"
        if message.tool_calls and message.role != Role.ASSISTANT:
            raise invalid(f"{where}.tool_calls", f"{where}.tool_calls is for assistant messages")
        if (message.role == Role.TOOL) != bool(message.tool_call_id):
            raise invalid(
                f"{where}.tool_call_id",
                f"{where}.tool_call_id is set on, and only on, tool messages",
            )
        for position, call in enumerate(message.tool_calls):
            at = f"{where}.tool_calls[{position}]"
            if not call.id or call.id in seen or not call.name:
                raise invalid(f"{at}.id", f"{at} needs a unique id and a name")
            seen.add(call.id)
            check_arguments(f"{at}.arguments", call.arguments)


def check_arguments(field: str, arguments: str) -> None:
    """Raise INVALID_ARGUMENT unless `arguments` is a JSON object (empty text is none)."""
    if not arguments:
        return
    try:
        value = json.loads(arguments)
    except ValueError:
        raise invalid(field, f"{field} is not JSON") from None
    if not isinstance(value, dict):
        raise invalid(field, f"{field} is not a JSON object")


def denied_result(reason: str) -> str:
    """What the model reads for a denied call, with the user's `reason` when given; a
    front that records a denial as the call's result writes the same words."""
    return f"{DENIED} Reason: {reason}" if reason else DENIED


def _pending_answer(
    history: Sequence[Message], record: SessionRecord
) -> tuple[tuple[tuple[PendingCall, ToolCall], ...], str]:
    """The pending calls of the last answer with their calls, and the answer's id; the
    history must still end with that answer and tool messages only."""
    last = record.last_answer()
    if last is None or not last.pending or not last.assistant_message_id:
        raise _no_pending()
    index = next((i for i, m in enumerate(history) if m.id == last.assistant_message_id), None)
    if index is None or any(m.role != Role.TOOL for m in history[index + 1 :]):
        raise _no_pending()
    known = {call.id: call for m in history[: index + 1] for call in m.tool_calls}
    answered = {m.tool_call_id for m in history[index + 1 :]}
    pending = tuple(
        (p, known.get(p.call_id, ToolCall(p.call_id, p.name, "")))
        for p in last.pending
        if p.call_id not in answered
    )
    return pending, last.assistant_message_id


def _answer(
    pending: tuple[tuple[PendingCall, ToolCall], ...],
    answer_id: str,
    approvals: Sequence[Approval],
    results: Sequence[tuple[str, ToolResult]],
    approvals_field: str,
    new_id: Callable[[str], str],
) -> ToolContinuation:
    waits = {p.call_id: p for p, _ in pending}
    decided: dict[str, Approval] = {}
    for index, given in enumerate(approvals):
        call = waits.get(given.call_id)
        if call is None or call.wait != "approval" or given.call_id in decided:
            raise _unknown(f"{approvals_field}[{index}].tool_call_id")
        decided[given.call_id] = given
    answered: dict[str, ToolResult] = {}
    for where, result in results:
        call = waits.get(result.call_id)
        runs = call is not None and (
            call.wait == "result"
            or (result.call_id in decided and decided[result.call_id].approved)
        )
        if not runs or result.call_id in answered:
            raise _unknown(f"{where}.tool_call_id")
        answered[result.call_id] = result
    added: list[Message] = []
    waiting: list[tuple[PendingCall, ToolCall]] = []
    for call, made in pending:
        approval = decided.get(call.call_id)
        if call.wait == "approval" and approval is None:
            raise _unanswered(call.call_id)
        if approval is not None and not approval.approved:
            text = denied_result(approval.reason)
            added.append(Message(new_id("t"), Role.TOOL, text, tool_call_id=call.call_id))
        elif call.call_id in answered:
            result = answered[call.call_id]
            message_id = result.message_id or new_id("t")
            added.append(Message(message_id, Role.TOOL, result.content, tool_call_id=call.call_id))
        elif approval is not None:
            waiting.append((PendingCall(call.call_id, call.name, "result"), made))
        else:
            raise _unanswered(call.call_id)
    return ToolContinuation(
        tuple(added), tuple(w for w, _ in waiting), tuple(c for _, c in waiting), answer_id
    )


def _no_pending() -> ServiceError:
    return ServiceError(
        Reason.NO_PENDING_TOOL_CALLS, "the session's last answer waits on no tool call"
    )


def _unknown(field: str) -> ServiceError:
    return ServiceError(
        Reason.TOOL_CALL_UNKNOWN,
        f"{field} names no call the last answer waits on (unknown or already answered)",
        field=field,
    )


def _unanswered(call_id: str) -> ServiceError:
    return ServiceError(
        Reason.TOOL_CALLS_UNANSWERED,
        "the request leaves a call of the last answer unanswered",
        field=f"tool_call:{call_id}",
    )
