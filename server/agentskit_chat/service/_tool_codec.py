"""A history message's tool data as the store keeps it: one JSON text beside its content.

`{"calls": [[id, name, arguments], ...]}` for an assistant message that called tools,
`{"call": id}` for a tool message; empty text for any other message. Like the content, it
is stored for server-held histories only.
"""

from __future__ import annotations

import json

from agentskit_chat.conversation import Message, ToolCall

from ._errors import Reason, ServiceError


def encode_tools(message: Message) -> str:
    """The stored tool data of `message`; empty when it has none."""
    if message.tool_calls:
        calls = [[c.id, c.name, c.arguments] for c in message.tool_calls]
        return json.dumps({"calls": calls}, separators=(",", ":"), ensure_ascii=False)
    if message.tool_call_id is not None:
        return json.dumps({"call": message.tool_call_id}, separators=(",", ":"))
    return ""


def decode_tools(text: str) -> tuple[tuple[ToolCall, ...], str | None]:
    """The tool calls and answered call id stored as `text`; SESSION_CORRUPT when unusable."""
    try:
        value = json.loads(text)
        if isinstance(value, dict) and set(value) == {"calls"}:
            calls = tuple(_call(item) for item in value["calls"])
            if calls:
                return calls, None
        elif isinstance(value, dict) and set(value) == {"call"} and isinstance(value["call"], str):
            return (), value["call"]
    except (ValueError, TypeError):
        pass
    raise ServiceError(Reason.SESSION_CORRUPT, "a stored message holds unreadable tool data")


def _call(item: object) -> ToolCall:
    if isinstance(item, list) and len(item) == 3 and all(isinstance(p, str) for p in item):
        return ToolCall(item[0], item[1], item[2])
    raise TypeError("not a stored tool call")
