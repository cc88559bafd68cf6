"""The AG-UI encodings: which one `Accept` asks for, and the binary framing (decoded by the
official decoder in test_agui_clients.py; here, the frame and a few fields by hand)."""

from __future__ import annotations

import struct
from typing import Any

import pytest
from google.protobuf import json_format, struct_pb2

from agentskit_chat.transport.web.agui._encoding import (
    PROTO_MEDIA_TYPE,
    proto_event,
    sse_event,
    wants_proto,
)


@pytest.mark.parametrize(
    ("accept", "proto"),
    [
        (None, False),
        ("", False),
        ("text/event-stream", False),
        ("*/*", False),
        ("application/*", False),
        (PROTO_MEDIA_TYPE, True),
        (f"{PROTO_MEDIA_TYPE};q=0.5, text/event-stream", False),
        (f"text/event-stream;q=0.4, {PROTO_MEDIA_TYPE}", True),
        (f"{PROTO_MEDIA_TYPE};q=0", False),
        (f"{PROTO_MEDIA_TYPE};q=nonsense", False),
        ("APPLICATION/VND.AG-UI.EVENT+PROTO", True),
    ],
)
def test_accept_chooses_the_encoding(accept: str | None, proto: bool) -> None:
    assert wants_proto(accept) is proto


def test_an_sse_event_is_one_data_line_with_its_id() -> None:
    event = {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m", "delta": "two\nlines"}
    assert sse_event(event, "3.1") == (
        b'id: 3.1\ndata: {"type":"TEXT_MESSAGE_CONTENT","messageId":"m","delta":"two\\nlines"}\n\n'
    )


def test_a_binary_event_is_length_prefixed_with_its_type() -> None:
    frame = proto_event({"type": "RUN_STARTED", "threadId": "t", "runId": "r"})
    (length,) = struct.unpack(">I", frame[:4])
    body = frame[4:]
    assert length == len(body)
    # Event.run_started (field 12) > RunStartedEvent: base_event {type: 11}, "t", "r".
    inner = bytes([0x0A, 0x02, 0x08, 11, 0x12, 0x01]) + b"t" + bytes([0x1A, 0x01]) + b"r"
    assert body == bytes([(12 << 3) | 2, len(inner)]) + inner


def test_every_json_value_encodes() -> None:
    value: dict[str, object] = {
        "a": [1, 2.5, True, False, None, "x", {"b": []}, -3, ""],
        "": "",
        "é": {"nested": {"deeper": ["ünïcode", 0]}},
    }
    frame = proto_event({"type": "CUSTOM", "name": "n", "value": value})
    assert struct.unpack(">I", frame[:4])[0] == len(frame) - 4
    # Event.custom (field 11) > CustomEvent: base_event (1), name (2), value (3).
    ((number, custom),) = _fields(frame[4:])
    assert number == 11
    fields = dict(_fields(custom))
    assert fields[2] == b"n"
    decoded = json_format.MessageToDict(struct_pb2.Value.FromString(fields[3]))
    assert _typed(decoded) == _typed(value)  # numbers are doubles; booleans stay booleans
    with pytest.raises(TypeError):
        proto_event({"type": "CUSTOM", "name": "n", "value": {1, 2}})


def _fields(data: bytes) -> list[tuple[int, bytes]]:
    """The length-delimited and varint fields of a protocol buffer message, in order (a
    varint's value as its bytes)."""
    found = []
    at = 0
    while at < len(data):
        key, at = _varint(data, at)
        number, wire = key >> 3, key & 7
        if wire == 2:
            size, at = _varint(data, at)
            found.append((number, data[at : at + size]))
            at += size
        else:
            assert wire == 0, wire
            start = at
            _, at = _varint(data, at)
            found.append((number, data[start:at]))
    return found


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if not byte & 0x80:
            return value, at


def _typed(value: Any) -> Any:
    """`value` with each scalar tagged by its JSON type (so `True` is not `1.0`)."""
    if isinstance(value, dict):
        return {key: _typed(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_typed(item) for item in value]
    if isinstance(value, bool):
        return ("boolean", value)
    if isinstance(value, int | float):
        return ("number", float(value))
    return (type(value).__name__, value)
