"""Tools in a `RunAgentInput`, read into the contract's shapes.

- `tools` (frontend tools: `name`, `description`, `parameters` JSON Schema) become the
  turn's `ToolDeclaration`s; the service checks names, schemas and limits.
- An assistant message's `toolCalls` (`[{id, type: "function", function: {name,
  arguments}}]`) become its `Message.tool_calls`; a `tool` message's `toolCallId` the
  call it answers (`Message.tool_call_id`).
- `resume` entries answer the interrupts of a run that waited for approvals: each names
  the call it decides on (`interruptId` is the call id, as `_outcome` sends it). `status:
  "resolved"` with `payload` `true` / `false` or `{approved, reason?}` approves or denies
  the call; `status: "cancelled"` denies it.

Each mistake is a 400 naming the field, never its value.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any, Final

from agentskit.chat.v1 import chat_pb2 as pb
from agentskit_chat.transport.web.boundary.fronts import bad_request

RESUME_STATUSES: Final = frozenset({"resolved", "cancelled"})

Unicode = Callable[[str, str], str]
"""Checks that a string has a UTF-8 form (`field`, `value`) -> `value`."""


def declarations(value: Any, unicode: Unicode) -> tuple[pb.ToolDeclaration, ...]:
    """The `tools` of the input."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise bad_request("tools", "tools must be an array")
    return tuple(_declaration(tool, f"tools[{i}]", unicode) for i, tool in enumerate(value))


def _declaration(tool: Any, at: str, unicode: Unicode) -> pb.ToolDeclaration:
    if not isinstance(tool, dict):
        raise bad_request(at, f"{at} must be an object")
    name = tool.get("name")
    if not isinstance(name, str) or not name:
        raise bad_request(f"{at}.name", f"{at}.name must be a non-empty string")
    description = tool.get("description")
    if description is None:
        description = ""
    if not isinstance(description, str):
        raise bad_request(f"{at}.description", f"{at}.description must be a string")
    parameters = tool.get("parameters")
    if parameters is not None and not isinstance(parameters, dict):
        raise bad_request(f"{at}.parameters", f"{at}.parameters must be a JSON Schema object")
    schema = ""
    if parameters is not None:
        schema = unicode(
            f"{at}.parameters", json.dumps(parameters, separators=(",", ":"), ensure_ascii=False)
        )
    return pb.ToolDeclaration(
        name=unicode(f"{at}.name", name),
        description=unicode(f"{at}.description", description),
        parameters_json=schema,
    )


def assistant_calls(message: Mapping[str, Any], at: str, unicode: Unicode) -> list[pb.ToolCall]:
    """The `toolCalls` of an assistant message."""
    value = message.get("toolCalls")
    if value is None:
        return []
    if not isinstance(value, list):
        raise bad_request(f"{at}.toolCalls", f"{at}.toolCalls must be an array")
    calls = []
    for index, call in enumerate(value):
        where = f"{at}.toolCalls[{index}]"
        if not isinstance(call, dict):
            raise bad_request(where, f"{where} must be an object")
        if call.get("type", "function") != "function":
            raise bad_request(f"{where}.type", f'{where}.type must be "function"')
        ident = call.get("id")
        if not isinstance(ident, str) or not ident:
            raise bad_request(f"{where}.id", f"{where}.id must be a non-empty string")
        function = call.get("function")
        if not isinstance(function, dict):
            raise bad_request(f"{where}.function", f"{where}.function must be an object")
        name = function.get("name")
        if not isinstance(name, str) or not name:
            raise bad_request(
                f"{where}.function.name", f"{where}.function.name must be a non-empty string"
            )
        arguments = function.get("arguments", "")
        if not isinstance(arguments, str):
            raise bad_request(
                f"{where}.function.arguments", f"{where}.function.arguments must be a string"
            )
        calls.append(
            pb.ToolCall(
                id=unicode(f"{where}.id", ident),
                name=unicode(f"{where}.function.name", name),
                arguments=unicode(f"{where}.function.arguments", arguments),
            )
        )
    return calls


def answered_call(message: Mapping[str, Any], at: str, unicode: Unicode) -> str:
    """The `toolCallId` of a `tool` message."""
    ident = message.get("toolCallId")
    if not isinstance(ident, str) or not ident:
        raise bad_request(f"{at}.toolCallId", f"{at}.toolCallId must be a non-empty string")
    return unicode(f"{at}.toolCallId", ident)


def approvals(value: Any, unicode: Unicode) -> tuple[pb.ToolApproval, ...]:
    """The `resume` entries of the input as decisions on the calls they name."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise bad_request("resume", "resume must be an array")
    return tuple(_approval(entry, f"resume[{i}]", unicode) for i, entry in enumerate(value))


def _approval(entry: Any, at: str, unicode: Unicode) -> pb.ToolApproval:
    if not isinstance(entry, dict):
        raise bad_request(at, f"{at} must be an object")
    ident = entry.get("interruptId")
    if not isinstance(ident, str) or not ident:
        raise bad_request(f"{at}.interruptId", f"{at}.interruptId must be a non-empty string")
    call_id = unicode(f"{at}.interruptId", ident)
    status = entry.get("status")
    if status not in RESUME_STATUSES:
        raise bad_request(f"{at}.status", f'{at}.status must be "resolved" or "cancelled"')
    if status == "cancelled":
        return pb.ToolApproval(tool_call_id=call_id, approved=False)
    payload = entry.get("payload")
    if isinstance(payload, bool):
        return pb.ToolApproval(tool_call_id=call_id, approved=payload)
    if not isinstance(payload, dict):
        raise bad_request(
            f"{at}.payload", f"{at}.payload must be a boolean or an object with approved"
        )
    approved = payload.get("approved")
    if not isinstance(approved, bool):
        raise bad_request(f"{at}.payload.approved", f"{at}.payload.approved must be a boolean")
    reason = payload.get("reason")
    if reason is None:
        reason = ""
    if not isinstance(reason, str):
        raise bad_request(f"{at}.payload.reason", f"{at}.payload.reason must be a string")
    return pb.ToolApproval(
        tool_call_id=call_id,
        approved=approved,
        reason=unicode(f"{at}.payload.reason", reason),
    )


def request_field(name: str) -> str:
    """The request name of a field of a dispatched message or a declared tool, as the
    service names it (`tool_calls[0].arguments` -> `toolCalls[0].function.arguments`)."""
    for service, wire in (
        (".arguments", ".function.arguments"),
        (".name", ".function.name"),
    ):
        if name.startswith(".tool_calls[") and name.endswith(service):
            name = name.removesuffix(service) + wire
    name = name.replace(".tool_calls", ".toolCalls").replace(".tool_call_id", ".toolCallId")
    return name.replace(".parameters_json", ".parameters")
