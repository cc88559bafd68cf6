"""Protobuf conversion of values, operations and events."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from agentskit.chat.v1 import chat_pb2
from agentskit_chat_client import (
    Dispatch,
    Edit,
    HistoryMode,
    Message,
    Regenerate,
    Retry,
    Submit,
    TextDelta,
)
from agentskit_chat_client import _convert as convert
from tests.client.fake_service import event


@pytest.mark.parametrize(
    ("number", "role"),
    [
        (chat_pb2.ROLE_USER, "user"),
        (chat_pb2.ROLE_ASSISTANT, "assistant"),
        (chat_pb2.ROLE_SYSTEM, "system"),
        (chat_pb2.ROLE_TOOL, "tool"),
    ],
)
def test_roles_round_trip(number, role):
    message = chat_pb2.Message(id="m", role=number, content="c")

    decoded = convert.message_from_pb(message)

    assert decoded == Message("m", role, "c")
    assert convert.message_to_pb(decoded) == message


def test_unknown_and_unspecified_enum_values_decode_as_unspecified():
    assert convert.role_from_pb(chat_pb2.ROLE_UNSPECIFIED) == "unspecified"
    assert convert.role_from_pb(99) == "unspecified"
    assert convert.kind_from_pb(chat_pb2.TURN_KIND_UNSPECIFIED) == "unspecified"
    assert convert.kind_from_pb(99) == "unspecified"
    assert convert.operation_from_pb(chat_pb2.OPERATION_UNSPECIFIED) == "unspecified"
    assert convert.operation_from_pb(99) == "unspecified"
    assert convert.role_to_pb("unspecified") == chat_pb2.ROLE_UNSPECIFIED


@pytest.mark.parametrize(
    ("number", "kind"),
    [
        (chat_pb2.TURN_KIND_DETERMINISTIC, "deterministic"),
        (chat_pb2.TURN_KIND_AGENTIC, "agentic"),
        (chat_pb2.TURN_KIND_REPAIRED, "repaired"),
        (chat_pb2.TURN_KIND_FALLBACK, "fallback"),
    ],
)
def test_turn_kinds_are_lowercase_names(number, kind):
    assert convert.kind_from_pb(number) == kind


@pytest.mark.parametrize(
    ("number", "name"),
    [
        (chat_pb2.OPERATION_SUBMIT, "submit"),
        (chat_pb2.OPERATION_RETRY, "retry"),
        (chat_pb2.OPERATION_EDIT, "edit"),
        (chat_pb2.OPERATION_REGENERATE, "regenerate"),
        (chat_pb2.OPERATION_DISPATCH, "dispatch"),
    ],
)
def test_operations_are_lowercase_names(number, name):
    assert convert.operation_from_pb(number) == name


def test_history_modes():
    assert convert.history_mode_from_pb(chat_pb2.HISTORY_MODE_UNSPECIFIED) is HistoryMode.SERVER
    assert convert.history_mode_from_pb(chat_pb2.HISTORY_MODE_SERVER) is HistoryMode.SERVER
    assert convert.history_mode_from_pb(chat_pb2.HISTORY_MODE_CLIENT) is HistoryMode.CLIENT
    assert convert.history_mode_to_pb(HistoryMode.SERVER) == chat_pb2.HISTORY_MODE_SERVER
    assert convert.history_mode_to_pb(HistoryMode.CLIENT) == chat_pb2.HISTORY_MODE_CLIENT


@pytest.mark.parametrize(
    ("operation", "expected"),
    [
        (Submit("hi"), chat_pb2.StreamTurnRequest(submit=chat_pb2.SubmitOperation(content="hi"))),
        (
            Submit("hi", "m7"),
            chat_pb2.StreamTurnRequest(
                submit=chat_pb2.SubmitOperation(content="hi", message_id="m7")
            ),
        ),
        (Retry(), chat_pb2.StreamTurnRequest(retry=chat_pb2.RetryOperation())),
        (Retry("m1"), chat_pb2.StreamTurnRequest(retry=chat_pb2.RetryOperation(message_id="m1"))),
        (
            Edit("m1", "new"),
            chat_pb2.StreamTurnRequest(edit=chat_pb2.EditOperation(message_id="m1", content="new")),
        ),
        (Regenerate(), chat_pb2.StreamTurnRequest(regenerate=chat_pb2.RegenerateOperation())),
        (
            Regenerate("a1"),
            chat_pb2.StreamTurnRequest(regenerate=chat_pb2.RegenerateOperation(message_id="a1")),
        ),
        (Dispatch([]), chat_pb2.StreamTurnRequest(dispatch=chat_pb2.DispatchOperation())),
    ],
)
def test_turn_request_sets_exactly_one_operation(operation, expected):
    expected.session_id = "s1"
    expected.turn_id = "t1"

    request = convert.turn_request("s1", "t1", operation)

    assert request == expected
    assert request.WhichOneof("operation") == expected.WhichOneof("operation")


def test_turn_request_rejects_other_values():
    with pytest.raises(TypeError, match="not a turn operation"):
        convert.turn_request("s1", "t1", "submit")  # type: ignore[arg-type]


def test_event_time_is_utc_and_sequence_is_an_int():
    response = event(7, delta=chat_pb2.TextDelta(text="x"))

    decoded = convert.event_from_pb(response)

    assert isinstance(decoded, TextDelta)
    assert decoded.sequence == 7
    assert type(decoded.sequence) is int
    assert decoded.time.tzinfo is UTC
    assert decoded.time == datetime(2030, 1, 2, 3, 4, 5, 685000, tzinfo=UTC)


def test_an_event_without_a_variant_decodes_to_none():
    assert convert.event_from_pb(event(1)) is None


def test_empty_optional_ids_decode_to_none():
    started = convert.event_from_pb(
        event(1, started=chat_pb2.TurnStarted(operation=chat_pb2.OPERATION_DISPATCH))
    )
    decision = convert.event_from_pb(
        event(2, decision=chat_pb2.TurnDecision(kind=chat_pb2.TURN_KIND_AGENTIC))
    )

    assert started is not None
    assert getattr(started, "user_message_id") is None  # noqa: B009
    assert decision is not None
    assert getattr(decision, "route_id") is None  # noqa: B009
