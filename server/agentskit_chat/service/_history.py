"""What each operation resolves, and how it changes a server-held history when it commits."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from agentskit_chat.conversation import Message, Role, SessionRecord

from ._errors import invalid
from ._limits import Limits
from ._tool_plans import (
    ToolContinuation,
    check_tool_fields,
    continue_client_held,
    continue_server_held,
)
from ._types import Dispatch, Edit, Operation, Retry, Submit, ToolResults


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
    tools: ToolContinuation | None = None
    """How the turn answers the last answer's tool calls; None when it resolves a user
    message (then the routes run first)."""

    @property
    def continues(self) -> bool:
        """The turn continues the model's answer: it goes to the model, past the routes."""
        return self.tools is not None and not self.tools.waiting


def plan_turn(
    operation: Operation,
    history: Sequence[Message],
    limits: Limits,
    new_id: Callable[[str], str],
    record: SessionRecord | None = None,
    approvals: frozenset[str] = frozenset(),
) -> Plan:
    """The plan of `operation` over a server-held `history` (ignored for dispatch);
    `record` tells which tool calls the last answer waits on, `approvals` which tools'
    calls wait for approval."""
    if isinstance(operation, Dispatch):
        return _dispatch(operation, limits, record, new_id, approvals)
    if isinstance(operation, ToolResults):
        return _tool_results(operation, history, limits, new_id, record)
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


def _dispatch(
    operation: Dispatch,
    limits: Limits,
    record: SessionRecord | None,
    new_id: Callable[[str], str],
    approvals: frozenset[str],
) -> Plan:
    limits.check_dispatch(operation.messages)
    check_tool_fields(operation.messages)
    users = [i for i, m in enumerate(operation.messages) if m.role == Role.USER]
    if not users:
        raise invalid("dispatch.messages", "dispatch.messages holds no user message to resolve")
    last = operation.messages[users[-1]]
    tools = None if record is None else continue_client_held(operation, record, new_id, approvals)
    if tools is None:
        limits.check_text(f"dispatch.messages[{users[-1]}].content", last.content)
        return Plan(operation.messages, 0, (), last.id)
    return Plan((*operation.messages, *tools.added), 0, (), last.id, tools)


def _tool_results(
    operation: ToolResults,
    history: Sequence[Message],
    limits: Limits,
    new_id: Callable[[str], str],
    record: SessionRecord | None,
) -> Plan:
    if record is None:
        raise ValueError("a tool results plan needs the session record")
    tools = continue_server_held(operation, history, record, limits, new_id)
    plan = _resolve_prefix(history, len(history), tools.added, limits)
    return Plan(plan.messages, plan.keep, plan.added, plan.user_message_id, tools)


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
