"""Tools in OpenAI chat completions: the `tools` a request declares, its `tool_choice` and
`parallel_tool_calls`, the `tool_calls` of assistant messages and the `role: tool` messages
that answer them, read into the contract's shapes; and the calls of an answer written back
in OpenAI's shape. The service checks names, schemas and limits as for any caller; this
module only reads the wire and names the parameter at fault, never its value."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from agentskit.chat.v1 import chat_pb2 as pb
from agentskit_chat.transport.web.boundary.fields import an_object
from agentskit_chat.transport.web.boundary.fronts import bad_request
from agentskit_chat.transport.web.boundary.tools import ToolFields, TurnTools, turn_tools

FIELDS: Final = ToolFields("tool_choice", "parallel_tool_calls", named_choice="a named function")


def tool_choice(body: Mapping[str, Any]) -> TurnTools:
    """The `tools`, `tool_choice` and `parallel_tool_calls` of a request body."""
    return turn_tools(body, FIELDS, _declaration, _named_function)


def _declaration(tool: object, at: str) -> pb.ToolDeclaration:
    if not isinstance(tool, dict) or tool.get("type") != "function":
        raise bad_request(at, f'{at} must be an object of type "function"')
    function = an_object(tool.get("function"), f"{at}.function")
    name = function.get("name")
    if not isinstance(name, str) or not name:
        raise bad_request(f"{at}.function.name", f"{at}.function.name must be a string")
    description = function.get("description", "")
    if not isinstance(description, str):
        description = ""
    parameters = function.get("parameters")
    if parameters is not None and not isinstance(parameters, dict):
        raise bad_request(
            f"{at}.function.parameters", f"{at}.function.parameters must be an object"
        )
    schema = "" if parameters is None else json.dumps(parameters, separators=(",", ":"))
    return pb.ToolDeclaration(name=name, description=description, parameters_json=schema)


def _named_function(choice: dict[str, Any]) -> str | None:
    function = choice.get("function")
    name = function.get("name") if isinstance(function, dict) else None
    if choice.get("type") != "function" or not isinstance(name, str) or not name:
        return None
    return name


def assistant_calls(message: Mapping[str, Any], at: str) -> tuple[pb.ToolCall, ...]:
    """The `tool_calls` of an assistant message."""
    value = message.get("tool_calls")
    if value is None:
        return ()
    if not isinstance(value, list):
        raise bad_request(f"{at}.tool_calls", f"{at}.tool_calls must be an array")
    calls = []
    for index, call in enumerate(value):
        where = f"{at}.tool_calls[{index}]"
        function = call.get("function") if isinstance(call, dict) else None
        ident = call.get("id") if isinstance(call, dict) else None
        if not isinstance(ident, str) or not ident or not isinstance(function, dict):
            raise bad_request(where, f"{where} must be a function call with an id")
        name, arguments = function.get("name"), function.get("arguments", "")
        if not isinstance(name, str) or not isinstance(arguments, str):
            raise bad_request(f"{where}.function", f"{where}.function needs a name and arguments")
        calls.append(pb.ToolCall(id=ident, name=name, arguments=arguments))
    return tuple(calls)


def answered_call(message: Mapping[str, Any], at: str) -> str:
    """The `tool_call_id` of a `role: tool` message."""
    ident = message.get("tool_call_id")
    if not isinstance(ident, str) or not ident:
        raise bad_request(f"{at}.tool_call_id", f"{at}.tool_call_id must be a string")
    return ident


def calls_object(calls: Mapping[str, tuple[str, str]]) -> list[dict[str, Any]]:
    """A completed answer's `tool_calls`: id -> (name, arguments), in call order."""
    return [
        {"id": ident, "type": "function", "function": {"name": name, "arguments": arguments}}
        for ident, (name, arguments) in calls.items()
    ]


def call_started(index: int, ident: str, name: str) -> dict[str, Any]:
    """The chunk delta that opens a streamed call."""
    return {
        "tool_calls": [
            {
                "index": index,
                "id": ident,
                "type": "function",
                "function": {"name": name, "arguments": ""},
            }
        ]
    }


def call_arguments(index: int, piece: str) -> dict[str, Any]:
    """The chunk delta of a piece of a streamed call's arguments."""
    return {"tool_calls": [{"index": index, "function": {"arguments": piece}}]}
