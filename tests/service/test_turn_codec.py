"""Turn events as stored batches: a completed turn keeps its model's finish reason, and a
batch written before the finish reason was kept still decodes (with none)."""

from __future__ import annotations

import json

from agentskit_chat.conversation import ConversationSnapshot, PendingCall, ResponseSealer, ToolCall
from agentskit_chat.service._turn_codec import BatchCodec
from agentskit_chat.service._types import (
    Completed,
    Delta,
    ToolDelta,
    ToolEnded,
    ToolStarted,
    TurnEvent,
    Usage,
)

SNAPSHOT = ConversationSnapshot("idle", ("start",), ("start",))


def test_a_completed_turn_keeps_its_finish_reason() -> None:
    codec = BatchCodec("s1", "t1")
    events: list[TurnEvent] = [
        Delta("cut"),
        Completed("a1", "cut", SNAPSHOT, 3, Usage(5, 2), "length"),
    ]
    assert codec.decode(0, codec.encode(0, events)) == events


def test_an_older_batch_without_a_finish_reason_decodes() -> None:
    older = [["c", "a1", "text", ["idle", ["start"], ["start"]], 3, [5, 2]]]
    body = b"J" + json.dumps(older).encode()
    (completed,) = BatchCodec("s1", "t1").decode(0, body)
    assert completed == Completed("a1", "text", SNAPSHOT, 3, Usage(5, 2))
    assert completed.finish_reason == ""


def tool_round() -> list[TurnEvent]:
    call = ToolCall("call-1", "weather", '{"city":"CANARY-codec"}')
    return [
        ToolStarted("call-1", "weather"),
        ToolDelta("call-1", '{"city":'),
        ToolDelta("call-1", '"CANARY-codec"}'),
        ToolEnded("call-1", call.arguments, "result"),
        Completed(
            "a1", "", SNAPSHOT, 3, None, "tool_calls", (call,), (PendingCall("call-1", "weather"),)
        ),
    ]


def test_tool_events_and_the_calls_an_answer_waits_on_round_trip() -> None:
    codec = BatchCodec("s1", "t1")
    assert codec.decode(0, codec.encode(0, tool_round())) == tool_round()


def test_a_client_held_batch_seals_tool_content() -> None:
    codec = BatchCodec("s1", "t1", ResponseSealer(b"codec-test-key-32-bytes-long!!!!"))
    body = codec.encode(0, tool_round())
    assert b"CANARY-codec" not in body
    assert b"weather" not in body
    assert codec.decode(0, body) == tool_round()
