"""The public value types."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

import pytest

import agentskit_chat_client
from agentskit_chat_client import (
    Dispatch,
    HistoryMode,
    Message,
    Snapshot,
    Submit,
    TextDelta,
    TurnCompleted,
    TurnResult,
    TurnStarted,
)


def test_dispatch_stores_its_messages_as_a_tuple():
    messages = [Message("m1", "user", "hi")]

    operation = Dispatch(messages)
    messages.append(Message("m2", "user", "later"))

    assert operation.messages == (Message("m1", "user", "hi"),)
    assert hash(operation) == hash(Dispatch((Message("m1", "user", "hi"),)))


def test_values_are_frozen():
    delta = TextDelta(session_id="s1", turn_id="t1", sequence=1, time=datetime.now(UTC), text="x")

    with pytest.raises(dataclasses.FrozenInstanceError):
        delta.text = "y"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        Submit("hi").content = "bye"  # type: ignore[misc]


def test_history_mode_values_are_lowercase_strings():
    assert [mode.value for mode in HistoryMode] == ["server", "client"]
    assert HistoryMode("client") is HistoryMode.CLIENT


def test_turn_result_ok_means_completed():
    time = datetime.now(UTC)
    completed = TurnCompleted(
        session_id="s1",
        turn_id="t1",
        sequence=3,
        time=time,
        assistant_message_id="a1",
        content="",
        snapshot=Snapshot("idle"),
        cursor=1,
        usage=None,
    )
    started = TurnStarted(
        session_id="s1",
        turn_id="t1",
        sequence=1,
        time=time,
        operation="submit",
        user_message_id="m1",
        duplicate=False,
    )

    assert TurnResult("t1", completed=completed).ok
    assert not TurnResult("t1", started=started).ok


def test_the_package_exports_exactly_its_public_names():
    exported = set(agentskit_chat_client.__all__)

    assert all(hasattr(agentskit_chat_client, name) for name in exported)
    assert {"ChatClient", "ChatError", "TurnEvent", "TurnOperation", "HistoryMode"} <= exported
    assert not any(name.startswith("_") for name in exported)
