"""Tools in OpenAI chat completions: the `tools` a request declares, its `tool_choice` and
`parallel_tool_calls`, the `tool_calls` of assistant messages and the `role: tool` messages
that answer them, read into the contract's shapes; and the calls of an answer written back
in OpenAI's shape. The service checks names, schemas and limits as for any caller; this
module only reads the wire and names the parameter at fault, never its value."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from agentskit.chat.v1 import chat_pb2 as pb
from agentskit_chat.transport.web.boundary.fronts import bad_request

CHOICES: Final = frozenset({"auto", "none", "required"})


@dataclass(frozen=True, slots=True)
class ToolChoice:
    """The declared tools of a request and how the model may use them."""

    tools: tuple[pb.ToolDeclaration, ...] = field(default=(), repr=False)
    choice: str = ""
    parallel: bool | None = None

    def apply(self, turn: pb.StreamTurnRequest) -> None:
        """Set these on the turn's request."""
        turn.tools.extend(self.tools)
        turn.tool_choice = self.choice
        if self.parallel is not None:
            turn.parallel_tool_calls = self.parallel


NO_TOOLS: Final = ToolChoice()


def tool_choice(body: Mapping[str, Any]) -> ToolChoice:
    """The `tools`, `tool_choice` and `parallel_tool_calls` of a request body."""
    value = body.get("tools")
    if value is None:
        value = []
    if not isinstance(value, list):
        raise bad_request("tools", "tools must be an array")
    tools = tuple(_declaration(tool, f"tools[{index}]") for index, tool in enumerate(value))
    choice = _choice(body.get("tool_choice"))
    if choice and choice != "none" and not tools:
        raise bad_request("tool_choice", "tool_choice needs tools")
    parallel = body.get("parallel_tool_calls")
    if parallel is not None and not isinstance(parallel, bool):
        raise bad_request("parallel_tool_calls", "parallel_tool_calls must be a boolean")
    return ToolChoice(tools, choice, parallel if tools else None)


def _declaration(tool: object, at: str) -> pb.ToolDeclaration:
    if not isinstance(tool, dict) or tool.get("type") != "function":
        raise bad_request(at, f'{at} must be an object of type "function"')
    function = tool.get("function")
    if not isinstance(function, dict):
        raise bad_request(f"{at}.function", f"{at}.function must be an object")
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


def _choice(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, str) and value in CHOICES:
        return value
    if isinstance(value, dict) and value.get("type") == "function":
        function = value.get("function")
        name = function.get("name") if isinstance(function, dict) else None
        if isinstance(name, str) and name:
            return name
    raise bad_request(
        "tool_choice", 'tool_choice must be "auto", "none", "required" or a named function'
    )


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
