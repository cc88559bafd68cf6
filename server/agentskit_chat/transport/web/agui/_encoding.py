"""AG-UI events on the wire: server-sent events, or the protocol's binary encoding.

An event is the JSON object the AG-UI protocol defines (`{"type": "RUN_STARTED",
"threadId": ..., ...}`). Over SSE each is one `data:` line of compact JSON, with an `id:`
line (this server's resume extension, see `_front`). A client whose `Accept` prefers
`application/vnd.ag-ui.event+proto` gets the binary encoding instead: each event is the
AG-UI protocol buffer `ag_ui.Event` (the oneof of every event type, each carrying a
`BaseEvent` with its type), prefixed by its length as a 4-byte big-endian integer, as
`@ag-ui/encoder` frames it. The binary encoding carries no event ids, so resuming is an SSE
feature. The protocol buffers are written here by hand, for the few messages this server
sends, with the field numbers of the `@ag-ui/proto` schema (1.0).
"""

from __future__ import annotations

import json
import struct
from collections.abc import Mapping, Sequence
from typing import Any, Final

from agentskit_chat.transport.web.boundary.fronts import sse

PROTO_MEDIA_TYPE: Final = "application/vnd.ag-ui.event+proto"
SSE_MEDIA_TYPE: Final = "text/event-stream"

EVENT_TYPES: Final[Mapping[str, int]] = {
    "TEXT_MESSAGE_START": 0,
    "TEXT_MESSAGE_CONTENT": 1,
    "TEXT_MESSAGE_END": 2,
    "TOOL_CALL_START": 3,
    "TOOL_CALL_ARGS": 4,
    "TOOL_CALL_END": 5,
    "STATE_SNAPSHOT": 6,
    "STATE_DELTA": 7,
    "MESSAGES_SNAPSHOT": 8,
    "CUSTOM": 10,
    "RUN_STARTED": 11,
    "RUN_FINISHED": 12,
    "RUN_ERROR": 13,
}
"""The `EventType` enum value of each event this server sends."""
_ENVELOPE_FIELD: Final[Mapping[str, int]] = {
    "TEXT_MESSAGE_START": 1,
    "TEXT_MESSAGE_CONTENT": 2,
    "TEXT_MESSAGE_END": 3,
    "TOOL_CALL_START": 4,
    "TOOL_CALL_ARGS": 5,
    "TOOL_CALL_END": 6,
    "STATE_SNAPSHOT": 7,
    "STATE_DELTA": 8,
    "MESSAGES_SNAPSHOT": 9,
    "CUSTOM": 11,
    "RUN_STARTED": 12,
    "RUN_FINISHED": 13,
    "RUN_ERROR": 14,
}
"""The field of `ag_ui.Event` (a oneof) that carries each event type."""
_STRING_FIELDS: Final[Mapping[str, Sequence[tuple[str, int]]]] = {
    "TEXT_MESSAGE_START": (("messageId", 2), ("role", 3)),
    "TEXT_MESSAGE_CONTENT": (("messageId", 2), ("delta", 3)),
    "TEXT_MESSAGE_END": (("messageId", 2),),
    "TOOL_CALL_START": (("toolCallId", 2), ("toolCallName", 3), ("parentMessageId", 4)),
    "TOOL_CALL_ARGS": (("toolCallId", 2), ("delta", 3)),
    "TOOL_CALL_END": (("toolCallId", 2),),
    "STATE_SNAPSHOT": (),
    "STATE_DELTA": (),
    "MESSAGES_SNAPSHOT": (),
    "CUSTOM": (("name", 2),),
    "RUN_STARTED": (("threadId", 2), ("runId", 3)),
    "RUN_FINISHED": (("threadId", 2), ("runId", 3)),
    "RUN_ERROR": (("code", 2), ("message", 3)),
}
"""The string fields of each event message, by JSON name."""
_VALUE_FIELDS: Final[Mapping[str, tuple[str, int]]] = {
    "STATE_SNAPSHOT": ("snapshot", 2),
    "CUSTOM": ("value", 3),
    "RUN_FINISHED": ("result", 4),
}
"""The `google.protobuf.Value` field of each event message that has one."""
_PATCH_OPS: Final[Mapping[str, int]] = {
    "add": 0,
    "remove": 1,
    "replace": 2,
    "move": 3,
    "copy": 4,
    "test": 5,
}


def wants_proto(accept: str | None) -> bool:
    """Whether `Accept` asks for the binary encoding: it names the AG-UI media type itself
    (wildcards such as `application/*` or `*/*` do not choose it) with a quality above zero,
    and no higher for `text/event-stream`."""
    if not accept:
        return False
    proto = sse = 0.0
    for item in accept.split(","):
        media, _, params = item.strip().partition(";")
        media = media.strip().lower()
        quality = 1.0
        for param in params.split(";"):
            key, _, value = param.strip().partition("=")
            if key.strip().lower() == "q":
                try:
                    quality = float(value)
                except ValueError:
                    quality = 0.0
        if media == PROTO_MEDIA_TYPE:
            proto = max(proto, quality)
        elif media == SSE_MEDIA_TYPE:
            sse = max(sse, quality)
    return proto > 0 and proto >= sse


