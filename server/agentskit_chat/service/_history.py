"""What each operation resolves, and how it changes a server-held history when it commits."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from agentskit_chat.conversation import Message, Role

from ._errors import invalid
from ._limits import Limits
from ._types import Dispatch, Edit, Operation, Retry, Submit


@dataclass(frozen=True, slots=True)
class Plan:
    """The messages to resolve and the history change a successful turn commits."""

    messages: tuple[Message, ...] = field(repr=False)
    """The retained history the engine resolves, last user message last."""
    keep: int
    """Leading messages of the stored history that stay."""
    added: tuple[Message, ...] = field(repr=False)
    """Messages stored after the kept ones, before the answer."""
    user_message_id: str | None


def plan_turn(
    operation: Operation,
    history: Sequence[Message],
    limits: Limits,
    new_id: Callable[[str], str],
) -> Plan:
    """The plan of `operation` over a server-held `history` (ignored for dispatch)."""
    if isinstance(operation, Dispatch):
        return _dispatch(operation, limits)
    if isinstance(operation, Submit):
        return _submit(operation, history, limits, new_id)
    if isinstance(operation, Retry):
        index = _find(history, operation.message_id, Role.USER, "retry.message_id")
        return _resolve_prefix(history, index + 1, (), limits)
    if isinstance(operation, Edit):
        index = _find(history, operation.message_id, Role.USER, "edit.message_id")
        limits.check_text("edit.content", operation.content)
        edited = Message(history[index].id, Role.USER, operation.content)
        return _resolve_prefix(history, index, (edited,), limits)
    index = _find(history, operation.message_id, Role.ASSISTANT, "regenerate.message_id")
    return _resolve_prefix(history, index, (), limits)


def _dispatch(operation: Dispatch, limits: Limits) -> Plan:
    limits.check_dispatch(operation.messages)
    users = [i for i, m in enumerate(operation.messages) if m.role == Role.USER]
    if not users:
        raise invalid("dispatch.messages", "dispatch.messages holds no user message to resolve")
    last = operation.messages[users[-1]]
    limits.check_text(f"dispatch.messages[{users[-1]}].content", last.content)
    return Plan(operation.messages, 0, (), last.id)


def _submit(
    operation: Submit, history: Sequence[Message], limits: Limits, new_id: Callable[[str], str]
) -> Plan:
    limits.check_text("submit.content", operation.content)
    if operation.message_id is None:
        message_id = new_id("u")
    else:
        message_id = limits.check_id("submit.message_id", operation.message_id)
        if any(m.id == message_id for m in history):
            raise invalid("submit.message_id", "submit.message_id is already in the history")
    user = Message(message_id, Role.USER, operation.content)
    return _resolve_prefix(history, len(history), (user,), limits)


def _resolve_prefix(
    history: Sequence[Message], keep: int, added: tuple[Message, ...], limits: Limits
) -> Plan:
    messages = (*history[:keep], *added)
    limits.check_history_length(len(messages) + 1)  # and the answer
    limits.check_history_bytes(messages)
    users = [m for m in messages if m.role == Role.USER]
    return Plan(messages, keep, added, users[-1].id if users else None)


def _find(history: Sequence[Message], message_id: str | None, role: Role, field: str) -> int:
    """Index of the message `message_id` (or of the last message of `role`)."""
    for index in range(len(history) - 1, -1, -1):
        message = history[index]
        if message_id is None and message.role == role:
            return index
        if message.id == message_id:
            if message.role != role:
                raise invalid(field, f"{field} names a message of another role")
            return index
    if message_id is None:
        raise invalid(field, f"the history holds no {role} message")
    raise invalid(field, f"{field} is not in the history")
