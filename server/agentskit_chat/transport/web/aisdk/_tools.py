"""Tools in the AI SDK's requests: the declarations a page passes in the body (`tools`,
`toolChoice`, `parallelToolCalls`, through the transport's `body` option, since `useChat`
sends none by itself), and the tool parts of UI messages (`tool-<name>` and `dynamic-tool`
parts, by their `state`) read into the contract's calls, results and approvals.

The service checks names, schemas, call ids and sizes as for any caller; this module only
reads the wire and names the field at fault, never its value.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from agentskit.chat.v1 import chat_pb2 as pb
from agentskit_chat.transport.web.boundary.fronts import bad_request

CHOICES: Final = frozenset({"auto", "none", "required"})
CALL_STATES: Final = frozenset(
    {"input-available", "approval-requested", "approval-responded"}
    | {"output-available", "output-error", "output-denied"}
)
"""The states of a complete call; `input-streaming` parts (a call cut mid-input) are
left out of the history."""
STREAMING: Final = "input-streaming"
DENIED: Final = "The user denied this tool call."
"""What a denied call's result reads (the words the service gives the model)."""


@dataclass(frozen=True, slots=True)
class ToolSetup:
    """The tools a request declares and how the model may use them."""

    tools: tuple[pb.ToolDeclaration, ...] = field(default=(), repr=False)
    choice: str = ""
    parallel: bool | None = None

    def apply(self, turn: pb.StreamTurnRequest) -> None:
        """Set these on the turn's request."""
        turn.tools.extend(self.tools)
        turn.tool_choice = self.choice
        if self.parallel is not None:
            turn.parallel_tool_calls = self.parallel


def tool_setup(body: Mapping[str, Any]) -> ToolSetup:
    """The `tools` ([{name, description, inputSchema}]), `toolChoice` and
    `parallelToolCalls` of a request body."""
    value = body.get("tools")
    if value is None:
        value = []
    if not isinstance(value, list):
        raise bad_request("tools", "tools must be an array of tool declarations")
    tools = tuple(_declaration(tool, f"tools[{index}]") for index, tool in enumerate(value))
    choice = _choice(body.get("toolChoice"))
    if choice and choice != "none" and not tools:
        raise bad_request("toolChoice", "toolChoice needs tools")
    parallel = body.get("parallelToolCalls")
    if parallel is not None and not isinstance(parallel, bool):
        raise bad_request("parallelToolCalls", "parallelToolCalls must be a boolean")
    return ToolSetup(tools, choice, parallel if tools else None)


def _declaration(tool: object, at: str) -> pb.ToolDeclaration:
    if not isinstance(tool, dict):
        raise bad_request(at, f"{at} must be an object")
    name = tool.get("name")
    if not isinstance(name, str) or not name:
        raise bad_request(f"{at}.name", f"{at}.name must be a non-empty string")
    description = tool.get("description", "")
    if not isinstance(description, str):
        raise bad_request(f"{at}.description", f"{at}.description must be a string")
    key = "inputSchema" if "inputSchema" in tool else "parameters"
    schema = tool.get(key)
    if schema is not None and not isinstance(schema, dict):
        raise bad_request(f"{at}.{key}", f"{at}.{key} must be a JSON Schema object")
    return pb.ToolDeclaration(
        name=unicode_text(f"{at}.name", name),
        description=unicode_text(f"{at}.description", description),
        parameters_json="" if schema is None else _json(schema),
    )


def _choice(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, str) and value in CHOICES:
        return value
    if isinstance(value, dict) and value.get("type") == "tool":
        name = value.get("toolName")
        if isinstance(name, str) and name:
            return unicode_text("toolChoice.toolName", name)
    raise bad_request(
        "toolChoice", 'toolChoice must be "auto", "none", "required" or {type: "tool", toolName}'
    )


