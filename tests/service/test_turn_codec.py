"""Turn events as stored batches: a completed turn keeps its model's finish reason, and a
batch written before the finish reason was kept still decodes (with none); every event keeps
the time it was published."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from agentskit_chat.conversation import ConversationSnapshot, PendingCall, ResponseSealer, ToolCall
from agentskit_chat.service._turn_codec import BatchCodec
from agentskit_chat.service._types import (
    Completed,
    Decided,
    Delta,
    Failed,
    Started,
    ToolDelta,
    ToolEnded,
    ToolRan,
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


def every_kind() -> list[TurnEvent]:
    return [
        Started("submit", "u1", False, "a1", time_ns=1),
        Decided("agentic", None, "idle", "idle", False, time_ns=2),
        Delta("text", time_ns=3),
        *(replace(event, time_ns=4 + n) for n, event in enumerate(tool_round()[:-1])),
        replace(tool_round()[-1], time_ns=9),
        ToolStarted("c9", "lookup_order", "server", time_ns=10),
        ToolRan("c9", "order 7: shipped", None, "a1.0.0", time_ns=11),
        ToolRan("c9", "The call timed out.", "timeout", "a1.0.1", time_ns=12),
        Failed("cancelled", "The turn was cancelled.", True, None, time_ns=13),
    ]


def test_every_event_keeps_its_publication_time() -> None:
    for codec in (
        BatchCodec("s1", "t1"),
        BatchCodec("s1", "t1", ResponseSealer(b"codec-test-key-32-bytes-long!!!!")),
    ):
        decoded = codec.decode(1, codec.encode(1, every_kind()))
        assert [event.time_ns for event in decoded] == [e.time_ns for e in every_kind()]


def test_the_time_follows_every_field_an_earlier_reader_reads() -> None:
    body = BatchCodec("s1", "t1").encode(1, every_kind())
    items = json.loads(body[1:])
    # Each array: its kind, the fields an earlier server reads, then the time; a tool
    # call's start has its wait after the time (where earlier servers' logs end).
    lengths = {"s": 5, "k": 6, "d": 2, "ts": 3, "td": 3, "te": 4, "tr": 5, "c": 9, "f": 5}
    for item, event in zip(items, every_kind(), strict=True):
        at = lengths[item[0]]
        assert item[at] == event.time_ns
        assert len(item) == at + (2 if item[0] == "ts" else 1)


def test_server_tool_events_read_back_and_a_start_without_its_wait_waits_for_a_result() -> None:
    codec = BatchCodec("s1", "t1")
    assert codec.decode(1, codec.encode(1, every_kind())) == every_kind()
    older = [["ts", "c1", "weather", 5]]
    (decoded,) = codec.decode(1, b"J" + json.dumps(older).encode())
    assert decoded == ToolStarted("c1", "weather", "result", time_ns=5)


def test_an_event_stored_without_a_time_decodes_with_none() -> None:
    older = [["d", "text"], ["f", "cancelled", "The turn was cancelled.", True, None]]
    decoded = BatchCodec("s1", "t1").decode(1, b"J" + json.dumps(older).encode())
    assert [event.time_ns for event in decoded] == [0, 0]


def test_a_time_that_is_not_a_count_of_nanoseconds_is_refused() -> None:
    for time_ns in (-1, "1", 1.5, None):
        body = b"J" + json.dumps([["d", "text", time_ns]]).encode()
        with pytest.raises(ValueError, match="time"):
            BatchCodec("s1", "t1").decode(1, body)
