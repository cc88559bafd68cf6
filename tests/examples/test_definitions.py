"""The example definitions hold nothing a user cannot reach: every state is reached by some
route from the initial one, every route can answer in a reached state, every declared event
is fired by a route. The teaching definition `coffee` also offers a button (a route with a
fixed input) for each of its states' actions, and shows each kind of route once."""

from __future__ import annotations

import dataclasses

import pytest

from agentskit_chat.conversation import ChatDefinition, load_definitions
from agentskit_chat.conversation._definition import Route
from agentskit_chat_client import command_hints, eligible_routes
from tests.cli.fixtures.serving import EXAMPLES

DEFINITIONS = load_definitions(EXAMPLES)


class _Snapshot:
    def __init__(self, definition: ChatDefinition, state: str) -> None:
        self.state = state
        self.allowed_events = tuple(definition.conversation.states[state].on)


class _Offered:
    """A route as a renderer sees it: its event, states and fixed input."""

    def __init__(self, route: Route) -> None:
        self.id = route.id
        self.event = route.event
        self.states = tuple(route.states or ())
        self.input_text = route.matcher.input_text


def _offered(definition: ChatDefinition) -> list[_Offered]:
    return [_Offered(route) for route in definition.conversation.routes]


def _reached(definition: ChatDefinition) -> set[str]:
    """States reached from the initial one through the routes eligible on the way."""
    spec = definition.conversation
    reached, frontier = {spec.initial}, [spec.initial]
    while frontier:
        state = frontier.pop()
        for route in eligible_routes(_offered(definition), _Snapshot(definition, state)):
            target = spec.states[state].on[route.event]
            if target not in reached:
                reached.add(target)
                frontier.append(target)
    return reached


@pytest.mark.parametrize("name", sorted(DEFINITIONS))
def test_every_state_route_and_event_is_reachable(name: str) -> None:
    definition = DEFINITIONS[name]
    spec = definition.conversation
    reached = _reached(definition)
    assert reached == set(spec.states)
    answering = {
        route.id
        for state in reached
        for route in eligible_routes(_offered(definition), _Snapshot(definition, state))
    }
    assert answering == {route.id for route in spec.routes}
    declared = {event for state in spec.states.values() for event in state.on}
    assert declared == {route.event for route in spec.routes}


def test_a_state_no_route_leads_to_is_caught() -> None:
    """The check above can fail: without the phrase that confirms, `done` is out of reach."""
    coffee = DEFINITIONS["coffee"]
    spec = coffee.conversation
    routes = tuple(route for route in spec.routes if route.event != "confirm")
    crippled = dataclasses.replace(coffee, conversation=dataclasses.replace(spec, routes=routes))
    assert _reached(crippled) == set(spec.states) - {"done"}


def test_every_action_of_the_teaching_definition_is_a_button_there() -> None:
    coffee = DEFINITIONS["coffee"]
    for name, state in coffee.conversation.states.items():
        snapshot = _Snapshot(coffee, name)
        offered = {route.id: route for route in eligible_routes(_offered(coffee), snapshot)}
        buttons = command_hints(_offered(coffee), snapshot)
        assert state.actions, name
        for action in state.actions:
            assert action in offered, f"{name}: action {action} names no route answering there"
            assert offered[action].input_text in buttons, f"{name}: {action} is no button"


def test_the_teaching_definition_shows_each_kind_of_route() -> None:
    routes = DEFINITIONS["coffee"].conversation.routes
    matchers = {type(route.matcher).__name__ for route in routes}
    assert {"CommandMatcher", "ExactMatcher", "PatternMatcher"} <= matchers
    assert {route.kind.value for route in routes} == {"deterministic", "repaired", "fallback"}
    assert any(route.states for route in routes)
    # The repaired typo is no button: a renderer never offers the misspelling.
    (typo,) = (route for route in routes if route.kind.value == "repaired")
    assert typo.matcher.input_text == ""