@dataclass(frozen=True, slots=True)
class ToolPart:
    """One complete call of an assistant UI message."""

    call: pb.ToolCall
    result: str | None
    """The tool message's content, when the call has an output (or was denied)."""
    approval: pb.ToolApproval | None
    """The user's answer, when the part holds an approval response not yet sent."""
    denied: bool = False
    """The call was denied (its result is the denial the service gave the model)."""


def is_tool_part(kind: str) -> bool:
    """Whether a part type is a tool invocation (static `tool-<name>` or `dynamic-tool`)."""
    return kind.startswith("tool-") or kind == "dynamic-tool"


def tool_part(part: Mapping[str, Any], at: str) -> ToolPart | None:
    """The call of a tool part; None for a call whose input was still streaming."""
    kind: str = part["type"]
    if kind == "dynamic-tool":
        name = part.get("toolName")
        if not isinstance(name, str) or not name:
            raise bad_request(f"{at}.toolName", f"{at}.toolName must be a non-empty string")
    else:
        name = kind.removeprefix("tool-")
        if not name:
            raise bad_request(f"{at}.type", f"{at}.type must name the tool")
    ident = part.get("toolCallId")
    if not isinstance(ident, str) or not ident:
        raise bad_request(f"{at}.toolCallId", f"{at}.toolCallId must be a non-empty string")
    state = part.get("state")
    if state == STREAMING:
        return None
    if state not in CALL_STATES:
        raise bad_request(f"{at}.state", f"{at}.state must be a tool invocation state")
    call = pb.ToolCall(
        id=unicode_text(f"{at}.toolCallId", ident),
        name=unicode_text(f"{at}.type", name),
        arguments=_arguments(part, at, state),
    )
    result: str | None = None
    approval: pb.ToolApproval | None = None
    if state == "output-available":
        if "output" not in part:
            raise bad_request(f"{at}.output", f"{at}.output is required in output-available")
        result = _json(part["output"])
    elif state == "output-error":
        text = part.get("errorText")
        if not isinstance(text, str):
            raise bad_request(f"{at}.errorText", f"{at}.errorText must be a string")
        result = unicode_text(f"{at}.errorText", text)
    elif state in ("approval-responded", "output-denied"):
        approved, reason = _approval(part.get("approval"), f"{at}.approval")
        if state == "output-denied":
            if approved:
                raise bad_request(
                    f"{at}.approval.approved", f"{at}.approval.approved must be false"
                )
            result = f"{DENIED} Reason: {reason}" if reason else DENIED
        else:
            approval = pb.ToolApproval(tool_call_id=call.id, approved=approved, reason=reason)
    return ToolPart(call, result, approval, state == "output-denied")


def _arguments(part: Mapping[str, Any], at: str, state: str) -> str:
    value = part.get("input")
    if isinstance(value, dict):
        return _json(value)
    if value is None and ("input" not in part or state == "output-error"):
        return ""
    if state == "output-error":  # input that failed to parse: the call had none
        return ""
    raise bad_request(f"{at}.input", f"{at}.input must be a JSON object")


def _approval(value: object, at: str) -> tuple[bool, str]:
    if not isinstance(value, dict):
        raise bad_request(at, f"{at} must be an object with approved")
    approved = value.get("approved")
    if not isinstance(approved, bool):
        raise bad_request(f"{at}.approved", f"{at}.approved must be a boolean")
    reason = value.get("reason")
    if reason is None:
        reason = ""
    if not isinstance(reason, str):
        raise bad_request(f"{at}.reason", f"{at}.reason must be a string")
    return approved, unicode_text(f"{at}.reason", reason)


def _json(value: object) -> str:
    """Compact JSON text, ASCII so a lone surrogate in a string stays an escape."""
    return json.dumps(value, separators=(",", ":"))


def unicode_text(field: str, value: str) -> str:
    """`value` when it has a UTF-8 form (no lone surrogate); `bad_request` naming `field`."""
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise bad_request(field, f"{field} must be Unicode text (no lone surrogates)") from None
    return value
