"""Routes that call a declared server tool without the model: arguments from the match,
the result through the response template, the text recorded and replayed, a failing tool
failing the route with nothing committed."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import pytest

from agentskit_chat.conversation import (
    AsyncCallbackError,
    ConfigError,
    ErrorCode,
    FailureOutcome,
    Message,
    Role,
    RouteContext,
    RouteOutcome,
    RouteToolError,
    create_chat_session,
    parse_definition,
)

KEY = b"tool-routes-test-key-32-bytes!!!"


def orders(**route: Any) -> dict[str, Any]:
    tool_route = {
        "id": "order",
        "pattern": r"/order (?P<order>\d+)",
        "event": "look",
        "tool": {"name": "lookup_order", "arguments": {"order_id": "{order}"}},
        "response": "Order {order}: {result}",
        **route,
    }
    return {
        "id": "orders",
        "revision": 1,
        "mcp_servers": {"shop": {"command": "shop-tools"}},
        "tools": {"lookup_order": {"server": "shop"}, "local_time": None},
        "conversation": {
            "initial": "idle",
            "states": {"idle": {"on": {"look": "idle"}}},
            "routes": [tool_route],
        },
    }


class Backend:
    """The tool as the route sees it: records each call, answers or fails."""

    def __init__(self, answer: str = "shipped", error: str | None = None) -> None:
        self.calls: list[tuple[str, dict[str, str], str, str | None]] = []
        self.answer = answer
        self.error = error

    async def __call__(self, tool: str, arguments: Mapping[str, str], context: RouteContext) -> str:
        self.calls.append((tool, dict(arguments), context.session_id, context.message_id))
        if self.error is not None:
            raise RouteToolError(self.error)
        return self.answer


def user(message_id: str, text: str) -> Message:
    return Message(message_id, Role.USER, text)


def test_a_tool_route_answers_with_the_tools_result_and_records_the_text() -> None:
    backend = Backend()
    session = create_chat_session(
        parse_definition(orders()), session_id="s1", digest_key=KEY, tools=backend
    )
    outcome = asyncio.run(session.dispatch([user("m1", "/order 20240117")]))
    assert isinstance(outcome, RouteOutcome)
    assert outcome.response == "Order 20240117: shipped"
    assert backend.calls == [("lookup_order", {"order_id": "20240117"}, "s1", "m1")]
    decision = session.state.decisions["m1"]
    assert (decision.route_id, decision.derived) == ("order", False)
    assert decision.response == "Order 20240117: shipped"


def test_a_retry_replays_the_recorded_text_without_running_the_tool_again() -> None:
    backend = Backend()
    session = create_chat_session(
        parse_definition(orders()), session_id="s1", digest_key=KEY, tools=backend
    )
    asyncio.run(session.dispatch([user("m1", "/order 7")]))
    backend.answer = "lost"  # what a second run would say
    replayed = asyncio.run(session.dispatch([user("m1", "/order 7")]))
    assert isinstance(replayed, RouteOutcome)
    assert (replayed.response, replayed.replayed) == ("Order 7: shipped", True)
    assert len(backend.calls) == 1


@pytest.mark.parametrize("error", ["timeout", "tool_error", "server_gone"])
def test_a_failing_tool_fails_the_route_and_commits_nothing(error: str) -> None:
    backend = Backend(error=error)
    session = create_chat_session(
        parse_definition(orders()), session_id="s1", digest_key=KEY, tools=backend
    )
    before = session.state
    outcome = asyncio.run(session.dispatch([user("m1", "/order 7")]))
    assert isinstance(outcome, FailureOutcome)
    assert (outcome.route_id, outcome.error_type) == ("order", error)
    assert session.state == before


def test_without_a_tool_runner_the_route_fails() -> None:
    session = create_chat_session(parse_definition(orders()), session_id="s1", digest_key=KEY)
    outcome = asyncio.run(session.dispatch([user("m1", "/order 7")]))
    assert isinstance(outcome, FailureOutcome)
    assert outcome.error_type == "no_tools"


def test_a_tool_route_needs_an_awaited_dispatch() -> None:
    session = create_chat_session(
        parse_definition(orders()), session_id="s1", digest_key=KEY, tools=Backend()
    )
    with pytest.raises(AsyncCallbackError):
        session.dispatch_sync([user("m1", "/order 7")])


@pytest.mark.parametrize(
    ("change", "code", "path"),
    [
        (
            {"tool": {"name": "refund", "arguments": {}}},
            ErrorCode.UNKNOWN_ROUTE_TOOL,
            "conversation.routes[0].tool.name",
        ),
        (
            {"tool": {"name": "local_time"}},  # a client's tool: the service cannot run it
            ErrorCode.UNKNOWN_ROUTE_TOOL,
            "conversation.routes[0].tool.name",
        ),
        (
            {"tool": {"name": "lookup_order", "arguments": {"id": "{nope}"}}},
            ErrorCode.UNKNOWN_TEMPLATE_FIELD,
            "conversation.routes[0].tool.arguments.id",
        ),
        (
            {"tool": {"name": "lookup_order", "arguments": {"id": "{broken"}}},
            ErrorCode.INVALID_TEMPLATE,
            "conversation.routes[0].tool.arguments.id",
        ),
        (
            {"response": "{order} {missing}"},
            ErrorCode.UNKNOWN_TEMPLATE_FIELD,
            "conversation.routes[0].response",
        ),
        (
            {"tool": {"name": "lookup_order", "argument": {}}},
            ErrorCode.UNKNOWN_KEY,
            "conversation.routes[0].tool.argument",
        ),
        ({"tool": "lookup_order"}, ErrorCode.INVALID_TYPE, "conversation.routes[0].tool"),
        (
            {"tool": {"arguments": {}}},
            ErrorCode.MISSING_KEY,
            "conversation.routes[0].tool.name",
        ),
    ],
)
def test_a_broken_tool_route_is_a_diagnostic(
    change: dict[str, Any], code: ErrorCode, path: str
) -> None:
    with pytest.raises(ConfigError) as broken:
        parse_definition(orders(**change))
    assert [(d.code, d.path) for d in broken.value.diagnostics] == [(code, path)]


def test_result_is_only_a_field_of_tool_routes() -> None:
    plain = orders()
    route = plain["conversation"]["routes"][0]
    del route["tool"]
    with pytest.raises(ConfigError) as broken:
        parse_definition(plain)
    assert [d.code for d in broken.value.diagnostics] == [ErrorCode.UNKNOWN_TEMPLATE_FIELD]
