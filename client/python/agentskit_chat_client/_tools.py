"""Tools on the client side: what a turn may let the model call, the calls an answer makes,
and the results and approvals that continue an answer waiting for them."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, TypeAlias

from agentskit.chat.v1 import chat_pb2

ToolWait: TypeAlias = Literal["result", "approval", "server"]
"""What a tool call waits for: the client's result, an approve/deny decision, or (a server
tool) nothing from the client: the service runs it within the turn."""

_WAIT_FROM_PB: dict[int, ToolWait] = {
    chat_pb2.TOOL_WAIT_RESULT: "result",
    chat_pb2.TOOL_WAIT_APPROVAL: "approval",
    chat_pb2.TOOL_WAIT_SERVER: "server",
}


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool call of an assistant answer."""

    id: str
    """The call id; a tool result names it."""
    name: str
    arguments: str = field(repr=False)
    """The call's arguments as JSON text, exactly as the model wrote them."""

    def parsed_arguments(self) -> Any:
        """The arguments decoded from JSON."""
        return json.loads(self.arguments or "{}")


@dataclass(frozen=True, slots=True)
class ToolDeclaration:
    """A tool the model may call in a turn; the client runs it and sends its result back."""

    name: str
    description: str = ""
    parameters: Mapping[str, Any] | None = None
    """The JSON Schema of the arguments; `None` sends no schema."""


@dataclass(frozen=True, slots=True)
class ToolResult:
    """The result of one pending tool call."""

    tool_call_id: str
    content: str = field(repr=False)
    message_id: str | None = None
    """Id of the tool message the result becomes; the server picks one when `None`."""


@dataclass(frozen=True, slots=True)
class ToolApproval:
    """An approve or deny decision on a pending call that needs approval."""

    tool_call_id: str
    approved: bool
    reason: str = field(default="", repr=False)
    """Why it was denied; the model sees it with the denial."""


@dataclass(frozen=True, slots=True)
class PendingToolCall:
    """A tool call the answer waits on."""

    tool_call_id: str
    name: str
    wait: ToolWait


@dataclass(frozen=True, slots=True)
class ToolResults:
    """Continue an answer that waits for tools: a result for each call waiting for one and
    a decision for each call waiting for approval. It goes to the model, never the routes."""

    results: Sequence[ToolResult] = ()
    approvals: Sequence[ToolApproval] = ()


@dataclass(frozen=True, slots=True)
class TurnTools:
    """The tools a turn lets the model call, and how."""

    tools: Sequence[ToolDeclaration] = ()
    choice: str = ""
    """``"auto"``, ``"none"``, ``"required"`` or a declared tool's name; empty: the model's
    default."""
    parallel: bool | None = None
    """Whether the model may make several calls in one answer; ``None``: its default."""


def wait_from_pb(value: int) -> ToolWait | None:
    """Decode a ``ToolWait``; unspecified is ``None`` (the call waits for nothing)."""
    return _WAIT_FROM_PB.get(value)


def tool_call_from_pb(call: chat_pb2.ToolCall) -> ToolCall:
    """Decode a ``ToolCall``."""
    return ToolCall(id=call.id, name=call.name, arguments=call.arguments)


def tool_call_to_pb(call: ToolCall) -> chat_pb2.ToolCall:
    """Encode a ``ToolCall``."""
    return chat_pb2.ToolCall(id=call.id, name=call.name, arguments=call.arguments)


def pending_from_pb(pending: chat_pb2.PendingToolCall) -> PendingToolCall:
    """Decode a ``PendingToolCall``."""
    return PendingToolCall(
        tool_call_id=pending.tool_call_id,
        name=pending.name,
        wait=wait_from_pb(pending.wait) or "result",
    )


def declaration_to_pb(tool: ToolDeclaration) -> chat_pb2.ToolDeclaration:
    """Encode a ``ToolDeclaration``; the schema is sent as compact JSON text."""
    schema = "" if tool.parameters is None else json.dumps(tool.parameters, separators=(",", ":"))
    return chat_pb2.ToolDeclaration(
        name=tool.name, description=tool.description, parameters_json=schema
    )


def approval_to_pb(approval: ToolApproval) -> chat_pb2.ToolApproval:
    """Encode a ``ToolApproval``."""
    return chat_pb2.ToolApproval(
        tool_call_id=approval.tool_call_id, approved=approval.approved, reason=approval.reason
    )


def fill_tool_results(target: chat_pb2.ToolResultsOperation, operation: ToolResults) -> None:
    """Write ``operation`` into a request's ``tool_results`` field."""
    target.SetInParent()
    target.results.extend(
        chat_pb2.ToolResult(
            tool_call_id=result.tool_call_id,
            content=result.content,
            message_id=result.message_id or "",
        )
        for result in operation.results
    )
    target.approvals.extend(approval_to_pb(approval) for approval in operation.approvals)
