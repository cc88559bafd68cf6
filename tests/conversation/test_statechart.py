"""The statechart: frozen tables, pure typed transitions, host-supplied identity and time."""

from __future__ import annotations

import dataclasses

import pytest

from agentskit_chat.conversation import (
    Accepted,
    Rejected,
    RejectionReason,
    StatechartInstance,
    compile_statechart,
    create_instance,
    transition,
)

STATES = {"idle": {"start": "busy"}, "busy": {"stop": "idle", "tick": "busy"}}


def test_accepted_transition_returns_a_new_instance() -> None:
    chart = compile_statechart("idle", STATES)
    start = create_instance(chart, id="session-1", at=100.0)
    result = transition(chart, start, "start", at=101.5)
    assert isinstance(result, Accepted)
    assert (result.from_state, result.to_state, result.event) == ("idle", "busy", "start")
    assert result.instance == StatechartInstance("session-1", "busy", 1, 101.5)
    assert start == StatechartInstance("session-1", "idle", 0, 100.0)


def test_disallowed_event_is_rejected_not_ignored() -> None:
    chart = compile_statechart("idle", STATES)
    start = create_instance(chart, id="s")
    result = transition(chart, start, "stop")
    assert isinstance(result, Rejected)
    assert result.reason is RejectionReason.EVENT_NOT_ALLOWED
    assert result.instance is start


def test_instance_in_unknown_state_is_rejected() -> None:
    chart = compile_statechart("idle", STATES)
    result = transition(chart, StatechartInstance("s", "ghost"), "start")
    assert isinstance(result, Rejected)
    assert result.reason is RejectionReason.UNKNOWN_STATE


def test_allowed_events_follow_declaration_order() -> None:
    chart = compile_statechart("idle", STATES)
    assert chart.allowed_events("busy") == ("stop", "tick")
    assert chart.allowed_events("nowhere") == ()


def test_chart_and_instances_are_immutable() -> None:
    chart = compile_statechart("idle", STATES)
    with pytest.raises(dataclasses.FrozenInstanceError):
        chart.initial = "busy"  # type: ignore[misc]
    with pytest.raises(dataclasses.FrozenInstanceError):
        create_instance(chart, id="s").state = "busy"  # type: ignore[misc]


def test_compiling_copies_the_declaration() -> None:
    states = {"idle": {"start": "busy"}, "busy": {}}
    chart = compile_statechart("idle", states)
    states["idle"]["start"] = "idle"
    assert chart.target("idle", "start") == "busy"


@pytest.mark.parametrize(
    ("initial", "states", "fragment"),
    [
        ("nowhere", STATES, "initial state"),
        ("idle", {"idle": {"go": "gone"}}, "transition target"),
        ("idle", {"idle": {"": "idle"}}, "event names"),
        ("", {"": {}}, "state names"),
    ],
)
def test_invalid_declarations_are_refused(
    initial: str, states: dict[str, dict[str, str]], fragment: str
) -> None:
    with pytest.raises(ValueError, match=fragment):
        compile_statechart(initial, states)
