"""The rounds a failed agentic turn completed, in its record: sealed, bound to the session
and the turn, read back whole with the key, kept on the newest turn only, and not kept at
all by a record written without a key."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from agentskit_chat.conversation import (
    ChatSession,
    InputDigester,
    MalformedRecordError,
    Message,
    PendingCall,
    RecordedRounds,
    ResponseSealer,
    Role,
    SealedResponseError,
    SessionRecord,
    TerminalTurn,
    ToolCall,
    decode_session_record,
    encode_session_record,
    rounds_digest,
)

from .conftest import KEY, History
from .test_record import played

SECRET = "CANARY-rounds-77a1"


def failed(turn_id: str, rounds: RecordedRounds | None) -> TerminalTurn:
    return TerminalTurn(
        turn_id=turn_id,
        operation="submit",
        outcome="failed",
        finished_at_ms=1_700_000_000_500,
        error_code="model_failed",
        rounds=rounds,
    )


def rounds() -> RecordedRounds:
    asked = (Message("u1", Role.USER, f"count {SECRET}"),)
    of = rounds_digest(InputDigester(KEY).digest, asked)
    return RecordedRounds(
        of,
        (
            Message("a.0", Role.ASSISTANT, "", (ToolCall("c1", "count", f'{{"k":"{SECRET}"}}'),)),
            Message("a.0.0", Role.TOOL, f"counted {SECRET}", tool_call_id="c1"),
            Message("a.1", Role.ASSISTANT, "On.", (ToolCall("c2", "fail", "{}"),)),
            Message("a.1.0", Role.TOOL, "failed", tool_call_id="c2"),
        ),
        (("c2", "tool_error"),),
    )


def test_rounds_are_sealed_and_read_back_with_the_key(
    session: ChatSession, history: History
) -> None:
    sealer = ResponseSealer(KEY)
    record = played(session, history).with_turn(failed("t9", rounds()))
    data = encode_session_record(record, sealer)
    assert SECRET.encode() not in data
    assert json.loads(data)["version"] == 7
    back = decode_session_record(
        data, definition=session.definition, session_id="s1", sealer=sealer
    )
    assert back == record
    assert back.recent_turns[-1].rounds is not None
    assert back.recent_turns[-1].rounds.error_of("c2") == "tool_error"
    with pytest.raises(SealedResponseError):
        decode_session_record(data, definition=session.definition, session_id="s1")
    moved = json.loads(data)
    moved["recent_turns"][-1]["turn_id"] = "t10"  # sealed rounds are bound to their turn
    with pytest.raises(SealedResponseError):
        decode_session_record(
            json.dumps(moved), definition=session.definition, session_id="s1", sealer=sealer
        )
    moved["recent_turns"][-1]["turn_id"] = "t9"
    moved["recent_turns"][-1]["rounds"] = {"plain": SECRET}
    with pytest.raises(MalformedRecordError, match="rounds"):
        decode_session_record(
            json.dumps(moved), definition=session.definition, session_id="s1", sealer=sealer
        )


def test_without_a_key_no_rounds_are_kept(session: ChatSession, history: History) -> None:
    record = played(session, history).with_turn(failed("t9", rounds()))
    data = encode_session_record(record)
    assert SECRET.encode() not in data
    assert json.loads(data)["version"] == 5  # nothing a version 5 record cannot say
    back = decode_session_record(data, definition=session.definition, session_id="s1")
    assert back.recent_turns[-1].rounds is None


def test_only_the_newest_turn_keeps_its_rounds(session: ChatSession, history: History) -> None:
    record = played(session, history).with_turn(failed("t9", rounds()))
    later = record.with_turn(replace(failed("t10", None), error_code="conflict"))
    assert [t.rounds for t in later.recent_turns[-2:]] == [None, None]
    assert isinstance(later, SessionRecord)


def test_the_digest_names_the_request_not_the_message_ids() -> None:
    digest = InputDigester(KEY).digest
    one = (Message("u1", Role.USER, "count it"),)
    same = (Message("u-other", Role.USER, "count it"),)
    other = (Message("u1", Role.USER, "count that"),)
    assert rounds_digest(digest, one) == rounds_digest(digest, same)
    assert rounds_digest(digest, one) != rounds_digest(digest, other)
    assert "count" not in rounds_digest(digest, one)


def test_a_lease_keeps_the_rounds_before_its_calls_in_flight(
    session: ChatSession, history: History
) -> None:
    sealer = ResponseSealer(KEY)
    record = played(session, history)
    assert record.lease is not None
    running = (PendingCall("c3", "count", "server"),)
    leased = record.evolve(lease=replace(record.lease, running=running, rounds=rounds()))
    data = encode_session_record(leased, sealer)
    assert SECRET.encode() not in data
    back = decode_session_record(
        data, definition=session.definition, session_id="s1", sealer=sealer
    )
    assert back == leased
    idle = record.evolve(lease=replace(record.lease, rounds=rounds()))  # no call in flight
    assert "rounds" not in json.loads(encode_session_record(idle, sealer))["lease"]
