"""The tool fields every HTTP front reads alike: each front's own names in each refusal,
the checks in one order, and the turn request they set."""

from __future__ import annotations

from typing import Any

import pytest

from agentskit.chat.v1 import chat_pb2 as pb
from agentskit_chat.transport.web.boundary.fronts import FrontError
from agentskit_chat.transport.web.boundary.tools import (
    NO_TOOLS,
    ToolFields,
    TurnTools,
    decision,
    declarations,
    turn_tools,
)

FIELDS = ToolFields("pick", "together", named_choice="a named thing", not_a_list="tools: a list")


def _declaration(tool: Any, at: str) -> pb.ToolDeclaration:
    return pb.ToolDeclaration(name=f"{tool}@{at}")


def _named(choice: dict[str, Any]) -> str | None:
    name = choice.get("thing")
    return name if isinstance(name, str) else None


def read(body: dict[str, Any]) -> TurnTools:
    return turn_tools(body, FIELDS, _declaration, _named)


def refusal(body: dict[str, Any]) -> tuple[str | None, str]:
    with pytest.raises(FrontError) as caught:
        read(body)
    assert (caught.value.status, caught.value.code) == (400, "invalid_argument")
    return caught.value.field, caught.value.message


def test_each_declaration_is_read_by_the_front_naming_its_place() -> None:
    tools = read({"tools": ["a", "b"], "pick": "required", "together": False})
    assert [t.name for t in tools.tools] == ["a@tools[0]", "b@tools[1]"]
    assert (tools.choice, tools.parallel) == ("required", False)
    assert read({"tools": ["a"], "pick": {"thing": "a"}}).choice == "a"


def test_nothing_declared_is_no_tools() -> None:
    assert read({}) == NO_TOOLS
    assert read({"tools": None, "pick": "none"}) == TurnTools(choice="none")
    assert declarations(None, _declaration) == ()


def test_the_parallel_flag_means_nothing_without_tools() -> None:
    assert read({"together": True}).parallel is None


@pytest.mark.parametrize(
    ("body", "field", "message"),
    [
        ({"tools": {}}, "tools", "tools: a list"),
        ({"tools": ["a"], "pick": "sometimes"}, "pick", "a named thing"),
        ({"tools": ["a"], "pick": {"thing": 1}}, "pick", "a named thing"),
        ({"pick": "auto"}, "pick", "pick needs tools"),
        ({"pick": {"thing": "a"}}, "pick", "pick needs tools"),
        ({"tools": ["a"], "together": "yes"}, "together", "together must be a boolean"),
        ({"tools": {}, "pick": "x", "together": "y"}, "tools", "tools: a list"),
        ({"pick": "x", "together": "y"}, "pick", "a named thing"),
    ],
)
def test_a_refusal_names_the_fronts_own_field_first_at_fault(
    body: dict[str, Any], field: str, message: str
) -> None:
    named, said = refusal(body)
    assert named == field
    assert said.startswith(field)
    assert said.endswith(message)


def test_the_tools_are_set_on_the_turn_request() -> None:
    turn = pb.StreamTurnRequest()
    read({"tools": ["a"], "pick": "auto", "together": False}).apply(turn)
    assert ([t.name for t in turn.tools], turn.tool_choice) == (["a@tools[0]"], "auto")
    assert turn.HasField("parallel_tool_calls")
    assert not turn.parallel_tool_calls
    untouched = pb.StreamTurnRequest()
    NO_TOOLS.apply(untouched)
    assert not untouched.tools
    assert not untouched.HasField("parallel_tool_calls")


def test_an_approval_decision_reads_approved_and_an_optional_reason() -> None:
    assert decision({"approved": True}, "x") == (True, "")
    assert decision({"approved": False, "reason": None}, "x") == (False, "")
    assert decision({"approved": False, "reason": "no"}, "x") == (False, "no")


@pytest.mark.parametrize(
    ("value", "field"),
    [
        ({"approved": "yes"}, "resume[0].payload.approved"),
        ({"approved": True, "reason": 3}, "resume[0].payload.reason"),
        ({"approved": True, "reason": "\ud800"}, "resume[0].payload.reason"),
    ],
)
def test_an_approval_decision_refusal_names_its_field(value: dict[str, Any], field: str) -> None:
    with pytest.raises(FrontError) as caught:
        decision(value, "resume[0].payload")
    assert caught.value.field == field
    assert "\ud800" not in caught.value.message
