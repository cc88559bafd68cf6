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
from collections.abc import Mapping
from typing import Any, Final

from agentskit.chat.v1 import chat_pb2 as pb
from agentskit_chat.transport.web.boundary import tools
from agentskit_chat.transport.web.boundary.fields import (
    an_object,
    optional_text,
    required_text,
    unicode_text,
)
from agentskit_chat.transport.web.boundary.fronts import bad_request

RESUME_STATUSES: Final = frozenset({"resolved", "cancelled"})


def declarations(value: Any) -> tuple[pb.ToolDeclaration, ...]:
    """The `tools` of the input."""
    return tools.declarations(value, _declaration)


def _declaration(value: Any, at: str) -> pb.ToolDeclaration:
    tool = an_object(value, at)
    name = required_text(tool.get("name"), f"{at}.name")
    description = optional_text(tool.get("description"), f"{at}.description")
    parameters = tool.get("parameters")
    if parameters is not None and not isinstance(parameters, dict):
        raise bad_request(f"{at}.parameters", f"{at}.parameters must be a JSON Schema object")
    schema = ""
    if parameters is not None:
        schema = unicode_text(
            f"{at}.parameters", json.dumps(parameters, separators=(",", ":"), ensure_ascii=False)
        )
    return pb.ToolDeclaration(
        name=unicode_text(f"{at}.name", name),
        description=unicode_text(f"{at}.description", description),
        parameters_json=schema,
    )


def assistant_calls(message: Mapping[str, Any], at: str) -> list[pb.ToolCall]:
    """The `toolCalls` of an assistant message."""
    value = message.get("toolCalls")
    if value is None:
        return []
    if not isinstance(value, list):
        raise bad_request(f"{at}.toolCalls", f"{at}.toolCalls must be an array")
    calls = []
    for index, item in enumerate(value):
        where = f"{at}.toolCalls[{index}]"
        call = an_object(item, where)
        if call.get("type", "function") != "function":
            raise bad_request(f"{where}.type", f'{where}.type must be "function"')
        ident = required_text(call.get("id"), f"{where}.id")
        function = an_object(call.get("function"), f"{where}.function")
        name = required_text(function.get("name"), f"{where}.function.name")
        arguments = function.get("arguments", "")
        if not isinstance(arguments, str):
            raise bad_request(
                f"{where}.function.arguments", f"{where}.function.arguments must be a string"
            )
        calls.append(
            pb.ToolCall(
                id=unicode_text(f"{where}.id", ident),
                name=unicode_text(f"{where}.function.name", name),
                arguments=unicode_text(f"{where}.function.arguments", arguments),
            )
        )
    return calls


def answered_call(message: Mapping[str, Any], at: str) -> str:
    """The `toolCallId` of a `tool` message."""
    ident = required_text(message.get("toolCallId"), f"{at}.toolCallId")
    return unicode_text(f"{at}.toolCallId", ident)


def approvals(value: Any) -> tuple[pb.ToolApproval, ...]:
    """The `resume` entries of the input as decisions on the calls they name."""
    if value is None:
        return ()
    if not isinstance(value, list):
        raise bad_request("resume", "resume must be an array")
    return tuple(_approval(entry, f"resume[{i}]") for i, entry in enumerate(value))


def _approval(value: Any, at: str) -> pb.ToolApproval:
    entry = an_object(value, at)
    ident = required_text(entry.get("interruptId"), f"{at}.interruptId")
    call_id = unicode_text(f"{at}.interruptId", ident)
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
    approved, reason = tools.decision(payload, f"{at}.payload")
    return pb.ToolApproval(tool_call_id=call_id, approved=approved, reason=reason)


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
