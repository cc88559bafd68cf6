"""What each operation resolves and how it changes a server-held history."""

from __future__ import annotations

import itertools

import pytest

from agentskit_chat.conversation import Message, Role
from agentskit_chat.service import (
    Dispatch,
    Edit,
    Limits,
    Reason,
    Regenerate,
    Retry,
    ServiceError,
    Submit,
)
from agentskit_chat.service._history import plan_turn

HISTORY = (
    Message("u1", Role.USER, "/start"),
    Message("a1", Role.ASSISTANT, "What is your name?"),
    Message("u2", Role.USER, "/name Ada"),
    Message("a2", Role.ASSISTANT, "Welcome, Ada."),
)
LIMITS = Limits()


COUNTER = itertools.count(1)


def new_id(prefix: str) -> str:
    return f"{prefix}-{next(COUNTER)}"


def test_submit_appends_a_new_user_message_after_everything() -> None:
    plan = plan_turn(Submit("hello", "u3"), HISTORY, LIMITS, new_id)
    assert [m.id for m in plan.messages] == ["u1", "a1", "u2", "a2", "u3"]
    assert (plan.keep, [m.id for m in plan.added], plan.user_message_id) == (4, ["u3"], "u3")


def test_submit_without_an_id_gets_a_fresh_one() -> None:
    plan = plan_turn(Submit("hello"), HISTORY, LIMITS, lambda prefix: f"{prefix}-new")
    assert plan.user_message_id == "u-new"


def test_retry_resolves_through_the_user_message_and_drops_what_followed() -> None:
    plan = plan_turn(Retry(), HISTORY, LIMITS, new_id)
    assert [m.id for m in plan.messages] == ["u1", "a1", "u2"]
    assert (plan.keep, plan.added, plan.user_message_id) == (3, (), "u2")
    earlier = plan_turn(Retry("u1"), HISTORY, LIMITS, new_id)
    assert ([m.id for m in earlier.messages], earlier.keep) == (["u1"], 1)


def test_edit_replaces_the_content_and_drops_later_messages() -> None:
    plan = plan_turn(Edit("u1", "hello"), HISTORY, LIMITS, new_id)
    assert [(m.id, m.content) for m in plan.messages] == [("u1", "hello")]
    assert (plan.keep, plan.user_message_id) == (0, "u1")


def test_regenerate_resolves_the_user_message_before_the_answer() -> None:
    plan = plan_turn(Regenerate(), HISTORY, LIMITS, new_id)
    assert ([m.id for m in plan.messages], plan.keep, plan.user_message_id) == (
        ["u1", "a1", "u2"],
        3,
        "u2",
    )
    first = plan_turn(Regenerate("a1"), HISTORY, LIMITS, new_id)
    assert ([m.id for m in first.messages], first.user_message_id) == (["u1"], "u1")


def test_dispatch_resolves_the_sent_history_and_stores_nothing() -> None:
    plan = plan_turn(Dispatch(HISTORY[:3]), (), LIMITS, new_id)
    assert plan.messages == HISTORY[:3]
    assert (plan.keep, plan.added, plan.user_message_id) == (0, (), "u2")


@pytest.mark.parametrize(
    ("operation", "field"),
    [
        (Retry("a1"), "retry.message_id"),
        (Edit("a1", "x"), "edit.message_id"),
        (Regenerate("u1"), "regenerate.message_id"),
        (Edit("zz", "x"), "edit.message_id"),
        (Submit("x", "u1"), "submit.message_id"),
        (Submit("x", ""), "submit.message_id"),
    ],
)
def test_operations_naming_the_wrong_message_are_invalid(operation: object, field: str) -> None:
    with pytest.raises(ServiceError) as caught:
        plan_turn(operation, HISTORY, LIMITS, new_id)  # type: ignore[arg-type]
    assert caught.value.reason == Reason.INVALID_ARGUMENT
    assert caught.value.metadata["field"] == field


def test_an_empty_history_has_nothing_to_retry_or_regenerate() -> None:
    for operation in (Retry(), Regenerate()):
        with pytest.raises(ServiceError) as caught:
            plan_turn(operation, (), LIMITS, new_id)
        assert caught.value.reason == Reason.INVALID_ARGUMENT


def test_the_history_limit_counts_the_answer_too() -> None:
    limits = Limits(max_history_messages=5)
    assert plan_turn(Retry(), HISTORY, limits, new_id).keep == 3
    with pytest.raises(ServiceError) as caught:
        plan_turn(Submit("x"), HISTORY, limits, new_id)
    assert caught.value.metadata["limit"] == "history_messages"


def test_sizes_are_counted_in_utf8_bytes() -> None:
    limits = Limits(max_input_bytes=8)
    plan_turn(Submit("12345678"), (), limits, new_id)
    with pytest.raises(ServiceError) as caught:
        plan_turn(Submit("ééééé"), (), limits, new_id)  # 10 bytes in 5 characters
    assert caught.value.reason == Reason.LIMIT_EXCEEDED
    assert caught.value.metadata == {"limit": "input_bytes", "maximum": "8"}
