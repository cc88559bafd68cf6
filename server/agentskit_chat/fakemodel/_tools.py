"""Tool calls of the fake model: what a request offers, the calls a ToolCalls answer makes
and their stream deltas, and the answer to a request that carries tool results."""

from __future__ import annotations

import json
from collections.abc import Mapping
from itertools import count, zip_longest
from typing import Any, Final

from ._scripts import Reply, ToolCalls, split_text

EXAMPLES: Final[Mapping[str, Any]] = {
    "string": "example",
    "integer": 1,
    "number": 1,
    "boolean": True,
    "array": [],
    "null": None,
}
"""The example value of each JSON Schema type (objects get their properties' examples)."""
MAX_DEPTH: Final = 8
"""Objects nested deeper than this get an empty object as their example."""
_call_ids: Final = count(1)


def messages_of(body: object) -> list[Any]:
    """The request's `messages`, or [] when it has none."""
    messages = body.get("messages") if isinstance(body, dict) else None
    return messages if isinstance(messages, list) else []


def last_role(body: object) -> str | None:
    """The role of the request's last message."""
    messages = messages_of(body)
    last = messages[-1] if messages else None
    role = last.get("role") if isinstance(last, dict) else None
    return role if isinstance(role, str) else None


def declared_tools(body: object) -> list[dict[str, Any]]:
    """The function tools the request declares, in order (malformed entries skipped)."""
    tools = body.get("tools") if isinstance(body, dict) else None
    declared: list[dict[str, Any]] = []
    for tool in tools if isinstance(tools, list) else []:
        function = tool.get("function") if isinstance(tool, dict) else None
        if isinstance(function, dict) and isinstance(function.get("name"), str):
            declared.append(function)
    return declared


def offers_tools(body: object) -> bool:
    """Whether the request declares tools and lets the model call them (`tool_choice` is
    not `none`)."""
    choice = body.get("tool_choice") if isinstance(body, dict) else None
    return bool(declared_tools(body)) and choice != "none"


def resolve_calls(script: ToolCalls, body: object) -> list[tuple[str, str, str]]:
    """(call id, name, arguments) of each call `script` makes in answer to `body`."""
    if script.calls:
        return [(c.id or _fresh_id(), c.name, c.arguments) for c in script.calls]
    if not offers_tools(body):
        return []
    assert isinstance(body, dict)
    tools = declared_tools(body)
    if script.only:
        tools = [t for t in tools if t["name"] in script.only]
    choice = body.get("tool_choice")
    if isinstance(choice, dict):
        function = choice.get("function")
        named = function.get("name") if isinstance(function, dict) else None
        tools = [t for t in tools if t["name"] == named]
    if body.get("parallel_tool_calls") is False:
        tools = tools[:1]
    return [(_fresh_id(), t["name"], example_arguments(t.get("parameters"))) for t in tools]


def _fresh_id() -> str:
    return f"call_fake_{next(_call_ids)}"


def example_arguments(schema: object) -> str:
    """Example arguments (JSON text) for a tool whose arguments' schema is `schema`: an
    object, empty when the schema names no properties."""
    value = example_value(schema)
    return json.dumps(value if isinstance(value, dict) else {})


def example_value(schema: object, depth: int = 0) -> Any:
    """A value that fits the simple JSON Schema `schema`: its `const`, its first `enum`
    value, or an example of its type (an object gets an example of every property)."""
    if not isinstance(schema, dict):
        return EXAMPLES["string"]
    if "const" in schema:
        return schema["const"]
    enum = schema.get("enum")
    if isinstance(enum, list) and enum:
        return enum[0]
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind == "object" or (kind is None and "properties" in schema):
        properties = schema.get("properties")
        if depth >= MAX_DEPTH or not isinstance(properties, dict):
            return {}
        return {str(k): example_value(v, depth + 1) for k, v in properties.items()}
    return EXAMPLES.get(kind, EXAMPLES["string"]) if isinstance(kind, str) else "example"


def call_deltas(
    calls: list[tuple[str, str, str]], pieces: int, *, interleave: bool
) -> list[dict[str, Any]]:
    """The `tool_calls` items that stream `calls`, one delta each."""
    per_call: list[list[dict[str, Any]]] = []
    for index, (call_id, name, arguments) in enumerate(calls):
        head = {
            "index": index,
            "id": call_id,
            "type": "function",
            "function": {"name": name, "arguments": ""},
        }
        parts = split_text(arguments, min(pieces, len(arguments))) if arguments else ()
        per_call.append([head, *({"index": index, "function": {"arguments": p}} for p in parts)])
    if not interleave:
        return [delta for deltas in per_call for delta in deltas]
    return [d for turn in zip_longest(*per_call) for d in turn if d is not None]


def tool_results_reply(body: object) -> Reply:
    """The answer to a request ending with tool results: a sentence naming how many it
    got, and the calls they answer."""
    ids: list[str] = []
    for message in reversed(messages_of(body)):
        if not isinstance(message, dict) or message.get("role") != "tool":
            break
        ids.append(str(message.get("tool_call_id") or "?"))
    ids.reverse()
    plural = "" if len(ids) == 1 else "s"
    text = f"The fake model got {len(ids)} tool result{plural} ({', '.join(ids)})."
    return Reply(chunks=split_text(text, min(4, len(text.split(" ")))))