def sse_event(event: Mapping[str, Any], event_id: str | None) -> bytes:
    """One event as a server-sent event with its id."""
    return sse(json.dumps(event, separators=(",", ":"), ensure_ascii=False), event_id=event_id)


def proto_event(event: Mapping[str, Any]) -> bytes:
    """One event in the binary encoding: its length (4 bytes, big-endian), then the
    `ag_ui.Event` protocol buffer."""
    kind = str(event["type"])
    body = bytearray(_message(1, _varint_field(1, EVENT_TYPES[kind])))
    for name, number in _STRING_FIELDS[kind]:
        value = event.get(name)
        if value:
            body += _string(number, str(value))
    value_field = _VALUE_FIELDS.get(kind)
    if value_field is not None and value_field[0] in event:
        body += _message(value_field[1], _value(event[value_field[0]]))
    if kind == "STATE_DELTA":
        for operation in event["delta"]:
            body += _message(2, _patch(operation))
    elif kind == "MESSAGES_SNAPSHOT":
        for message in event["messages"]:
            body += _message(2, _chat_message(message))
    elif kind == "RUN_FINISHED" and "outcome" in event:
        body += _outcome(event["outcome"])
    envelope = _message(_ENVELOPE_FIELD[kind], bytes(body))
    return struct.pack(">I", len(envelope)) + envelope


def _patch(operation: Mapping[str, Any]) -> bytes:
    body = bytearray()
    op = _PATCH_OPS[str(operation["op"])]
    if op:
        body += _varint_field(1, op)
    body += _string(2, str(operation["path"]))
    if "from" in operation:
        body += _string(3, str(operation["from"]))
    if "value" in operation:
        body += _message(4, _value(operation["value"]))
    return bytes(body)


def _outcome(outcome: Mapping[str, Any]) -> bytes:
    """`RunFinishedEvent`'s outcome (5, its type), interrupts (6), pendingToolCallIds (8)."""
    body = bytearray(_string(5, str(outcome["type"])))
    for interrupt in outcome.get("interrupts", ()):
        entry = bytearray()
        for name, number in (("id", 1), ("reason", 2), ("message", 3), ("toolCallId", 4)):
            if name in interrupt:
                entry += _string(number, str(interrupt[name]), always=True)
        if "responseSchema" in interrupt:
            entry += _message(5, _value(interrupt["responseSchema"]))
        body += _message(6, bytes(entry))
    for call_id in outcome.get("pendingToolCallIds", ()):
        body += _string(8, str(call_id), always=True)
    return bytes(body)


def _chat_message(message: Mapping[str, Any]) -> bytes:
    body = bytearray(_string(1, str(message["id"])) + _string(2, str(message["role"])))
    if "content" in message:
        body += _string(3, str(message["content"]), always=True)
    for call in message.get("toolCalls", ()):
        function = call["function"]
        named = _string(1, str(function["name"])) + _string(2, str(function["arguments"]))
        body += _message(
            5, _string(1, str(call["id"])) + _string(2, "function") + _message(3, named)
        )
    if "toolCallId" in message:
        body += _string(6, str(message["toolCallId"]), always=True)
    return bytes(body)


def _value(value: Any) -> bytes:
    """A `google.protobuf.Value` of a JSON value."""
    if value is None:
        return _varint_field(1, 0)
    if isinstance(value, bool):
        return _varint_field(4, int(value))
    if isinstance(value, int | float):
        return bytes([(2 << 3) | 1]) + struct.pack("<d", float(value))
    if isinstance(value, str):
        return _string(3, value, always=True)
    if isinstance(value, Mapping):
        entries = bytearray()
        for key, item in value.items():
            entry = _string(1, str(key)) + _message(2, _value(item))
            entries += _message(1, entry)
        return _message(5, bytes(entries))
    if isinstance(value, list | tuple):
        items = b"".join(_message(1, _value(item)) for item in value)
        return _message(6, items)
    raise TypeError(f"not a JSON value: {type(value).__name__}")


def _varint(number: int) -> bytes:
    out = bytearray()
    while True:
        bits = number & 0x7F
        number >>= 7
        if number:
            out.append(bits | 0x80)
        else:
            out.append(bits)
            return bytes(out)


def _varint_field(number: int, value: int) -> bytes:
    return _varint(number << 3) + _varint(value)


def _message(number: int, body: bytes) -> bytes:
    return _varint((number << 3) | 2) + _varint(len(body)) + body


def _string(number: int, value: str, *, always: bool = False) -> bytes:
    if not value and not always:
        return b""
    return _message(number, value.encode())
