"""Rule 13: the session envelope holds metadata only and is decoded strictly or not at all."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import replace
from typing import Any

import pytest

from agentskit_chat.conversation import (
    MAX_RECENT_TURNS,
    ChatDefinition,
    ChatSession,
    DefinitionMismatchError,
    ForeignRecordError,
    Lease,
    MalformedRecordError,
    PendingCall,
    RecordEncoder,
    ReplayError,
    RouteOutcome,
    SessionRecord,
    SessionRecordError,
    TerminalTurn,
    UnsupportedVersionError,
    command_route,
    create_chat_session,
    decode_session_record,
    define_chat,
    encode_session_record,
    load_definition,
)

from .conftest import EXAMPLES, KEY, History

CANARY = "CANARY-e41c"


def played(session: ChatSession, history: History) -> SessionRecord:
    session.dispatch_sync(history.user("/start"))
    session.dispatch_sync(history.user(f"chit chat {CANARY}"))
    session.dispatch_sync(history.user("/name Ada"))
    record = SessionRecord(
        session_id="s1",
        definition_id=session.definition.id,
        revision=session.definition.revision,
        conversation=session.state,
        cursor=7,
        lease=Lease(turn_id="t9", holder="replica-a", expires_at_ms=1_700_000_000_000),
    )
    return record.with_turn(
        TerminalTurn(
            turn_id="t8",
            operation="submit",
            outcome="completed",
            finished_at_ms=1_699_999_999_000,
            kind="deterministic",
            route_id="finish",
            user_message_id="u3",
            assistant_message_id="a3",
            from_state="collecting",
            to_state="complete",
            replayed=True,
        )
    )


def body(record: SessionRecord) -> dict[str, Any]:
    result: dict[str, Any] = json.loads(encode_session_record(record))
    return result


def decode(data: Any, definition: ChatDefinition, session_id: str = "s1") -> SessionRecord:
    raw = data if isinstance(data, bytes | str) else json.dumps(data)
    return decode_session_record(raw, definition=definition, session_id=session_id)


def test_round_trip_preserves_everything(session: ChatSession, history: History) -> None:
    record = played(session, history)
    decoded = decode(encode_session_record(record), session.definition)
    assert decoded == record
    assert decoded.state == "complete"
    assert list(decoded.conversation.decisions.values()) == list(
        record.conversation.decisions.values()
    )


def test_record_holds_no_message_text(session: ChatSession, history: History) -> None:
    encoded = encode_session_record(played(session, history))
    assert CANARY.encode() not in encoded
    assert b"/name Ada" not in encoded
    assert b"Ada" not in encoded  # template responses are re-rendered on replay, not stored
    assert b"What is your name" not in encoded
    assert set(json.loads(encoded)) == {
        "format",
        "version",
        "session_id",
        "definition",
        "cursor",
        "state",
        "decisions",
        "lease",
        "recent_turns",
        "messages",
    }


def test_resumed_session_replays_and_continues(session: ChatSession, history: History) -> None:
    record = played(session, history)
    decoded = decode(encode_session_record(record), session.definition)
    resumed = ChatSession(
        session.definition, session_id="s1", digest_key=KEY, state=decoded.conversation
    )
    outcome = resumed.dispatch_sync(history.messages)  # a retry after resume
    assert isinstance(outcome, RouteOutcome)
    assert outcome.replayed
    assert outcome.response == "Welcome, Ada."
    assert resumed.snapshot().state == "complete"


def callable_chat() -> ChatDefinition:
    return define_chat(
        id="calls",
        conversation={
            "initial": "a",
            "states": {"a": {"on": {"go": "b"}}, "b": {}},
            "routes": [
                command_route(id="go", command="/go", event="go", response=lambda t, c: "made")
            ],
        },
    )


def test_callable_responses_are_stored_and_replayed_after_resume(history: History) -> None:
    definition = callable_chat()
    session = ChatSession(definition, session_id="s1", digest_key=KEY)
    messages = history.user("/go")
    session.dispatch_sync(messages)
    record = SessionRecord.new(definition, "s1")
    data = encode_session_record(dataclasses.replace(record, conversation=session.state))
    assert json.loads(data)["decisions"][0]["response"] == "made"
    decoded = decode(data, definition)
    resumed = ChatSession(definition, session_id="s1", digest_key=KEY, state=decoded.conversation)
    outcome = resumed.dispatch_sync(messages)
    assert isinstance(outcome, RouteOutcome)
    assert (outcome.replayed, outcome.response) == (True, "made")


def test_response_storage_must_fit_the_route(session: ChatSession, history: History) -> None:
    data = body(played(session, history))
    data["decisions"][0]["response"] = "What is your name?"
    with pytest.raises(ReplayError):
        decode(data, session.definition)
    definition = callable_chat()
    calls = ChatSession(definition, session_id="s1", digest_key=KEY)
    calls.dispatch_sync(history.user("/go"))
    record = dataclasses.replace(SessionRecord.new(definition, "s1"), conversation=calls.state)
    stored = body(record)
    stored["decisions"][0]["response"] = None
    with pytest.raises(ReplayError):
        decode(stored, definition)


def test_recent_turns_are_bounded() -> None:
    definition = load_definition(EXAMPLES / "support.yaml")
    record = SessionRecord.new(definition, "s1")
    for index in range(MAX_RECENT_TURNS + 10):
        record = record.with_turn(TerminalTurn(f"t{index}", "submit", "completed", index))
    assert len(record.recent_turns) == MAX_RECENT_TURNS
    assert record.recent_turns[0].turn_id == "t10"
    assert record.find_turn("t73") is not None
    assert record.find_turn("t0") is None


# Strict decoding: each problem is a typed error, and nothing is returned.


def test_foreign_session_is_rejected(session: ChatSession, history: History) -> None:
    data = encode_session_record(played(session, history))
    with pytest.raises(ForeignRecordError):
        decode(data, session.definition, session_id="other")


def test_other_definition_or_revision_is_rejected(session: ChatSession, history: History) -> None:
    data = encode_session_record(played(session, history))
    newer = dataclasses.replace(session.definition, revision=2)
    with pytest.raises(DefinitionMismatchError):
        decode(data, newer)
    other = define_chat(id="other", conversation={"initial": "a", "states": {"a": {}}})
    with pytest.raises(DefinitionMismatchError):
        decode(data, other)


@pytest.mark.parametrize(
    "change",
    [
        lambda b: b.update(version=8),
        lambda b: b.update(version=True),
        lambda b: b.update(format="something.else"),
        lambda b: b.pop("format"),
    ],
    ids=["version-8", "version-bool", "format", "no-format"],
)
def test_unknown_format_or_version_is_rejected(
    change: Any, session: ChatSession, history: History
) -> None:
    data = body(played(session, history))
    change(data)
    with pytest.raises(UnsupportedVersionError):
        decode(data, session.definition)


MALFORMED = [
    ("unknown key", lambda b: b.update(extra=1)),
    ("missing key", lambda b: b.pop("cursor")),
    ("negative cursor", lambda b: b.update(cursor=-1)),
    ("text cursor", lambda b: b.update(cursor="7")),
    ("state not text", lambda b: b.update(state=3)),
    ("decisions not a list", lambda b: b.update(decisions={})),
    ("decision unknown key", lambda b: b["decisions"][0].update(text="/start")),
    ("decision missing key", lambda b: b["decisions"][0].pop("input_digest")),
    ("decision agentic kind", lambda b: b["decisions"][0].update(kind="agentic")),
    ("lease not an object", lambda b: b.update(lease="t9")),
    ("lease missing key", lambda b: b["lease"].pop("holder")),
    ("turn bad operation", lambda b: b["recent_turns"][0].update(operation="explode")),
    ("turn bad outcome", lambda b: b["recent_turns"][0].update(outcome="maybe")),
    ("turn bad kind", lambda b: b["recent_turns"][0].update(kind="psychic")),
    ("turn replayed not a bool", lambda b: b["recent_turns"][0].update(replayed=1)),
    ("too many turns", lambda b: b.update(recent_turns=b["recent_turns"] * (MAX_RECENT_TURNS + 1))),
    ("root not an object", lambda b: b.clear() or b.update({"format": None})),
]


@pytest.mark.parametrize("change", [m[1] for m in MALFORMED], ids=[m[0] for m in MALFORMED])
def test_malformed_records_are_rejected(
    change: Any, session: ChatSession, history: History
) -> None:
    data = body(played(session, history))
    change(data)
    with pytest.raises((MalformedRecordError, UnsupportedVersionError)):
        decode(data, session.definition)


@pytest.mark.parametrize("raw", [b"", b"{", b"[]", b"\xff", b'{"a":1,"a":2}'])
def test_non_json_or_non_object_is_malformed(raw: bytes, support: ChatDefinition) -> None:
    with pytest.raises(SessionRecordError) as caught:
        decode(raw, support)
    assert isinstance(caught.value, MalformedRecordError | UnsupportedVersionError)


REPLAY = [
    ("state differs", lambda b: b.update(state="idle")),
    ("unknown route", lambda b: b["decisions"][0].update(route_id="teleport")),
    ("event of another route", lambda b: b["decisions"][0].update(event="finish")),
    ("wrong from-state", lambda b: b["decisions"][1].update(from_state="idle")),
    ("wrong to-state", lambda b: b["decisions"][0].update(to_state="complete")),
    ("out of order", lambda b: b["decisions"].reverse()),
    ("another route's id", lambda b: b["decisions"][1].update(route_id="start")),
    ("another kind", lambda b: b["decisions"][0].update(kind="fallback")),
    (
        "repeated message",
        lambda b: b["decisions"][1].update(message_id=b["decisions"][0]["message_id"]),
    ),
]


@pytest.mark.parametrize("change", [r[1] for r in REPLAY], ids=[r[0] for r in REPLAY])
def test_decisions_that_do_not_replay_are_rejected(
    change: Any, session: ChatSession, history: History
) -> None:
    data = body(played(session, history))
    change(data)
    with pytest.raises(ReplayError):
        decode(data, session.definition)


def test_errors_do_not_echo_record_content(session: ChatSession, history: History) -> None:
    data = body(played(session, history))
    data["decisions"][0]["response"] = 12
    data["decisions"][0]["route_id"] = CANARY
    with pytest.raises(SessionRecordError) as caught:
        decode(data, session.definition)
    assert CANARY not in str(caught.value)


def test_unknown_keys_are_not_echoed(session: ChatSession, history: History) -> None:
    data = body(played(session, history))
    data[CANARY] = 1
    with pytest.raises(MalformedRecordError) as caught:
        decode(data, session.definition)
    assert CANARY not in str(caught.value)


def test_encoding_refuses_a_state_of_another_session(
    session: ChatSession, history: History
) -> None:
    record = dataclasses.replace(played(session, history), session_id="other")
    with pytest.raises(ValueError, match="another session"):
        encode_session_record(record)


def test_error_codes_are_stable() -> None:
    assert {
        cls.code
        for cls in (
            MalformedRecordError,
            UnsupportedVersionError,
            ForeignRecordError,
            DefinitionMismatchError,
            ReplayError,
        )
    } == {
        "record_malformed",
        "record_version",
        "record_foreign",
        "definition_mismatch",
        "record_replay",
    }


def test_the_incremental_encoder_writes_what_a_fresh_encoding_writes(history: History) -> None:
    definition = load_definition(EXAMPLES / "support.yaml")
    session = create_chat_session(definition, session_id="s1", digest_key=KEY)
    encoder = RecordEncoder()
    record = SessionRecord.new(session.definition, "s1")
    for turns, text in enumerate(["/start", "/name Ada", "hello", "/start", "/name Bo"] * 20, 1):
        session.dispatch_sync(history.user(text))
        record = record.evolve(conversation=session.state, cursor=turns).with_turn(
            TerminalTurn(f"t{turns}", "submit", "completed", turns)
        )
        assert encoder.encode(record) == encode_session_record(record)
    assert len(record.recent_turns) == MAX_RECENT_TURNS
    edited = record.evolve(
        conversation=session.state, recent_turns=record.recent_turns[::2], lease=None
    )
    assert encoder.encode(edited) == encode_session_record(edited)


def test_turn_timing_failure_and_usage_round_trip(session: ChatSession, history: History) -> None:
    failed = TerminalTurn(
        turn_id="t10",
        operation="submit",
        outcome="failed",
        finished_at_ms=1_700_000_000_500,
        started_at_ms=1_700_000_000_000,
        error_code="model_server_error",
        error_message="The model server failed.",
        retryable=True,
    )
    answered = TerminalTurn(
        turn_id="t11",
        operation="submit",
        outcome="completed",
        finished_at_ms=1_700_000_001_000,
        started_at_ms=1_700_000_000_900,
        kind="agentic",
        input_tokens=12,
        output_tokens=7,
    )
    lease = Lease("t12", "replica-a", 1_700_000_075_000, "retry", 1_700_000_000_000, "u1")
    record = played(session, history).with_turn(failed).with_turn(answered).evolve(lease=lease)
    decoded = decode(encode_session_record(record), session.definition)
    assert decoded.recent_turns[-2:] == (failed, answered)
    assert decoded.lease == lease


def test_version_1_records_still_read(session: ChatSession, history: History) -> None:
    data = body(played(session, history))
    data["version"] = 1
    del data["messages"]
    for key in ("operation", "started_at_ms", "user_message_id"):
        del data["lease"][key]
    for key in (
        "started_at_ms",
        "error_message",
        "retryable",
        "input_tokens",
        "output_tokens",
        "decided",
    ):
        del data["recent_turns"][0][key]
    decoded = decode(data, session.definition)
    assert decoded.lease == Lease("t9", "replica-a", 1_700_000_000_000)
    assert decoded.recent_turns[0].started_at_ms is None
    assert decoded.recent_turns[0].retryable is None
    with pytest.raises(MalformedRecordError):  # version 2 must carry the new keys
        decode({**data, "version": 2}, session.definition)


def test_a_message_count_is_kept_and_version_2_records_have_none(
    session: ChatSession, history: History
) -> None:
    record = played(session, history).evolve(messages=4)
    data = body(record)
    assert data["messages"] == 4
    assert decode(data, session.definition).messages == 4
    assert decode({**data, "messages": None}, session.definition).messages is None
    for bad in (-1, "4", True):
        with pytest.raises(MalformedRecordError):
            decode({**data, "messages": bad}, session.definition)
    del data["messages"]
    for turn in data["recent_turns"]:
        del turn["decided"]  # added in version 4
    with pytest.raises(MalformedRecordError):  # version 3 must carry the count
        decode({**data, "version": 3}, session.definition)
    assert decode({**data, "version": 2}, session.definition).messages is None


def decided_failure() -> TerminalTurn:
    """A failed turn that streamed its decision first (its model call failed)."""
    return TerminalTurn(
        turn_id="t10",
        operation="submit",
        outcome="failed",
        finished_at_ms=1_700_000_000_500,
        kind="agentic",
        user_message_id="u4",
        error_code="model_server_error",
        from_state="complete",
        to_state="complete",
        started_at_ms=1_700_000_000_000,
        error_message="The model server failed.",
        retryable=True,
        decided=True,
    )


def test_a_failed_turn_keeps_the_decision_it_streamed(
    session: ChatSession, history: History
) -> None:
    record = played(session, history).with_turn(decided_failure())
    data = body(record)
    assert data["version"] == 5
    assert [turn["decided"] for turn in data["recent_turns"]] == [False, True]
    decoded = decode(data, session.definition)
    assert decoded.recent_turns[-1] == decided_failure()
    assert decoded.recent_turns[-1].decided
    for bad in (None, "yes", 1):
        data["recent_turns"][1]["decided"] = bad
        with pytest.raises(MalformedRecordError):
            decode(data, session.definition)
    del data["recent_turns"][1]["decided"]
    with pytest.raises(MalformedRecordError):  # version 4 must say it
        decode(data, session.definition)


def test_version_3_records_read_as_completed_turns_decided_and_failed_ones_not(
    session: ChatSession, history: History
) -> None:
    answered = dataclasses.replace(decided_failure(), outcome="completed", turn_id="t11")
    data = body(played(session, history).with_turn(decided_failure()).with_turn(answered))
    data["version"] = 3
    for turn in data["recent_turns"]:
        del turn["decided"]
    turns = decode(data, session.definition).recent_turns
    assert [(t.outcome, t.decided) for t in turns] == [
        ("completed", True),
        ("failed", False),
        ("completed", True),
    ]
    data["recent_turns"][0]["decided"] = True
    with pytest.raises(MalformedRecordError):  # version 3 has no such key
        decode(data, session.definition)


@pytest.mark.parametrize(
    ("key", "value"),
    [("retryable", "yes"), ("started_at_ms", -1), ("input_tokens", "3"), ("error_message", "")],
)
def test_malformed_version_2_turn_fields_are_rejected(
    key: str, value: Any, session: ChatSession, history: History
) -> None:
    data = body(played(session, history))
    data["recent_turns"][0][key] = value
    with pytest.raises(MalformedRecordError):
        decode(data, session.definition)


def waiting_answer() -> TerminalTurn:
    """A completed agentic turn whose answer waits on two tool calls."""
    return TerminalTurn(
        turn_id="t11",
        operation="submit",
        outcome="completed",
        finished_at_ms=1_700_000_000_500,
        kind="agentic",
        user_message_id="u4",
        assistant_message_id="a4",
        from_state="complete",
        to_state="complete",
        started_at_ms=1_700_000_000_000,
        decided=True,
        pending=(PendingCall("call-1", "weather"), PendingCall("call-2", "refund", "approval")),
    )


def test_a_completed_turn_keeps_the_tool_calls_it_waits_on(
    session: ChatSession, history: History
) -> None:
    record = played(session, history).with_turn(waiting_answer())
    data = body(record)
    assert data["recent_turns"][-1]["tool_calls"] == [
        ["call-1", "weather", "result"],
        ["call-2", "refund", "approval"],
    ]
    assert "tool_calls" not in data["recent_turns"][0]  # only a waiting answer has the key
    decoded = decode(data, session.definition)
    assert decoded.recent_turns[-1] == waiting_answer()
    assert decoded.last_answer() == waiting_answer()


@pytest.mark.parametrize(
    "bad",
    [
        [],
        "call-1",
        [["call-1", "weather"]],
        [["call-1", "weather", "later"]],
        [["", "weather", "result"]],
        [["call-1", "weather", "result"], ["call-1", "other", "result"]],
    ],
    ids=["empty", "not-a-list", "short", "unknown-wait", "empty-id", "repeated-id"],
)
def test_malformed_pending_tool_calls_are_rejected(
    bad: Any, session: ChatSession, history: History
) -> None:
    data = body(played(session, history).with_turn(waiting_answer()))
    data["recent_turns"][-1]["tool_calls"] = bad
    with pytest.raises(MalformedRecordError):
        decode(data, session.definition)


def test_a_version_4_record_cannot_name_tool_calls(session: ChatSession, history: History) -> None:
    data = body(played(session, history).with_turn(waiting_answer()))
    data["version"] = 4
    with pytest.raises(MalformedRecordError):
        decode(data, session.definition)
    del data["recent_turns"][-1]["tool_calls"]
    assert decode(data, session.definition).recent_turns[-1].pending == ()


def test_server_tool_calls_in_flight_and_of_unknown_outcome_round_trip(
    session: ChatSession, history: History
) -> None:
    """A lease naming the call it runs, and an interrupted turn naming the calls whose
    outcome is unknown: version 7, read back whole; a record without them stays version 5."""
    record = played(session, history)
    running = (PendingCall("call-1", "cancel_order", "server"),)
    assert record.lease is not None
    leased = record.evolve(lease=replace(record.lease, running=running))
    lost = TerminalTurn(
        turn_id="t7",
        operation="submit",
        outcome="failed",
        finished_at_ms=1_699_999_998_000,
        error_code="interrupted",
        unknown=running,
    )
    for changed in (leased, record.with_turn(lost)):
        data = body(changed)
        assert data["version"] == 7
        assert "migration" not in data  # optional from version 7 on
        assert decode(data, session.definition) == changed
    assert body(record)["version"] == 5
    broken = body(leased)
    broken["lease"]["running"] = [["call-1"]]
    with pytest.raises(MalformedRecordError, match="running"):
        decode(broken, session.definition)
    older = body(leased)
    older["version"] = 6
    older["migration"] = {"revision": 2, "code": "replay"}
    with pytest.raises(MalformedRecordError):  # version 6 knows no calls in flight
        decode(older, session.definition)
