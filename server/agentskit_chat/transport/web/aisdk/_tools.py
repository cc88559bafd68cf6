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
from dataclasses import dataclass
from typing import Any, Final

from agentskit.chat.v1 import chat_pb2 as pb
from agentskit_chat.service import denied_result
from agentskit_chat.transport.web.boundary.fields import an_object, required_text, unicode_text
from agentskit_chat.transport.web.boundary.fronts import bad_request
from agentskit_chat.transport.web.boundary.tools import ToolFields, TurnTools, decision, turn_tools

CALL_STATES: Final = frozenset(
    {"input-available", "approval-requested", "approval-responded"}
    | {"output-available", "output-error", "output-denied"}
)
"""The states of a complete call; `input-streaming` parts (a call cut mid-input) are
left out of the history."""
STREAMING: Final = "input-streaming"
FIELDS: Final = ToolFields(
    "toolChoice",
    "parallelToolCalls",
    named_choice='{type: "tool", toolName}',
    not_a_list="tools must be an array of tool declarations",
)


def tool_setup(body: Mapping[str, Any]) -> TurnTools:
    """The `tools` ([{name, description, inputSchema}]), `toolChoice` and
    `parallelToolCalls` of a request body."""
    return turn_tools(body, FIELDS, _declaration, _named_tool)


def _declaration(value: object, at: str) -> pb.ToolDeclaration:
    tool = an_object(value, at)
    name = required_text(tool.get("name"), f"{at}.name")
    description = tool.get("description", "")  # an explicit null is refused, unlike AG-UI's
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


def _named_tool(choice: dict[str, Any]) -> str | None:
    name = choice.get("toolName")
    if choice.get("type") != "tool" or not isinstance(name, str) or not name:
        return None
    return unicode_text("toolChoice.toolName", name)


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
        name = required_text(part.get("toolName"), f"{at}.toolName")
    else:
        name = kind.removeprefix("tool-")
        if not name:
            raise bad_request(f"{at}.type", f"{at}.type must name the tool")
    ident = required_text(part.get("toolCallId"), f"{at}.toolCallId")
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
            result = denied_result(reason)
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
    return decision(value, at)


def _json(value: object) -> str:
    """Compact JSON text, ASCII so a lone surrogate in a string stays an escape."""
    return json.dumps(value, separators=(",", ":"))
