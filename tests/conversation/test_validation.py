"""Rule 11: every validation error has a stable code, the file and the path inside it."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from agentskit_chat.conversation import (
    ConfigError,
    Diagnostic,
    ErrorCode,
    command_route,
    define_chat,
    handler_route,
    parse_definition,
)


def base() -> dict[str, Any]:
    return {
        "id": "support",
        "revision": 1,
        "conversation": {
            "initial": "idle",
            "states": {
                "idle": {"on": {"start": "collecting"}, "actions": ["start"]},
                "collecting": {"on": {"finish": "complete"}, "actions": ["cancel"]},
                "complete": {"actions": ["restart"]},
            },
            "routes": [
                {"id": "start", "command": "/start", "event": "start", "response": "Name?"},
                {
                    "id": "finish",
                    "pattern": r"/name (?P<name>\S.*)",
                    "event": "finish",
                    "states": ["collecting"],
                    "response": "Welcome, {name}.",
                },
            ],
        },
    }


def errors(data: Any) -> list[Diagnostic]:
    with pytest.raises(ConfigError) as caught:
        parse_definition(data, file="chat.yaml")
    return list(caught.value.diagnostics)


def single(data: Any) -> Diagnostic:
    found = errors(data)
    assert len(found) == 1, found
    assert found[0].file == "chat.yaml"
    return found[0]


def mutate(change: Any) -> dict[str, Any]:
    data = base()
    change(data)
    return data


def conv(data: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = data["conversation"]
    return result


def test_the_base_definition_is_valid() -> None:
    definition = parse_definition(base(), file="chat.yaml")
    assert definition.id == "support"
    assert definition.approvals == frozenset()


def test_tools_marked_for_approval_are_named_by_the_definition() -> None:
    data = mutate(lambda d: d.update(tools={"delete_order": {"approval": True}, "clock": None}))
    assert parse_definition(data, file="chat.yaml").approvals == {"delete_order"}


CASES: list[tuple[str, Any, ErrorCode, str]] = [
    (
        "route tool not declared",
        lambda d: d["conversation"]["routes"][0].update(tool={"name": "refund"}),
        ErrorCode.UNKNOWN_ROUTE_TOOL,
        "conversation.routes[0].tool.name",
    ),
    ("rollout above 100", lambda d: d.update(rollout=101), ErrorCode.INVALID_ROLLOUT, "rollout"),
    (
        "rollout not a number",
        lambda d: d.update(rollout="half"),
        ErrorCode.INVALID_ROLLOUT,
        "rollout",
    ),
    (
        "migration from a newer revision",
        lambda d: d.update(revision=2, migrations=[{"from": 2}]),
        ErrorCode.INVALID_MIGRATION,
        "migrations[0].from",
    ),
    (
        "migration from no revision",
        lambda d: d.update(revision=2, migrations=[{"from": "one"}]),
        ErrorCode.INVALID_MIGRATION,
        "migrations[0].from",
    ),
    (
        "migration to an unknown state",
        lambda d: d.update(revision=2, migrations=[{"from": 1, "states": {"old": "gone"}}]),
        ErrorCode.INVALID_MIGRATION,
        "migrations[0].states.old",
    ),
    (
        "migration to an unknown route",
        lambda d: d.update(revision=2, migrations=[{"from": 1, "routes": {"begin": "nope"}}]),
        ErrorCode.INVALID_MIGRATION,
        "migrations[0].routes.begin",
    ),
    (
        "migration listed twice",
        lambda d: d.update(revision=3, migrations=[{"from": 1}, {"from": 1}]),
        ErrorCode.INVALID_MIGRATION,
        "migrations[1].from",
    ),
    (
        "unknown migration key",
        lambda d: d.update(revision=2, migrations=[{"from": 1, "events": {}}]),
        ErrorCode.UNKNOWN_KEY,
        "migrations[0].events",
    ),
    (
        "tool name",
        lambda d: d.update(tools={"bad name": {"approval": True}}),
        ErrorCode.INVALID_TOOL,
        "tools.bad name",
    ),
    (
        "server tool of an undeclared server",
        lambda d: d.update(tools={"clock": {"server": "time"}}),
        ErrorCode.UNKNOWN_MCP_SERVER,
        "tools.clock.server",
    ),
    (
        "server unused",
        lambda d: d.update(mcp_servers={"time": {"command": "time-mcp"}}),
        ErrorCode.UNUSED_MCP_SERVER,
        "mcp_servers.time",
    ),
    (
        "server with command and url",
        lambda d: d.update(
            mcp_servers={"time": {"command": "time-mcp", "url": "http://127.0.0.1:9/mcp"}},
            tools={"clock": {"server": "time"}},
        ),
        ErrorCode.INVALID_MCP_SERVER,
        "mcp_servers.time",
    ),
    (
        "server token written literally",
        lambda d: d.update(
            mcp_servers={"time": {"url": "http://127.0.0.1:9/mcp", "token": "x"}},
            tools={"clock": {"server": "time"}},
        ),
        ErrorCode.LITERAL_SECRET,
        "mcp_servers.time.token",
    ),
    (
        "server tool timeout not positive",
        lambda d: d.update(
            mcp_servers={"time": {"command": "time-mcp"}},
            tools={"clock": {"server": "time", "timeout": -1}},
        ),
        ErrorCode.INVALID_TOOL_TIMEOUT,
        "tools.clock.timeout",
    ),
    (
        "tool approval not a boolean",
        lambda d: d.update(tools={"clock": {"approval": "yes"}}),
        ErrorCode.INVALID_TYPE,
        "tools.clock.approval",
    ),
    (
        "unknown tool policy key",
        lambda d: d.update(tools={"clock": {"retries": 3}}),
        ErrorCode.UNKNOWN_KEY,
        "tools.clock.retries",
    ),
    (
        "unknown initial",
        lambda d: conv(d).update(initial="nowhere"),
        ErrorCode.UNKNOWN_INITIAL_STATE,
        "conversation.initial",
    ),
    (
        "empty state name",
        lambda d: conv(d)["states"].update({" ": {}}),
        ErrorCode.EMPTY_STATE_NAME,
        "conversation.states. ",
    ),
    (
        "unknown target",
        lambda d: conv(d)["states"]["idle"]["on"].update(start="limbo"),
        ErrorCode.UNKNOWN_TRANSITION_TARGET,
        "conversation.states.idle.on.start",
    ),
    (
        "empty event in state",
        lambda d: conv(d)["states"]["complete"].update(on={"": "idle"}),
        ErrorCode.EMPTY_EVENT,
        "conversation.states.complete.on.",
    ),
    (
        "no states",
        lambda d: conv(d).update(states={}, initial="idle", routes=[]),
        ErrorCode.NO_STATES,
        "conversation.states",
    ),
    (
        "empty route id",
        lambda d: conv(d)["routes"][0].update(id=""),
        ErrorCode.EMPTY_ROUTE_ID,
        "conversation.routes[0].id",
    ),
    (
        "duplicate route id",
        lambda d: conv(d)["routes"][1].update(id="start"),
        ErrorCode.DUPLICATE_ROUTE_ID,
        "conversation.routes[1].id",
    ),
    (
        "invalid route id",
        lambda d: conv(d)["routes"][0].update(id="-bad id"),
        ErrorCode.INVALID_ID,
        "conversation.routes[0].id",
    ),
    (
        "empty route event",
        lambda d: conv(d)["routes"][0].update(event=" "),
        ErrorCode.EMPTY_EVENT,
        "conversation.routes[0].event",
    ),
    (
        "undeclared route event",
        lambda d: conv(d)["routes"][0].update(event="teleport"),
        ErrorCode.UNDECLARED_EVENT,
        "conversation.routes[0].event",
    ),
    (
        "unknown route state",
        lambda d: conv(d)["routes"][1].update(states=["collecting", "gone"]),
        ErrorCode.UNKNOWN_ROUTE_STATE,
        "conversation.routes[1].states[1]",
    ),
    (
        "empty route states",
        lambda d: conv(d)["routes"][1].update(states=[]),
        ErrorCode.EMPTY_ROUTE_STATES,
        "conversation.routes[1].states",
    ),
    (
        "empty command",
        lambda d: conv(d)["routes"][0].update(command="  "),
        ErrorCode.EMPTY_COMMAND,
        "conversation.routes[0].command",
    ),
    (
        "empty exact",
        lambda d: conv(d)["routes"][0].pop("command") and conv(d)["routes"][0].update(exact=" \t"),
        ErrorCode.EMPTY_EXACT,
        "conversation.routes[0].exact",
    ),
    (
        "invalid pattern",
        lambda d: conv(d)["routes"][1].update(pattern="(unclosed"),
        ErrorCode.INVALID_PATTERN,
        "conversation.routes[1].pattern",
    ),
    (
        "backreference pattern",
        lambda d: conv(d)["routes"][1].update(pattern=r"(a)\1"),
        ErrorCode.INVALID_PATTERN,
        "conversation.routes[1].pattern",
    ),
    (
        "empty pattern",
        lambda d: conv(d)["routes"][1].update(pattern=""),
        ErrorCode.INVALID_PATTERN,
        "conversation.routes[1].pattern",
    ),
    (
        "unknown template group",
        lambda d: conv(d)["routes"][1].update(response="Hi {nmae}"),
        ErrorCode.UNKNOWN_TEMPLATE_FIELD,
        "conversation.routes[1].response",
    ),
    (
        "template field without pattern",
        lambda d: conv(d)["routes"][0].update(response="{name}"),
        ErrorCode.UNKNOWN_TEMPLATE_FIELD,
        "conversation.routes[0].response",
    ),
    (
        "malformed template",
        lambda d: conv(d)["routes"][0].update(response="Hi {"),
        ErrorCode.INVALID_TEMPLATE,
        "conversation.routes[0].response",
    ),
    (
        "template attribute access",
        lambda d: conv(d)["routes"][0].update(response="{session_id.x}"),
        ErrorCode.INVALID_TEMPLATE,
        "conversation.routes[0].response",
    ),
    (
        "invalid kind",
        lambda d: conv(d)["routes"][0].update(kind="agentic"),
        ErrorCode.INVALID_KIND,
        "conversation.routes[0].kind",
    ),
    (
        "two matchers",
        lambda d: conv(d)["routes"][0].update(exact="/start"),
        ErrorCode.MATCHER_COUNT,
        "conversation.routes[0]",
    ),
    (
        "no matcher",
        lambda d: conv(d)["routes"][0].pop("command"),
        ErrorCode.MATCHER_COUNT,
        "conversation.routes[0]",
    ),
    ("unknown top key", lambda d: d.update(colour="blue"), ErrorCode.UNKNOWN_KEY, "colour"),
    (
        "unknown route key",
        lambda d: conv(d)["routes"][0].update(target="complete"),
        ErrorCode.UNKNOWN_KEY,
        "conversation.routes[0].target",
    ),
    (
        "unknown state key",
        lambda d: conv(d)["states"]["idle"].update(entry="x"),
        ErrorCode.UNKNOWN_KEY,
        "conversation.states.idle.entry",
    ),
    ("missing id", lambda d: d.pop("id"), ErrorCode.MISSING_KEY, "id"),
    (
        "missing route event",
        lambda d: conv(d)["routes"][0].pop("event"),
        ErrorCode.MISSING_KEY,
        "conversation.routes[0].event",
    ),
    (
        "missing response",
        lambda d: conv(d)["routes"][0].pop("response"),
        ErrorCode.MISSING_KEY,
        "conversation.routes[0].response",
    ),
    (
        "routes not a list",
        lambda d: conv(d).update(routes={"a": 1}),
        ErrorCode.INVALID_TYPE,
        "conversation.routes",
    ),
    (
        "route not a mapping",
        lambda d: conv(d)["routes"].append("start"),
        ErrorCode.INVALID_TYPE,
        "conversation.routes[2]",
    ),
    (
        "state list not strings",
        lambda d: conv(d)["routes"][1].update(states="collecting"),
        ErrorCode.INVALID_TYPE,
        "conversation.routes[1].states",
    ),
    (
        "numeric response",
        lambda d: conv(d)["routes"][0].update(response=3),
        ErrorCode.INVALID_TYPE,
        "conversation.routes[0].response",
    ),
    ("zero revision", lambda d: d.update(revision=0), ErrorCode.INVALID_REVISION, "revision"),
    ("text revision", lambda d: d.update(revision="1"), ErrorCode.INVALID_REVISION, "revision"),
    ("bool revision", lambda d: d.update(revision=True), ErrorCode.INVALID_REVISION, "revision"),
    ("invalid id", lambda d: d.update(id="support chat"), ErrorCode.INVALID_ID, "id"),
    ("long id", lambda d: d.update(id="a" * 129), ErrorCode.INVALID_ID, "id"),
    ("model not a mapping", lambda d: d.update(model="openai"), ErrorCode.INVALID_MODEL, "model"),
    (
        "model without adapter",
        lambda d: d.update(model={"base_url": "x"}),
        ErrorCode.INVALID_MODEL,
        "model.adapter",
    ),
    (
        "empty action",
        lambda d: conv(d)["states"]["idle"]["actions"].append(""),
        ErrorCode.EMPTY_ACTION,
        "conversation.states.idle.actions[1]",
    ),
    (
        "duplicate action",
        lambda d: conv(d)["states"]["idle"]["actions"].append("start"),
        ErrorCode.DUPLICATE_ACTION,
        "conversation.states.idle.actions[1]",
    ),
]


@pytest.mark.parametrize(
    ("change", "code", "path"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_each_error_has_code_and_path(change: Any, code: ErrorCode, path: str) -> None:
    diagnostic = single(mutate(change))
    assert (diagnostic.code, diagnostic.path) == (code, path)
    assert "\n" not in diagnostic.message
    assert str(diagnostic).startswith(f"chat.yaml: {path}")


def test_every_error_code_is_exercised() -> None:
    file_level = {
        ErrorCode.READ_ERROR,
        ErrorCode.PARSE_ERROR,
        ErrorCode.UNSUPPORTED_FORMAT,
        ErrorCode.DUPLICATE_KEY,
        ErrorCode.DUPLICATE_DEFINITION,
        ErrorCode.INVALID_CALLABLE,
    }  # covered in test_loading.py and below
    covered = {case[2] for case in CASES} | file_level
    assert covered == set(ErrorCode)


def test_all_errors_are_reported_at_once() -> None:
    def break_many(d: dict[str, Any]) -> None:
        d["revision"] = -1
        conv(d)["initial"] = "nowhere"
        conv(d)["routes"][0]["event"] = "teleport"
        conv(d)["routes"][1]["pattern"] = "(?P<x"

    found = errors(mutate(break_many))
    assert {d.code for d in found} == {
        ErrorCode.INVALID_REVISION,
        ErrorCode.UNKNOWN_INITIAL_STATE,
        ErrorCode.UNDECLARED_EVENT,
        ErrorCode.INVALID_PATTERN,
    }


def test_config_error_message_lists_every_diagnostic() -> None:
    def break_two(d: dict[str, Any]) -> None:
        d["revision"] = 0
        conv(d)["routes"][0]["command"] = ""

    with pytest.raises(ConfigError) as caught:
        parse_definition(mutate(break_two), file="chat.yaml")
    text = str(caught.value)
    assert text.startswith("2 definition errors:")
    assert "chat.yaml: revision:" in text
    assert "chat.yaml: conversation.routes[0].command:" in text


def test_structural_errors_do_not_cascade() -> None:
    found = errors(mutate(lambda d: conv(d)["routes"][0].pop("id")))
    assert [(d.code, d.path) for d in found] == [
        (ErrorCode.MISSING_KEY, "conversation.routes[0].id")
    ]


def test_root_must_be_a_mapping() -> None:
    assert single(["not", "a", "mapping"]).code is ErrorCode.INVALID_TYPE


def test_validation_does_not_modify_the_input() -> None:
    data = mutate(lambda d: d.update(revision=0))
    snapshot = copy.deepcopy(data)
    errors(data)
    assert data == snapshot


def test_code_defined_chats_are_validated_the_same_way() -> None:
    with pytest.raises(ConfigError) as caught:
        define_chat(
            id="code",
            conversation={
                "initial": "a",
                "states": {"a": {"on": {"go": "b"}}, "b": {}},
                "routes": [
                    command_route(id="go", command="", event="go", response="x"),
                    command_route(id="go", command="/go", event="go", response="x", states=["c"]),
                ],
            },
            source="my_module.py",
        )
    found = [(d.code, d.path, d.file) for d in caught.value.diagnostics]
    assert found == [
        (ErrorCode.EMPTY_COMMAND, "conversation.routes[0].command", "my_module.py"),
        (ErrorCode.DUPLICATE_ROUTE_ID, "conversation.routes[1].id", "my_module.py"),
        (ErrorCode.UNKNOWN_ROUTE_STATE, "conversation.routes[1].states[0]", "my_module.py"),
    ]


def test_code_defined_handlers_and_responses_must_be_callable() -> None:
    with pytest.raises(ConfigError) as caught:
        define_chat(
            id="code",
            conversation={
                "initial": "a",
                "states": {"a": {"on": {"go": "a"}}},
                "routes": [handler_route(id="h", handler="nope", event="go", response="x")],  # type: ignore[arg-type]
            },
        )
    assert [d.code for d in caught.value.diagnostics] == [ErrorCode.INVALID_CALLABLE]
    assert caught.value.diagnostics[0].path == "conversation.routes[0].handler"


@pytest.mark.parametrize(
    "conversation",
    [
        {"initial": "a", "states": {"a": None, "b": 3}},
        {"initial": "a", "states": {"a": {"on": {"go": 7}}}},
        {"initial": "a", "states": ["a"]},
        {"initial": 1, "states": {"a": {}}, "routes": "none"},
    ],
    ids=["state-not-mapping", "target-not-text", "states-not-mapping", "wrong-types"],
)
def test_malformed_code_structures_are_config_errors(conversation: dict[str, Any]) -> None:
    with pytest.raises(ConfigError) as caught:
        define_chat(id="code", conversation=conversation)
    assert all(d.file == "<code>" for d in caught.value.diagnostics)
    assert ErrorCode.INVALID_TYPE in {d.code for d in caught.value.diagnostics}
